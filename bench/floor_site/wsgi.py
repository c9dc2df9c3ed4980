from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

# Forced, not setdefault: the bench runner's own environment names the real site.
os.environ["DJANGO_SETTINGS_MODULE"] = "bench.floor_site.settings"
application = get_wsgi_application()

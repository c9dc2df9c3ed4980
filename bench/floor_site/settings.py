"""The framework floor: the least a Django + gunicorn service must do per request.

No apps, no middleware, no database, no authentication: only URL routing, one
plain view, one EVALSHA on the same Redis as the real stack, and a JSON answer.
Whatever the real stack costs above this is ours to explain (see docs/benchmarks.md).
"""
from __future__ import annotations

import os

SECRET_KEY = "floor-site-benchmark-only-not-a-secret-0123456789"
DEBUG = False
ALLOWED_HOSTS = ["*"]
INSTALLED_APPS: list[str] = []
MIDDLEWARE: list[str] = []
ROOT_URLCONF = "bench.floor_site.urls"
DATABASES: dict = {}
USE_TZ = True
USE_I18N = False
APPEND_SLASH = False
# The same 65 MiB ceiling as the real stack, so a bulk body is never refused here only.
DATA_UPLOAD_MAX_MEMORY_SIZE = 65 * 1024 * 1024 + 64 * 1024
FLOOR_REDIS_URL = os.environ["FLOOR_REDIS_URL"]

from __future__ import annotations

from django.contrib import admin
from django.http import JsonResponse
from django.urls import path, re_path

from queues.api.urls import admin_urlpatterns, api_urlpatterns


def api_not_found(request, *args, **kwargs):
    return JsonResponse({"error": "api not found"}, status=404)


urlpatterns = [
    path("admin/", admin.site.urls),
    *api_urlpatterns,
    *admin_urlpatterns,
    # lmstfy answers every unknown route with this body; only /admin/ pages are HTML.
    re_path(r"^(?!admin/|static/).*$", api_not_found),
]

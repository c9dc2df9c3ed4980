from __future__ import annotations

from django.contrib import admin
from django.http import JsonResponse
from django.urls import include, path, re_path

from queues.api.manage_urls import manage_urlpatterns
from queues.api.urls import admin_urlpatterns, api_urlpatterns


def api_not_found(request, *args, **kwargs):
    return JsonResponse({"error": "api not found"}, status=404)


def server_error(request, *args, **kwargs):
    """Unexpected failures answer JSON like the rest of the API, never an HTML page."""
    if request.path.startswith("/admin/"):
        from django.views.defaults import server_error as html_server_error

        return html_server_error(request)
    return JsonResponse({"error": "internal error"}, status=500)


handler500 = server_error


urlpatterns = [
    # Before the Django admin: the dashboard takes over /admin/queues/ (see queues/admin_urls.py).
    path("admin/queues/", include("queues.admin_urls")),
    path("admin/", admin.site.urls),
    *manage_urlpatterns,
    *api_urlpatterns,
    *admin_urlpatterns,
    # lmstfy answers every unknown route with this body; only /admin/ pages are HTML.
    re_path(r"^(?!admin/|static/).*$", api_not_found),
]

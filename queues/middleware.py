from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.urls import Resolver404, URLResolver
from django.urls.resolvers import RegexPattern

from queues import ulid


class RequestIdMiddleware:
    """Every response carries X-Request-ID (a fresh ULID, as lmstfy does)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = ulid.new_ulid()
        request.request_id = request_id
        response = self.get_response(request)
        response["X-Request-ID"] = request_id
        return response


class ApiFastPathMiddleware:
    """Serves /api/ requests directly, skipping the middleware below it (static
    files, sessions, CSRF, user auth, messages, clickjacking): the lmstfy API
    authenticates by token, sets no cookie and renders no page, and on the
    publish/consume hot path that stack costs more than the job itself. Any
    other path, or an /api/ path no API route matches, takes the full stack.
    """

    API_PREFIX = "/api/"

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        from queues.api.urls import api_urlpatterns

        self.get_response = get_response
        # Only the API's own routes: resolving against the site's whole URL map
        # would walk the admin and management routes first.
        self.resolver = URLResolver(RegexPattern(r"^/"), api_urlpatterns)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path_info.startswith(self.API_PREFIX):
            return self.get_response(request)
        try:
            match = self.resolver.resolve(request.path_info)
        except Resolver404:
            return self.get_response(request)
        request.resolver_match = match
        response = match.func(request, *match.args, **match.kwargs)
        if hasattr(response, "render") and callable(response.render):
            response = response.render()
        response.setdefault("X-Content-Type-Options", "nosniff")
        return response

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

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

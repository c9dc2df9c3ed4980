"""One error shape for the lmstfy API and one place that maps failures to it.

lmstfy answers `{"error": "..."}` (and `{"msg": "no job available"}` for an
empty consume); DRF's own errors on lmstfy routes are reshaped to match. The
management API (/manage/v1/) keeps DRF's field-error shape.
"""
from __future__ import annotations

import json
import logging

import redis
from django.http import HttpResponse
from rest_framework import exceptions, status
from rest_framework.views import exception_handler as drf_exception_handler

from queues.engine import JobNotFound

log = logging.getLogger(__name__)
STORAGE_UNAVAILABLE = "storage unavailable"


class ApiResponse(HttpResponse):
    """A JSON answer as lmstfy writes them (compact, UTF-8); no data, no body."""

    def __init__(self, data=None, status: int = 200, headers: dict[str, str] | None = None) -> None:
        if data is None:
            super().__init__(b"", status=status, headers=headers)
            return
        body = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
        super().__init__(body, status=status, headers=headers, content_type="application/json")


class ApiError(Exception):
    def __init__(self, status_code: int, message: str, key: str = "error",
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.key = key
        self.headers = headers or {}

    def response(self) -> HttpResponse:
        return ApiResponse({self.key: self.message}, status=self.status_code, headers=self.headers)


def bad_request(message: str) -> ApiError:
    return ApiError(status.HTTP_400_BAD_REQUEST, message)


def api_not_found() -> ApiError:
    return ApiError(status.HTTP_404_NOT_FOUND, "api not found")


def error_response(exc: Exception) -> HttpResponse | None:
    """The answer to a failure of ours (API errors, engine errors, Redis); None for others."""
    if isinstance(exc, ApiError):
        return exc.response()
    if isinstance(exc, JobNotFound):
        return ApiError(status.HTTP_404_NOT_FOUND, "job not found").response()
    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError)):
        log.warning("Redis unavailable: %s", exc)
        return ApiError(status.HTTP_503_SERVICE_UNAVAILABLE, STORAGE_UNAVAILABLE).response()
    if isinstance(exc, redis.RedisError):
        log.exception("Redis error")
        return internal_error()
    return None


def internal_error() -> HttpResponse:
    return ApiError(status.HTTP_500_INTERNAL_SERVER_ERROR, "internal error").response()


def exception_handler(exc: Exception, context: dict) -> HttpResponse | None:
    """DRF's handler for the admin and management routes."""
    ours = error_response(exc)
    if ours is not None:
        return ours
    response = drf_exception_handler(exc, context)
    if not getattr(context.get("view"), "lmstfy_errors", False):
        return response
    if response is None:
        log.exception("unexpected error in %s", type(context.get("view")).__name__, exc_info=exc)
        return internal_error()
    if isinstance(exc, exceptions.APIException):
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        response.data = {"error": str(detail)}
    return response

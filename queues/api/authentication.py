"""Token authentication for /api/ (a plain function: the job views are not DRF
views, see queues/api/views.py) with lmstfy's rules and exact errors:

- the token comes from the X-Token header, else the `token` query parameter;
- `pool:token` picks a pool; no prefix is the default pool; an unknown pool is
  404 "pool not found", checked even on the public routes;
- no token is 401 "token not found"; a token not granted for the namespace in
  that pool is 401 "invalid token".
"""
from __future__ import annotations

import hmac
from dataclasses import dataclass

from django.conf import settings
from rest_framework import status
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed

from queues import metrics, pools, tokens
from queues.api.errors import ApiError


@dataclass(frozen=True)
class Grant:
    pool: str
    namespace: str
    token_id: int | None   # None on a public route
    token_digest: str = ""


def raw_token(request) -> str:
    # META, not request.headers: building the headers mapping costs more than the lookup.
    return request.META.get("HTTP_X_TOKEN") or request.GET.get("token") or ""


def authenticate(request, namespace: str, public: bool = False) -> Grant:
    """The grant of an /api/ request, or the lmstfy error that refuses it."""
    pool, token = pools.split_token(raw_token(request))
    if pool not in pools.configured_urls():
        raise ApiError(status.HTTP_404_NOT_FOUND, "pool not found")
    if public:
        return Grant(pool=pool, namespace=namespace, token_id=None)
    if not token:
        metrics.count_auth_failure("token_missing")
        raise ApiError(status.HTTP_401_UNAUTHORIZED, "token not found")
    token_id = tokens.cache.lookup(pool, namespace, token)
    if token_id is None:
        metrics.count_auth_failure("token_invalid")
        raise ApiError(status.HTTP_401_UNAUTHORIZED, "invalid token")
    return Grant(pool=pool, namespace=namespace, token_id=token_id, token_digest=tokens.digest(token))


METRICS_SCRAPER = "metrics-token"  # request.auth of a scrape authenticated by LMSTFY_METRICS_TOKEN


class MetricsTokenAuthentication(BaseAuthentication):
    """/metrics: `Authorization: Bearer <LMSTFY_METRICS_TOKEN>` (Prometheus's
    bearer token). Does nothing while the setting is unset, so staff auth is then
    the only way in."""

    def authenticate(self, request):
        expected = settings.LMSTFY_METRICS_TOKEN
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if not expected or scheme.lower() != "bearer":
            return None
        if not hmac.compare_digest(given.strip().encode(), expected.encode()):
            raise AuthenticationFailed("invalid metrics token")
        return None, METRICS_SCRAPER

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="metrics"'

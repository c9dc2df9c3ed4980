"""Token authentication for /api/ with lmstfy's rules and exact errors:

- the token comes from the X-Token header, else the `token` query parameter;
- `pool:token` picks a pool; no prefix is the default pool; an unknown pool is
  404 "pool not found", checked even on the public routes;
- no token is 401 "token not found"; a token not granted for the namespace in
  that pool is 401 "invalid token".
"""
from __future__ import annotations

from dataclasses import dataclass

from rest_framework import status
from rest_framework.authentication import BaseAuthentication

from queues import pools, tokens
from queues.api.errors import ApiError


@dataclass(frozen=True)
class Grant:
    pool: str
    namespace: str
    token_id: int | None   # None on a public route
    token_digest: str = ""


def raw_token(request) -> str:
    return request.headers.get("X-Token") or request.query_params.get("token") or ""


class LmstfyTokenAuthentication(BaseAuthentication):
    def authenticate(self, request):
        view = request.parser_context["view"]
        namespace = request.parser_context["kwargs"]["namespace"]
        pool, token = pools.split_token(raw_token(request))
        if pool not in pools.configured_urls():
            raise ApiError(status.HTTP_404_NOT_FOUND, "pool not found")
        if getattr(view, "public", False):
            return None, Grant(pool=pool, namespace=namespace, token_id=None)
        if not token:
            raise ApiError(status.HTTP_401_UNAUTHORIZED, "token not found")
        token_id = tokens.cache.lookup(pool, namespace, token)
        if token_id is None:
            raise ApiError(status.HTTP_401_UNAUTHORIZED, "invalid token")
        return None, Grant(pool=pool, namespace=namespace, token_id=token_id, token_digest=tokens.digest(token))

    def authenticate_header(self, request) -> str:
        return "Token"

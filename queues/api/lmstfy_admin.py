"""lmstfy's admin routes, at lmstfy's paths, served by the same application:
/token/..., /pools, /info, /version. Unlike upstream, all but /version need a
staff user (HTTP Basic or a staff session)."""
from __future__ import annotations

import json

from django.http import HttpResponse
from rest_framework import status
from rest_framework.authentication import BasicAuthentication, SessionAuthentication
from rest_framework.permissions import IsAdminUser
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from queues import inspect, names, pools, tokens
from queues.api.errors import api_not_found, bad_request
from queues.models import Token

VERSION = "1.0.0"
BUILD_COMMIT = "unknown"
BUILD_DATE = "unknown"


class AdminView(APIView):
    authentication_classes = [BasicAuthentication, SessionAuthentication]
    permission_classes = [IsAdminUser]
    renderer_classes = [JSONRenderer]
    lmstfy_errors = True

    def http_method_not_allowed(self, request, *args, **kwargs):
        raise api_not_found()


def indented(data, indent: int = 4) -> HttpResponse:
    """lmstfy pretty-prints some admin answers (gin's IndentedJSON)."""
    return HttpResponse(json.dumps(data, indent=indent), content_type="application/json; charset=utf-8")


def pool_param(request) -> str:
    pool = request.query_params.get("pool") or pools.DEFAULT_POOL
    if pool not in pools.configured_urls():
        raise bad_request("the pool was not exists")
    return pool


def check_namespace(namespace: str) -> None:
    if len(namespace) > names.MAX_NAME_LENGTH:
        raise bad_request("the namespace name was too long")
    if names.namespace_error(namespace):
        raise bad_request(names.BAD_NAMESPACE)


class TokenList(AdminView):
    """POST /token/:ns creates a token; GET /token/:ns lists them."""

    def post(self, request, namespace: str):
        description = request.query_params.get("description") or request.POST.get("description", "")
        if not description:
            raise bad_request("invalid description")
        check_namespace(namespace)
        pool = pool_param(request)
        user_token = request.query_params.get("token") or request.POST.get("token") or None
        if user_token is not None:
            if ":" in user_token:
                pool, user_token = pools.split_token(user_token)
                if pool not in pools.configured_urls():
                    raise bad_request("the pool was not exists")
            if len(user_token) < tokens.MIN_USER_TOKEN_LENGTH:
                raise bad_request("the user token was too short")
        try:
            _, plain = tokens.create_token(namespace, description, pool, user_token, created_by=request.user)
        except tokens.TokenExists:
            raise bad_request("the token has already existed") from None
        value = plain if pool == pools.DEFAULT_POOL else f"{pool}:{plain}"
        response = indented({"token": value})
        response.status_code = status.HTTP_201_CREATED
        return response

    def get(self, request, namespace: str):
        pool = pool_param(request)
        prefix = f"{pool}:" if "pool" in request.query_params else ""
        listed = {}
        for token in Token.objects.active().filter(namespace__name=namespace, pool=pool):
            listed[prefix + tokens.listed_value(token)] = token.description
        return Response({"tokens": listed})


class TokenDetail(AdminView):
    """DELETE /token/:ns/:token revokes (the token may carry `pool:`)."""

    def delete(self, request, namespace: str, token: str):
        pool, plain = pools.split_token(token)
        if pool not in pools.configured_urls():
            raise bad_request("the pool was not exists")
        tokens.revoke_token(namespace, pool, plain)
        return Response(status=status.HTTP_204_NO_CONTENT)


class PoolList(AdminView):
    def get(self, request):
        return indented(pools.pool_names(), indent=2)


class Info(AdminView):
    """{namespace: [queues]} of a pool; an unknown pool answers 200 with an empty
    body (as upstream). Durability problems come as X-Lmstfy-Warning headers."""

    def get(self, request):
        pool = request.query_params.get("pool") or pools.DEFAULT_POOL
        if pool not in pools.configured_urls():
            return HttpResponse(b"", status=200)
        response = indented(inspect.namespaces_with_queues(pool))
        for i, warning in enumerate(pools.durability_warnings(pool)):
            response.headers[f"X-Lmstfy-Warning-{i + 1}"] = warning
        return response


class Version(AdminView):
    authentication_classes: list = []
    permission_classes: list = []

    def get(self, request):
        return indented({"version": VERSION, "build_commit": BUILD_COMMIT, "build_date": BUILD_DATE})

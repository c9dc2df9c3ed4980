"""lmstfy's admin routes, at lmstfy's paths, served by the same application:
/token/..., /pools, /info, /version, /metrics. Unlike upstream, all but /version
need a staff user (HTTP Basic or a staff session); /metrics also accepts the
bearer token LMSTFY_METRICS_TOKEN."""
from __future__ import annotations

import json

from django.http import HttpResponse, StreamingHttpResponse
from rest_framework import status
from rest_framework.authentication import BasicAuthentication, SessionAuthentication
from rest_framework.permissions import BasePermission, IsAdminUser
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from queues import inspect, metrics, names, pools, throttling, tokens
from queues.api import openapi
from queues.api.authentication import METRICS_SCRAPER, MetricsTokenAuthentication
from queues.api.errors import ApiError, api_not_found, bad_request
from queues.models import Token, TokenLimit

VERSION = "1.0.0"
BUILD_COMMIT = "unknown"
BUILD_DATE = "unknown"


class AdminView(APIView):
    authentication_classes = [BasicAuthentication, SessionAuthentication]
    permission_classes = [IsAdminUser]
    renderer_classes = [JSONRenderer]
    lmstfy_errors = True

    def initial(self, request, *args, **kwargs):
        # lmstfy (gin) finds no route for a wrong method: "api not found", even
        # before authentication, as on every other unknown route.
        if not hasattr(self, request.method.lower()):
            raise api_not_found()
        super().initial(request, *args, **kwargs)


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
        # Longer than the column would be a database error (a 500) on PostgreSQL.
        if not description or len(description) > Token._meta.get_field("description").max_length:
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


def find_token(namespace: str, token: str) -> Token | None:
    """By plain value or listed value, with an optional `pool:`."""
    pool, plain = pools.split_token(token)
    return tokens.find(namespace, pool, plain)


def limiter_body(request) -> dict:
    """The JSON body {"read","write","interval"} of the limit routes."""
    try:
        body = json.loads(request.body or b"null")
    except ValueError:
        raise bad_request("the body must be a JSON object {read, write, interval}") from None
    if not isinstance(body, dict) or not all(
            isinstance(body.get(k, 0), int) and not isinstance(body.get(k, 0), bool)
            for k in ("read", "write", "interval")):
        raise bad_request("the body must be a JSON object {read, write, interval} of integers")
    limiter = {k: body.get(k, 0) for k in ("read", "write", "interval")}
    if limiter["read"] == 0 and limiter["write"] == 0:
        raise LimiterRejected(limiter)
    if limiter["interval"] == 0:
        raise bad_request("interval should be > 0")
    if limiter["interval"] < 0:
        raise ApiError(status.HTTP_500_INTERNAL_SERVER_ERROR, "limiter interval should be > 0")
    return limiter


class LimiterRejected(ApiError):
    """lmstfy answers a limiter with neither read nor write with the limiter itself."""

    def __init__(self, limiter: dict) -> None:
        super().__init__(status.HTTP_400_BAD_REQUEST, "")
        self.limiter = limiter

    def response(self) -> Response:
        return Response({"limiter": self.limiter}, status=self.status_code)


class TokenLimitDetail(AdminView):
    """GET/POST/PUT/DELETE /token/:ns/:token/limit (lmstfy's throttler admin)."""

    def get(self, request, namespace: str, token: str):
        found = find_token(namespace, token)
        limit = getattr(found, "limit", None) if found else None
        if limit is None:
            return HttpResponse(b"null", status=404, content_type="application/json")
        return Response(limit.as_dict())

    def post(self, request, namespace: str, token: str):
        limiter = limiter_body(request)
        found = self._token_or_404(namespace, token)
        _, created = TokenLimit.objects.get_or_create(token=found, defaults=limiter)
        if not created:
            raise ApiError(status.HTTP_500_INTERNAL_SERVER_ERROR,
                           f"throttler token({pools.split_token(token)[1]}) has already exists")
        throttling.limits.reload()
        return Response({"limiter": limiter}, status=status.HTTP_201_CREATED)

    def put(self, request, namespace: str, token: str):
        limiter = limiter_body(request)
        found = self._token_or_404(namespace, token)
        TokenLimit.objects.update_or_create(token=found, defaults=limiter)
        throttling.limits.reload()
        return Response({"limiter": limiter})

    def delete(self, request, namespace: str, token: str):
        found = find_token(namespace, token)
        if found is not None:
            TokenLimit.objects.filter(token=found).delete()
            throttling.limits.reload()
        return Response({"msg": "success"})

    @staticmethod
    def _token_or_404(namespace: str, token: str) -> Token:
        found = find_token(namespace, token)
        if found is None:
            raise ApiError(status.HTTP_404_NOT_FOUND, "token not found")
        return found


class LimitList(AdminView):
    """GET /limits: every token's limiter (the token as GET /token/:ns lists it)."""

    def get(self, request):
        rows = TokenLimit.objects.filter(token__revoked_at__isnull=True).select_related("token__namespace")
        answer = []
        for limit in rows:
            listed = tokens.listed_value(limit.token)
            if limit.token.pool != pools.DEFAULT_POOL:
                listed = f"{limit.token.pool}:{listed}"
            answer.append({"namespace": limit.token.namespace.name, "token": listed, "limiter": limit.as_dict()})
        return Response(answer)


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


class ApiSchema(AdminView):
    """The OpenAPI description of /api/ (public, like the API's own size routes)."""

    authentication_classes: list = []
    permission_classes: list = []

    def get(self, request):
        return Response(openapi.document())


class Version(AdminView):
    authentication_classes: list = []
    permission_classes: list = []

    def get(self, request):
        return indented({"version": VERSION, "build_commit": BUILD_COMMIT, "build_date": BUILD_DATE})


class IsStaffOrMetricsScraper(BasePermission):
    def has_permission(self, request, view) -> bool:
        return request.auth == METRICS_SCRAPER or bool(request.user and request.user.is_staff)


class Metrics(AdminView):
    """Prometheus text exposition (queues/metrics.py). Without credentials: 401
    with `WWW-Authenticate: Basic`."""

    authentication_classes = [BasicAuthentication, SessionAuthentication, MetricsTokenAuthentication]
    permission_classes = [IsStaffOrMetricsScraper]

    def get(self, request):
        return StreamingHttpResponse(metrics.scrape(), content_type=metrics.CONTENT_TYPE)

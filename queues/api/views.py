"""The lmstfy job API (/api/...) and our extensions. Each view parses and
validates its parameters in lmstfy's order, then makes one engine or inspect
call; it never builds a Redis key or reads a script's return code."""
from __future__ import annotations

import base64
import json
import logging

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.views import View
from django.views.decorators.csrf import csrf_exempt
from rest_framework import status

from queues import inspect, metrics, names, pools, throttling
from queues.api import params
from queues.api.authentication import authenticate, raw_token
from queues.api.errors import ApiError, api_not_found, bad_request, error_response, internal_error
from queues.api.errors import ApiResponse as Response
from queues.engine import Engine, Job

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1024 * 1024
MAX_BULK_JOBS = 64
MAX_CONSUME_COUNT = 100
MAX_ATTRIBUTES = 16
ATTRIBUTE_KEY_LENGTH = 32
ATTRIBUTE_VALUE_LENGTH = 128
MAX_PRIORITY = 255
MAX_IDEMPOTENCY_KEY = 255
MAX_CONTENT_TYPE = 255
# A long poll holds a server thread; waits past this answer "no job" (clients re-poll).
MAX_WAIT_S = 600
NO_JOB = {"msg": "no job available"}


class QueueView(View):
    """Base of every /api/ view: lmstfy's validation order (method, names, pool,
    token, throttle), its error shapes, and 404 "api not found" for any other
    method (HEAD and OPTIONS included).

    A plain Django view, not a DRF one: on the publish/consume hot path DRF's
    request wrapping, negotiation and rendering cost a fifth of the CPU, and
    these answers are lmstfy's fixed JSON, not serializers (bench/profile_app.py).
    """

    http_method_names = ["get", "put", "delete"]
    public = False
    multi_queue = False
    counted: str | None = None  # the throttle direction this request was counted in

    @classmethod
    def as_view(cls, **initkwargs):
        return csrf_exempt(super().as_view(**initkwargs))  # token-authenticated, no cookies

    def dispatch(self, request, *args, **kwargs):
        try:
            response = self.handle(request, **kwargs)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a JSON answer
            response = error_response(exc)
            if response is None:
                log.exception("unexpected error in %s", type(self).__name__)
                response = internal_error()
        self.give_back_unused_quota(response)
        return response

    def handle(self, request, namespace: str, queue: str, **kwargs):
        method = request.method.lower()
        if method not in self.http_method_names or not hasattr(self, method):
            raise api_not_found()
        error = names.consume_names_error(namespace, queue) if self.multi_queue else names.names_error(namespace, queue)
        if error:
            raise bad_request(error)
        request.query_params = request.GET
        request.auth = authenticate(request, namespace, public=self.public)
        direction = self.throttle_direction()
        if direction and request.auth.token_id is not None:
            self.count_request(request.auth.token_id, direction)
        return getattr(self, method)(request, namespace=namespace, queue=queue, **kwargs)

    def throttle_direction(self) -> str | None:
        """lmstfy throttles publish, bulk publish and consume only."""
        return None

    def count_request(self, token_id: int, direction: str) -> None:
        try:
            if throttling.take(token_id, direction):
                self.counted = direction
        except throttling.RateLimited:
            metrics.count_rate_limited(self.request.auth.namespace, direction)
            _, token = pools.split_token(raw_token(self.request))
            raise ApiError(status.HTTP_429_TOO_MANY_REQUESTS,
                           f"token({token}) {direction} reach the limit rate, please retry later",
                           key="msg") from None

    def give_back_unused_quota(self, response) -> None:
        """An empty consume or a failed publish does not use up the quota (lmstfy's remedy)."""
        success = status.HTTP_200_OK if self.counted == throttling.CONSUME else status.HTTP_201_CREATED
        if self.counted and response.status_code != success:
            throttling.give_back(self.request.auth.token_id, self.counted)

    def engine(self) -> Engine:
        return Engine(self.request.auth.pool)


def job_json(job: Job, remain_tries: int | None = None) -> dict:
    gone = job.state < 0
    return {
        "namespace": job.namespace,
        "queue": job.queue,
        "job_id": job.id,
        "data": None if gone else base64.b64encode(job.body).decode("ascii"),
        "ttl": job.ttl,
        "elapsed_ms": job.elapsed_ms,
        "remain_tries": job.tries_left if remain_tries is None else remain_tries,
        "attributes": job.attributes,
    }


def read_body(request, too_large: str = "body too large", limit: int = MAX_BODY_BYTES) -> bytes:
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > limit:
        raise ApiError(status.HTTP_413_REQUEST_ENTITY_TOO_LARGE, too_large)
    try:
        body = request.body
    except RequestDataTooBig:
        raise ApiError(status.HTTP_413_REQUEST_ENTITY_TOO_LARGE, too_large) from None
    if len(body) > limit:
        raise ApiError(status.HTTP_413_REQUEST_ENTITY_TOO_LARGE, too_large)
    return body


def publish_options(request) -> dict:
    """delay, ttl, tries, priority, attributes, content type and idempotency key,
    validated in lmstfy's order with its messages."""
    query = request.query_params
    delay = params.uint(query, "delay", settings.LMSTFY_DEFAULT_DELAY, params.UINT32_MAX, "invalid delay")
    ttl = params.uint(query, "ttl", settings.LMSTFY_DEFAULT_TTL, params.UINT32_MAX, "invalid ttl")
    if 0 < ttl < delay:
        raise bad_request("ttl is shorter than delay")
    tries = params.uint(query, "tries", settings.LMSTFY_DEFAULT_TRIES, params.UINT16_MAX, "invalid tries")
    if tries == 0:
        raise bad_request("tries shouldn't be zero")
    priority = params.uint(query, "priority", 0, MAX_PRIORITY, "invalid priority")
    meta = request.META  # not request.headers: building that mapping costs more than these lookups
    versioned = meta.get("HTTP_ENABLE_JOB_VERSION", "").upper() == "YES"
    key = meta.get("HTTP_IDEMPOTENCY_KEY")
    if key is not None and not 0 < len(key) <= MAX_IDEMPOTENCY_KEY:
        raise bad_request("invalid idempotency key")
    content_type = meta.get("CONTENT_TYPE", "")
    if len(content_type) > MAX_CONTENT_TYPE:
        raise bad_request("invalid content type")
    return {"delay_s": delay, "ttl_s": ttl, "tries": tries, "priority": priority, "versioned": versioned,
            "attributes": job_attributes(request) if versioned else None, "idempotency_key": key,
            "content_type": content_type}


def job_attributes(request) -> dict | None:
    """`Job-Attr-<Key>` headers: key lower-cased and cut to 32, value cut to 128,
    empty values skipped, at most 16 keys (lmstfy's rules)."""
    found: dict[str, str] = {}
    for header, value in request.headers.items():
        if not header.lower().startswith("job-attr-") or not value:
            continue
        key = header[len("job-attr-"):][:ATTRIBUTE_KEY_LENGTH].lower()
        found.setdefault(key, value[:ATTRIBUTE_VALUE_LENGTH])
    if len(found) > MAX_ATTRIBUTES:
        raise bad_request("too many attributes, cannot exceed 16")
    return found or None


def published_response(published, ids_field: str) -> Response:
    value = published.job_ids[0] if ids_field == "job_id" else published.job_ids
    if published.duplicated:
        return Response({"msg": "duplicated", ids_field: value}, status=status.HTTP_200_OK)
    return Response({"msg": "published", ids_field: value}, status=status.HTTP_201_CREATED)


class QueueRoot(QueueView):
    """PUT publish, GET consume (one or several queues), DELETE destroy."""

    @property
    def multi_queue(self) -> bool:  # consume validates a queue list
        return self.request.method == "GET"

    def throttle_direction(self) -> str | None:
        return {"GET": throttling.CONSUME, "PUT": throttling.PRODUCE}.get(self.request.method)

    def put(self, request, namespace: str, queue: str):
        options = publish_options(request)
        body = read_body(request)
        published = self.engine().publish(namespace, queue, [body], **options)
        return published_response(published, "job_id")

    def get(self, request, namespace: str, queue: str):
        query = request.query_params
        ttr = params.uint(query, "ttr", settings.LMSTFY_DEFAULT_TTR, params.UINT32_MAX, "invalid ttr")
        timeout = params.uint(query, "timeout", settings.LMSTFY_DEFAULT_TIMEOUT, params.UINT32_MAX,
                              "invalid timeout")
        count = params.uint(query, "count", 1, params.UINT32_MAX, "invalid count")
        if not 1 <= count <= MAX_CONSUME_COUNT:
            raise bad_request("invalid count")
        queues = [q for q in queue.split(",") if q]
        if not queues:
            raise bad_request("invalid queue name(s)")
        result = self.engine().consume_wait(namespace, list(dict.fromkeys(queues)), ttr_s=ttr, count=count,
                                            timeout_s=min(timeout, MAX_WAIT_S))
        if not result.jobs:
            headers = {"X-Queue-Paused": "1"} if result.paused else None
            return Response(NO_JOB, status=status.HTTP_404_NOT_FOUND, headers=headers)
        metrics.observe_consumed(namespace, result.jobs)
        answers = [{"msg": "new job", **job_json(job)} for job in result.jobs]
        return Response(answers[0] if count == 1 else answers)

    def delete(self, request, namespace: str, queue: str):
        self.engine().destroy(namespace, queue)
        return Response(status=status.HTTP_204_NO_CONTENT)


class BulkPublish(QueueView):
    def throttle_direction(self) -> str | None:
        return throttling.PRODUCE

    def put(self, request, namespace: str, queue: str):
        options = publish_options(request)
        bodies = bulk_elements(read_body(request, limit=MAX_BULK_JOBS * (MAX_BODY_BYTES + 64)))
        published = self.engine().publish(namespace, queue, bodies, **options)
        return published_response(published, "job_ids")


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")  # NaN and Infinity: Go's decoder refuses them too


def bulk_elements(body: bytes) -> list[bytes]:
    """The raw JSON text of each element of a JSON array, byte for byte."""
    not_array = bad_request("request body should be an array of objects")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise not_array from None
    if text.strip(" \t\n\r") == "null":
        raise bad_request("no jobs")  # Go decodes null into an empty slice
    decoder = json.JSONDecoder(parse_constant=_refuse_constant)
    index = _skip_ws(text, 0)
    if not text.startswith("[", index):
        raise not_array
    index = _skip_ws(text, index + 1)
    elements: list[bytes] = []
    if text.startswith("]", index):
        index += 1
    else:
        while True:
            try:
                _, end = decoder.raw_decode(text, index)
            except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
                raise not_array from None
            elements.append(text[index:end].encode("utf-8"))
            index = _skip_ws(text, end)
            if text.startswith(",", index):
                index = _skip_ws(text, index + 1)
            elif text.startswith("]", index):
                index += 1
                break
            else:
                raise not_array
    if _skip_ws(text, index) != len(text):
        raise not_array
    if not elements:
        raise bad_request("no jobs")
    if len(elements) > MAX_BULK_JOBS:
        raise bad_request("too many jobs")
    if any(len(element) > MAX_BODY_BYTES for element in elements):
        raise ApiError(status.HTTP_413_REQUEST_ENTITY_TOO_LARGE, "job too large")
    return elements


def _skip_ws(text: str, index: int) -> int:
    while index < len(text) and text[index] in " \t\n\r":
        index += 1
    return index


class JobDetail(QueueView):
    """PUT re-publish, GET peek job, DELETE ack."""

    def put(self, request, namespace: str, queue: str, job_id: str):
        options = publish_options(request)
        body = read_body(request)
        published = self.engine().republish(namespace, queue, job_id, body, **options)
        return published_response(published, "job_id")

    def get(self, request, namespace: str, queue: str, job_id: str):
        job = inspect.peek_job(self.request.auth.pool, namespace, queue, job_id)
        if job is None:
            raise ApiError(status.HTTP_404_NOT_FOUND, "job not found")
        return Response(job_json(job, remain_tries=0))

    def delete(self, request, namespace: str, queue: str, job_id: str):
        self.engine().ack(namespace, queue, job_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ReleaseJob(QueueView):
    def put(self, request, namespace: str, queue: str, job_id: str):
        delay = params.uint(request.query_params, "delay", 0, params.UINT32_MAX, "invalid delay")
        self.engine().release(namespace, queue, job_id, delay_s=delay)
        return Response(status=status.HTTP_204_NO_CONTENT)


class PeekQueue(QueueView):
    def get(self, request, namespace: str, queue: str):
        job = inspect.peek_head(self.request.auth.pool, namespace, queue)
        if job is None:
            raise ApiError(status.HTTP_404_NOT_FOUND, "the queue is empty")
        return Response(job_json(job, remain_tries=0 if job.state < 0 else None))


class QueueSize(QueueView):
    public = True

    def get(self, request, namespace: str, queue: str):
        size = inspect.ready_size(self.request.auth.pool, namespace, queue)
        return Response({"namespace": namespace, "queue": queue, "size": size})


class DeadLetterSize(QueueView):
    public = True

    def get(self, request, namespace: str, queue: str):
        size = inspect.dead_size(self.request.auth.pool, namespace, queue)
        return Response({"namespace": namespace, "queue": queue, "size": size})


# Expiry times are milliseconds held exactly in Lua doubles: keep them below 2^53.
MAX_RESPAWN_TTL_S = 2**53 // 1000 - 4 * 10**9


def respawn_ttl(request) -> int:
    ttl = params.int64(request.query_params, "ttl", settings.LMSTFY_DEFAULT_TTL, "invalid ttl")
    if not 0 <= ttl <= MAX_RESPAWN_TTL_S:
        raise bad_request("invalid ttl")
    return ttl


def dead_limit(request) -> int:
    limit = params.int64(request.query_params, "limit", 1, "invalid limit")
    if limit <= 0:
        raise bad_request("invalid limit")
    return limit


class DeadLetter(QueueView):
    """GET peek, PUT respawn (oldest first), DELETE (oldest first)."""

    def get(self, request, namespace: str, queue: str):
        size, head = inspect.dead_head(self.request.auth.pool, namespace, queue)
        return Response({"namespace": namespace, "queue": queue, "deadletter_size": size,
                         "deadletter_head": head or ""})

    def put(self, request, namespace: str, queue: str):
        limit = dead_limit(request)
        ttl = respawn_ttl(request)
        count = self.engine().respawn(namespace, queue, limit, ttl)
        return Response({"msg": "respawned", "count": count})

    def delete(self, request, namespace: str, queue: str):
        self.engine().delete_dead(namespace, queue, dead_limit(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


class DeadLetterJobs(QueueView):
    """Our extension: dead jobs oldest first, with data and attributes."""

    max_limit = 100

    def get(self, request, namespace: str, queue: str):
        query = request.query_params
        limit = params.uint(query, "limit", 20, params.UINT32_MAX, "invalid limit")
        if not 1 <= limit <= self.max_limit:
            raise bad_request("invalid limit")
        offset = params.uint(query, "offset", 0, params.UINT32_MAX, "invalid offset")
        total, jobs = inspect.dead_jobs(self.request.auth.pool, namespace, queue, offset, limit)
        return Response({"namespace": namespace, "queue": queue, "total": total, "offset": offset,
                         "jobs": [{**job_json(job), "deliveries": job.deliveries} for job in jobs]})


class DeadLetterJob(QueueView):
    """Our extension: PUT respawn / DELETE one dead job by id."""

    def put(self, request, namespace: str, queue: str, job_id: str):
        ttl = respawn_ttl(request)
        if not self.engine().respawn_ids(namespace, queue, [job_id], ttl):
            raise ApiError(status.HTTP_404_NOT_FOUND, "job not found")
        return Response({"msg": "respawned", "count": 1})

    def delete(self, request, namespace: str, queue: str, job_id: str):
        if not self.engine().delete_dead_ids(namespace, queue, [job_id]):
            raise ApiError(status.HTTP_404_NOT_FOUND, "job not found")
        return Response(status=status.HTTP_204_NO_CONTENT)


class Stats(QueueView):
    def get(self, request, namespace: str, queue: str):
        return Response(inspect.queue_stats(self.request.auth.pool, namespace, queue).as_dict())


class DueHistogram(QueueView):
    max_buckets = 1000

    def get(self, request, namespace: str, queue: str):
        query = request.query_params
        bucket = params.uint(query, "bucket", 3600, params.UINT32_MAX, "invalid bucket")
        if bucket < 1:
            raise bad_request("invalid bucket")
        buckets = params.uint(query, "buckets", 72, params.UINT32_MAX, "invalid buckets")
        if not 1 <= buckets <= self.max_buckets:
            raise bad_request("invalid buckets")
        start, counts = inspect.due_histogram(self.request.auth.pool, namespace, queue, bucket, buckets)
        return Response({"bucket": bucket, "start": start, "counts": counts})


class Pause(QueueView):
    def put(self, request, namespace: str, queue: str):
        self.engine().pause(namespace, queue, by=f"token:{self.request.auth.token_id}")
        return Response({"namespace": namespace, "queue": queue, "paused": True})

    def delete(self, request, namespace: str, queue: str):
        self.engine().resume(namespace, queue)
        return Response({"namespace": namespace, "queue": queue, "paused": False})

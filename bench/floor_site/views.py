"""One plain Django view per route, each doing exactly one EVALSHA.

The scripts are trivial on purpose: the floor measures HTTP parsing, routing,
one Redis round trip carrying the same bytes as the real request, and a JSON
answer of the same shape and size -- not queue logic.
"""
from __future__ import annotations

import base64
import json

import redis
from django.conf import settings
from django.http import HttpResponse, JsonResponse

# Sized like a real job id (26-char ULID), so answers weigh what ours weigh.
FAKE_JOB_ID = "01J0000000000000000000FLOR"
# Takes the bytes a publish would store; stores nothing.
COUNT_ARGS = "return #ARGV"
# Hands back `ARGV[1]` copies of `ARGV[2]`: the bytes a consume of that many jobs moves.
REPEAT_BODY = "local out = {} for i = 1, tonumber(ARGV[1]) do out[i] = ARGV[2] end return out"
FLOOR_BODY = b"x" * 100

_client = redis.Redis.from_url(settings.FLOOR_REDIS_URL)
_count_args = _client.register_script(COUNT_ARGS)
_repeat_body = _client.register_script(REPEAT_BODY)


def ping(request):
    return HttpResponse(b"pong")


def queue_root(request, namespace: str, queue: str):
    if request.method == "PUT":
        return publish(request, namespace, queue)
    if request.method == "GET":
        return consume(request, namespace, queue)
    return JsonResponse({"error": "api not found"}, status=404)


def publish(request, namespace: str, queue: str):
    _count_args(args=[request.body])
    return JsonResponse({"msg": "published", "job_id": FAKE_JOB_ID}, status=201)


def bulk_publish(request, namespace: str, queue: str):
    count = len(json.loads(request.body))
    _count_args(args=[request.body])
    return JsonResponse({"msg": "published", "job_ids": [FAKE_JOB_ID] * count}, status=201)


def consume(request, namespace: str, queue: str):
    count = int(request.GET.get("count", "1"))
    bodies = _repeat_body(args=[count, FLOOR_BODY])
    jobs = [{"msg": "new job", "namespace": namespace, "queue": queue, "job_id": FAKE_JOB_ID,
             "data": base64.b64encode(body).decode("ascii"), "ttl": 86400, "elapsed_ms": 1,
             "remain_tries": 0, "attributes": None} for body in bodies]
    return JsonResponse(jobs[0] if count == 1 else jobs, safe=False)


def ack(request, namespace: str, queue: str, job_id: str):
    _count_args(args=[job_id])
    return HttpResponse(status=204)

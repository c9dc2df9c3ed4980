"""Small seed/read helpers shared by the tests/test_api_*.py files.

They drive the public API through the DRF test client (the `api` fixture) and
read Redis only through `keys.py` and `inspect.py`, so a test says what it
checks rather than how the layout works.
"""
from __future__ import annotations

import base64

from queues import inspect, keys, pools
from queues.engine import Engine, Job, now_ms

OCTET = "application/octet-stream"
POOL = pools.DEFAULT_POOL


def url(queue: str = "q", suffix: str = "", query: str = "", namespace: str = "ns") -> str:
    path = f"/api/{namespace}/{queue}{suffix}"
    return f"{path}?{query}" if query else path


def publish(api, body: bytes = b"job", queue: str = "q", query: str = "", **headers) -> str:
    """Publish one job through the API and return its id (asserts 201)."""
    response = api.put(url(queue, query=query), data=body, content_type=OCTET, **headers)
    assert response.status_code == 201, response.content
    return response.json()["job_id"]


def consume(api, queues: str = "q", query: str = "") -> dict:
    """Consume one job through the API (asserts 200 and a single object)."""
    response = api.get(url(queues, query=query))
    assert response.status_code == 200, response.content
    return response.json()


def decoded(answer: dict) -> bytes | None:
    return None if answer["data"] is None else base64.b64decode(answer["data"])


def make_dead(api, engine: Engine, queue: str = "q", body: bytes = b"dead", query: str = "tries=1",
              **headers) -> str:
    """Publish a job with one try, lease it with ttr=0 and let the pump bury it."""
    job_id = publish(api, body, queue, query, **headers)
    leased = consume(api, queue, "ttr=0")
    assert leased["job_id"] == job_id
    engine.pump_due(now=now_ms() + 1)
    assert inspect.peek_job(POOL, "ns", queue, job_id).state == 3  # JobState.DEAD
    return job_id


def stats(queue: str = "q") -> dict:
    return inspect.queue_stats(POOL, "ns", queue).as_dict()


def peek_job(job_id: str, queue: str = "q") -> Job | None:
    return inspect.peek_job(POOL, "ns", queue, job_id)


def queue_traces(redis_client, queue: str = "q", namespace: str = "ns") -> list:
    """Every Redis key of the queue, plus its registry entry: [] when it never existed."""
    found = sorted(redis_client.keys(f"*{keys.tag(namespace, queue)}*"))
    if redis_client.sismember(keys.QUEUE_REGISTRY, keys.queue_member(namespace, queue)):
        found.append(keys.QUEUE_REGISTRY)
    return found

"""Redis goes away and comes back: the API answers 503 meanwhile, and with
`appendonly yes` every job published before the outage is still there."""
from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from rest_framework.test import APIClient

from queues import pools
from queues.engine import Engine, now_ms
from tests.testutil import ScratchRedis

pytestmark = pytest.mark.slow

STORAGE_UNAVAILABLE = {"error": "storage unavailable"}


@pytest.fixture
def scratch_pool(scratch_redis: ScratchRedis, settings) -> Iterator[ScratchRedis]:
    """The default pool pointed at a private redis-server (AOF on)."""
    settings.LMSTFY_POOLS = {"default": scratch_redis.url}
    pools.reset_clients()
    yield scratch_redis
    pools.reset_clients()  # `settings` restores LMSTFY_POOLS right after this


def publish(api: APIClient, body: bytes, query: str = "") -> str:
    response = api.put(f"/api/ns/q?{query}", data=body, content_type="application/octet-stream")
    assert response.status_code == 201, response.content
    return response.json()["job_id"]


def assert_storage_unavailable(response) -> None:
    assert response.status_code == 503
    assert json.loads(response.content) == STORAGE_UNAVAILABLE  # exactly this: no trace, no detail
    assert b"Traceback" not in response.content
    assert response["X-Request-ID"]


@pytest.mark.parametrize("stop", ["shutdown", "kill"])
def test_the_api_answers_503_during_an_outage_and_loses_nothing(scratch_pool: ScratchRedis, api: APIClient,
                                                                 stop: str) -> None:
    leased = [publish(api, b"leased %d" % i, "tries=2") for i in range(2)]
    taken = api.get("/api/ns/q?ttr=1&count=2")
    assert taken.status_code == 200, taken.content
    assert sorted(job["job_id"] for job in taken.json()) == sorted(leased)  # one try left each
    ready = [publish(api, b"ready %d" % i) for i in range(15)]
    delayed = [publish(api, b"delayed %d" % i, "delay=1") for i in range(3)]

    if stop == "shutdown":
        scratch_pool.shutdown()  # SHUTDOWN, not NOSAVE: the AOF is complete
    else:
        scratch_pool.kill()      # SIGKILL: appendfsync always still has every write

    assert_storage_unavailable(api.put("/api/ns/q", data=b"x", content_type="application/octet-stream"))
    assert_storage_unavailable(api.get("/api/ns/q?ttr=30"))
    assert_storage_unavailable(api.get("/api/ns/q/size"))
    assert_storage_unavailable(api.delete(f"/api/ns/q/job/{ready[0]}"))

    scratch_pool.start()  # same port, same directory: the AOF is replayed

    after = publish(api, b"after")
    Engine().pump_due(now=now_ms() + 60_000)  # the delays and the leases have run out meanwhile
    consumed = api.get("/api/ns/q?ttr=30&count=100")
    assert consumed.status_code == 200, consumed.content
    assert sorted(job["job_id"] for job in consumed.json()) == sorted(ready + delayed + leased + [after])
    assert api.get("/api/ns/q?ttr=30").status_code == 404

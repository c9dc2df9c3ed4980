"""PUT/DELETE /api/:ns/:q/pause — pause and resume a queue (SPEC §2.1, §3.3)."""
from __future__ import annotations

import threading
import time

import pytest

from queues import keys
from queues.engine import now_ms
from tests.api_helpers import consume, publish, stats, url


def pause(api, queue: str = "q"):
    return api.put(url(queue, suffix="/pause"))


def resume(api, queue: str = "q"):
    return api.delete(url(queue, suffix="/pause"))


def test_pause_answers_the_queue_and_paused_true(api):
    response = pause(api)

    assert response.status_code == 200
    assert response.json() == {"namespace": "ns", "queue": "q", "paused": True}


def test_resume_answers_the_queue_and_paused_false(api):
    pause(api)

    response = resume(api)

    assert response.status_code == 200
    assert response.json() == {"namespace": "ns", "queue": "q", "paused": False}


def test_pausing_twice_and_resuming_a_running_queue_are_harmless(api):
    assert [pause(api).status_code, pause(api).status_code] == [200, 200]
    assert [resume(api).status_code, resume(api).status_code] == [200, 200]
    assert stats()["paused"] is False


def test_a_paused_queue_accepts_publishes_but_gives_no_jobs(api):
    pause(api)

    job_id = publish(api)
    response = api.get(url())

    assert response.status_code == 404
    assert response.json() == {"msg": "no job available"}
    assert response["X-Queue-Paused"] == "1"
    assert stats()["ready"] == 1
    resume(api)
    assert consume(api)["job_id"] == job_id


def test_pausing_an_empty_queue_registers_it(api, redis_client):
    pause(api)

    assert redis_client.sismember(keys.QUEUE_REGISTRY, keys.queue_member("ns", "q"))


def test_the_pause_records_who_and_when(api, redis_client):
    before = now_ms()

    pause(api)

    meta = redis_client.hgetall(keys.meta("ns", "q"))
    assert meta[b"paused_by"].startswith(b"token:")
    assert before <= int(meta[b"paused_at_ms"]) <= now_ms()


def test_delayed_jobs_still_become_ready_while_paused(api, engine):
    publish(api, query="delay=10")
    pause(api)

    engine.pump_due(now=now_ms() + 10_000)

    assert (stats()["delayed"], stats()["ready"]) == (0, 1)
    assert api.get(url()).status_code == 404


def test_in_flight_jobs_return_on_their_ttr_while_paused(api, engine):
    job_id = publish(api, query="tries=2")
    consume(api, query="ttr=5")
    pause(api)

    engine.pump_due(now=now_ms() + 5_000)

    assert (stats()["inflight"], stats()["ready"], stats()["deadletter"]) == (0, 1, 0)
    resume(api)
    assert consume(api)["job_id"] == job_id


def test_nothing_is_dead_lettered_because_of_the_pause(api, engine):
    for _ in range(3):
        publish(api, query="tries=1")
    publish(api, query="tries=1&delay=5")
    pause(api)

    for minutes in range(1, 30):
        engine.pump_due(now=now_ms() + minutes * 60_000)

    assert stats() == {"namespace": "ns", "queue": "q", "ready": 4, "delayed": 0, "inflight": 0,
                       "deadletter": 0, "paused": True}


def test_acks_and_releases_still_work_while_paused(api):
    acked = publish(api)
    released = publish(api, query="tries=1")
    first, second = api.get(url(query="count=2")).json()
    assert [first["job_id"], second["job_id"]] == [acked, released]
    pause(api)

    assert api.delete(url(suffix=f"/job/{acked}")).status_code == 204
    assert api.put(url(suffix=f"/job/{released}/release")).status_code == 204
    assert (stats()["ready"], stats()["inflight"]) == (1, 0)


def test_pausing_one_queue_leaves_the_others_running(api):
    publish(api, queue="a")
    b = publish(api, queue="b")
    pause(api, "a")

    assert api.get(url("a")).status_code == 404
    assert consume(api, "b")["job_id"] == b


def test_resume_makes_consume_work_again(api):
    job_id = publish(api)
    pause(api)
    assert api.get(url()).status_code == 404

    resume(api)

    response = api.get(url())
    assert response.status_code == 200
    assert response.json()["job_id"] == job_id
    assert "X-Queue-Paused" not in response


@pytest.mark.slow
def test_resume_wakes_a_long_poll_waiting_on_the_paused_queue(api, engine):
    job_id = publish(api)
    pause(api)
    resumer = threading.Timer(0.3, lambda: engine.resume("ns", "q"))
    started = time.monotonic()
    resumer.start()

    response = api.get(url(query="timeout=5"))
    resumer.join()

    assert response.status_code == 200
    assert response.json()["job_id"] == job_id
    assert time.monotonic() - started < 1.0


@pytest.mark.slow
def test_a_long_poll_on_a_paused_queue_ends_with_the_paused_header(api):
    publish(api)
    pause(api)

    response = api.get(url(query="timeout=1"))

    assert response.status_code == 404
    assert response["X-Queue-Paused"] == "1"


@pytest.mark.parametrize("method", ["put", "delete"])
def test_pause_and_resume_need_a_token(method):
    from rest_framework.test import APIClient

    response = getattr(APIClient(), method)(url(suffix="/pause"))

    assert response.status_code == 401
    assert response.json() == {"error": "token not found"}

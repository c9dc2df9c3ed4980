"""DELETE /api/:ns/:q — destroy a queue.

Upstream drains only the ready list; ours deletes every live job (ready,
delayed, in flight) and keeps the dead letter, as engine.destroy documents."""
from __future__ import annotations

from queues import keys
from queues.engine import now_ms
from tests.api_helpers import consume, make_dead, peek_job, publish, queue_traces, stats, url


def destroy(api, queue: str = "q"):
    return api.delete(url(queue))


def test_destroy_answers_204_with_no_body(api):
    publish(api)

    response = destroy(api)

    assert response.status_code == 204
    assert response.content == b""


def test_destroy_deletes_ready_jobs_and_their_data(api):
    ids = [publish(api) for _ in range(3)]

    destroy(api)

    assert stats()["ready"] == 0
    assert [peek_job(job_id) for job_id in ids] == [None, None, None]
    assert api.get(url()).status_code == 404


def test_destroy_deletes_delayed_and_in_flight_jobs_too(api, engine):
    delayed = publish(api, query="delay=30")
    in_flight = publish(api, query="tries=2")
    consume(api, query="ttr=10")

    destroy(api)
    engine.pump_due(now=now_ms() + 60_000)

    assert peek_job(delayed) is None
    assert peek_job(in_flight) is None
    assert stats() == {"namespace": "ns", "queue": "q", "ready": 0, "delayed": 0,
                       "inflight": 0, "deadletter": 0, "paused": False}


def test_destroy_keeps_the_dead_letter(api, engine):
    dead = make_dead(api, engine)
    publish(api)

    destroy(api)

    assert stats()["deadletter"] == 1
    assert api.get(url(suffix="/deadletter")).json()["deadletter_head"] == dead
    assert api.put(url(suffix="/deadletter")).json() == {"msg": "respawned", "count": 1}


def test_destroy_leaves_other_queues_alone(api):
    publish(api, queue="a")
    kept = publish(api, queue="b")

    destroy(api, "a")

    assert stats("b")["ready"] == 1
    assert peek_job(kept, "b") is not None


def test_destroying_an_unknown_queue_answers_204(api, redis_client):
    assert destroy(api, "never").status_code == 204
    assert queue_traces(redis_client, "never") == []


def test_a_destroyed_queue_leaves_no_trace_and_leaves_the_registry(api, redis_client):
    publish(api, query="ttl=100")
    publish(api, query="delay=5")

    destroy(api)

    assert queue_traces(redis_client) == []
    assert redis_client.zscore(keys.TIMER_INDEX, keys.queue_member("ns", "q")) is None


def test_a_destroyed_queue_works_again_on_the_next_publish(api):
    publish(api)
    destroy(api)

    job_id = publish(api)

    assert consume(api)["job_id"] == job_id


def test_destroy_drains_more_than_one_batch(api, monkeypatch):
    from queues import engine as engine_module

    for _ in range(3):
        api.put(url(suffix="/bulk"), data="[" + ",".join(["1"] * 64) + "]", content_type="application/json")
    assert stats()["ready"] == 192
    monkeypatch.setattr(engine_module, "DESTROY_BATCH", 50)

    destroy(api)

    assert stats()["ready"] == 0


def test_destroying_a_paused_queue_keeps_it_paused(api):
    api.put(url(suffix="/pause"))
    publish(api)

    destroy(api)
    publish(api)

    assert stats()["paused"] is True
    assert api.get(url())["X-Queue-Paused"] == "1"


def test_destroy_needs_a_token(api):
    from rest_framework.test import APIClient

    publish(api)

    assert APIClient().delete(url()).status_code == 401
    assert stats()["ready"] == 1

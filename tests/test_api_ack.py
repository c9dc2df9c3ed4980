"""DELETE /api/:ns/:q/job/:id — ACK / delete (lmstfy §1.5; ours removes every trace at once)."""
from __future__ import annotations

import pytest

from queues import keys
from queues.engine import now_ms
from tests.api_helpers import consume, make_dead, peek_job, publish, queue_traces, stats, url


def ack(api, job_id: str, queue: str = "q"):
    return api.delete(url(queue, suffix=f"/job/{job_id}"))


def test_acking_a_consumed_job_answers_204_with_no_body(api):
    job_id = publish(api)
    consume(api)

    response = ack(api, job_id)

    assert response.status_code == 204
    assert response.content == b""
    assert peek_job(job_id) is None


def test_an_acked_job_never_comes_back_nor_reaches_the_dead_letter(api, engine):
    job_id = publish(api, query="tries=3")
    consume(api, query="ttr=0")

    ack(api, job_id)
    engine.pump_due(now=now_ms() + 1)

    assert stats() == {"namespace": "ns", "queue": "q", "ready": 0, "delayed": 0, "inflight": 0,
                       "deadletter": 0, "paused": False}
    assert api.get(url()).status_code == 404


def test_an_ack_leaves_no_stale_entries_in_redis(api, redis_client):
    job_id = publish(api, query="ttl=100")
    consume(api)

    ack(api, job_id)

    leftovers = [key for key in queue_traces(redis_client) if redis_client.type(key) == b"zset"
                 and redis_client.zscore(key, job_id) is not None]
    assert leftovers == []
    assert redis_client.hget(keys.jobs("ns", "q"), job_id) is None


@pytest.mark.parametrize("job_id", ["01ARZ3NDEKTSV4RRFFQ69G5FAV", "not-even-an-id", "x" * 300])
def test_acking_an_unknown_id_still_answers_204(api, job_id):
    assert ack(api, job_id).status_code == 204


def test_acking_twice_answers_204_both_times(api):
    job_id = publish(api)
    consume(api)

    assert [ack(api, job_id).status_code, ack(api, job_id).status_code] == [204, 204]


def test_acking_a_ready_job_removes_it_from_the_queue(api):
    job_id = publish(api)

    ack(api, job_id)

    assert stats()["ready"] == 0
    assert api.get(url()).status_code == 404


def test_acking_a_delayed_job_cancels_it(api, engine):
    job_id = publish(api, query="delay=10")

    ack(api, job_id)
    engine.pump_due(now=now_ms() + 11_000)

    assert stats()["delayed"] == stats()["ready"] == 0
    assert peek_job(job_id) is None


def test_acking_a_dead_job_removes_it_from_the_dead_letter(api, engine):
    job_id = make_dead(api, engine)

    ack(api, job_id)

    assert stats()["deadletter"] == 0
    assert api.get(url(suffix="/deadletter")).json()["deadletter_head"] == ""


def test_acking_under_another_queue_name_answers_204_and_leaves_the_job_alone(api):
    job_id = publish(api, queue="q")

    response = ack(api, job_id, queue="other")

    assert response.status_code == 204
    assert peek_job(job_id) is not None
    assert stats()["ready"] == 1


def test_acking_needs_a_token(api):
    from rest_framework.test import APIClient

    job_id = publish(api)

    response = APIClient().delete(url(suffix=f"/job/{job_id}"))

    assert response.status_code == 401
    assert response.json() == {"error": "token not found"}
    assert peek_job(job_id) is not None

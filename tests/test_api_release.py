"""PUT /api/:ns/:q/job/:id/release?delay=N — give an in-flight job back (SPEC §2.1)."""
from __future__ import annotations

import pytest

from queues.engine import now_ms
from tests.api_helpers import consume, make_dead, peek_job, publish, stats, url


def release(api, job_id: str, query: str = "", queue: str = "q"):
    return api.put(url(queue, suffix=f"/job/{job_id}/release", query=query))


def test_release_answers_204_and_the_job_is_ready_at_once(api):
    job_id = publish(api, query="tries=2")
    consume(api)

    response = release(api, job_id)

    assert response.status_code == 204
    assert response.content == b""
    assert (stats()["ready"], stats()["inflight"]) == (1, 0)
    assert consume(api)["job_id"] == job_id


def test_release_gives_the_try_back(api):
    job_id = publish(api, query="tries=2")
    first = consume(api)
    release(api, job_id)

    second = consume(api)

    assert first["remain_tries"] == second["remain_tries"] == 1


def test_a_released_last_try_is_not_dead_lettered(api, engine):
    job_id = publish(api, query="tries=1")
    consume(api, query="ttr=0")
    release(api, job_id)

    engine.pump_due(now=now_ms() + 1)

    assert stats()["deadletter"] == 0
    assert consume(api)["remain_tries"] == 0


def test_release_with_a_delay_makes_the_job_ready_after_it(api, engine):
    job_id = publish(api)
    consume(api)
    before = now_ms()
    release(api, job_id, "delay=30")
    after = now_ms()
    assert (stats()["delayed"], stats()["ready"]) == (1, 0)

    engine.pump_due(now=before + 29_999)
    assert stats()["ready"] == 0

    engine.pump_due(now=after + 30_000)
    assert stats()["ready"] == 1
    assert consume(api)["job_id"] == job_id


def test_release_cancels_the_lease(api, engine):
    job_id = publish(api, query="tries=1")
    consume(api, query="ttr=5")
    release(api, job_id)

    engine.pump_due(now=now_ms() + 10_000)

    assert (stats()["ready"], stats()["inflight"], stats()["deadletter"]) == (1, 0, 0)


def test_release_keeps_the_job_ttl(api):
    job_id = publish(api, query="ttl=500")
    consume(api)

    release(api, job_id)

    assert 499 <= peek_job(job_id).ttl <= 500


def ready(api, engine) -> str:
    return publish(api)


def delayed(api, engine) -> str:
    return publish(api, query="delay=60")


def acked(api, engine) -> str:
    job_id = publish(api)
    consume(api)
    api.delete(url(suffix=f"/job/{job_id}"))
    return job_id


def dead(api, engine) -> str:
    return make_dead(api, engine)


def unknown(api, engine) -> str:
    return "01ARZ3NDEKTSV4RRFFQ69G5FAV"


@pytest.mark.parametrize("make", [unknown, ready, delayed, acked, dead])
def test_a_job_that_is_not_in_flight_is_404_job_not_found(api, engine, make):
    job_id = make(api, engine)
    before = stats()

    response = release(api, job_id)

    assert response.status_code == 404
    assert response.json() == {"error": "job not found"}
    assert stats() == before


def test_an_in_flight_job_whose_ttl_ran_out_is_404_and_removed(api, engine):
    ten_seconds_ago = now_ms() - 10_000
    [job_id] = engine.publish("ns", "q", [b"old"], ttl_s=1, now=ten_seconds_ago).job_ids
    leased = engine.consume("ns", ["q"], ttr_s=120, now=ten_seconds_ago + 500)
    assert [job.id for job in leased.jobs] == [job_id]

    response = release(api, job_id)

    assert response.status_code == 404
    assert response.json() == {"error": "job not found"}
    assert stats()["inflight"] == 0


def test_a_job_released_under_another_queue_name_is_404_and_stays_in_flight(api):
    job_id = publish(api)
    consume(api)

    assert release(api, job_id, queue="other").status_code == 404
    assert stats()["inflight"] == 1


@pytest.mark.parametrize("query", ["delay=-1", "delay=abc", "delay=1.5", "delay=%2B3", "delay=", "delay=4294967296"])
def test_a_bad_delay_is_400_invalid_delay_and_the_job_stays_in_flight(api, query):
    job_id = publish(api)
    consume(api)

    response = release(api, job_id, query)

    assert response.status_code == 400
    assert response.json() == {"error": "invalid delay"}
    assert stats()["inflight"] == 1

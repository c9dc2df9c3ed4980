"""GET /api/:ns/:q/peek and GET /api/:ns/:q/job/:id — peek queue and peek job (lmstfy §1.6, §1.7)."""
from __future__ import annotations

import base64

import pytest

from queues.engine import now_ms
from tests.api_helpers import consume, decoded, make_dead, publish, stats, url

SHAPE = {"namespace", "queue", "job_id", "data", "ttl", "elapsed_ms", "remain_tries", "attributes"}


def peek_queue(api, queue: str = "q"):
    return api.get(url(queue, suffix="/peek"))


def peek_job(api, job_id: str, queue: str = "q"):
    return api.get(url(queue, suffix=f"/job/{job_id}"))


# -- peek queue ---------------------------------------------------------------------------------

def test_peek_queue_shows_the_oldest_ready_job_without_consuming_it(api):
    first = publish(api, b"first", query="ttl=600")
    publish(api, b"second")

    response = peek_queue(api)

    assert response.status_code == 200
    job = response.json()
    assert set(job) == SHAPE
    assert (job["namespace"], job["queue"], job["job_id"]) == ("ns", "q", first)
    assert decoded(job) == b"first"
    assert 599 <= job["ttl"] <= 600
    assert 0 <= job["elapsed_ms"] < 5_000
    assert stats()["ready"] == 2
    assert consume(api)["job_id"] == first


def test_peek_queue_shows_the_stored_tries_not_decremented(api):
    publish(api, query="tries=5")

    assert peek_queue(api).json()["remain_tries"] == 5


def test_peek_queue_shows_the_tries_left_after_a_redelivery(api, engine):
    publish(api, query="tries=5")
    consume(api, query="ttr=0")
    engine.pump_due(now=now_ms() + 1)

    assert peek_queue(api).json()["remain_tries"] == 4


def test_peek_queue_shows_the_job_a_consume_would_take(api):
    publish(api, query="priority=1")
    urgent = publish(api, query="priority=9")

    assert peek_queue(api).json()["job_id"] == urgent


def test_peek_queue_shows_attributes(api):
    publish(api, HTTP_ENABLE_JOB_VERSION="YES", HTTP_JOB_ATTR_TENANT="acme")

    assert peek_queue(api).json()["attributes"] == {"tenant": "acme"}


@pytest.mark.parametrize("query", ["", "delay=30"])
def test_an_empty_queue_is_404_the_queue_is_empty(api, query):
    if query:
        publish(api, query=query)

    response = peek_queue(api)

    assert response.status_code == 404
    assert response.json() == {"error": "the queue is empty"}


def test_in_flight_jobs_are_not_peeked(api):
    publish(api)
    consume(api)

    assert peek_queue(api).json() == {"error": "the queue is empty"}


def test_an_expired_head_answers_200_with_null_data(api, engine):
    [job_id] = engine.publish("ns", "q", [b"stale"], ttl_s=1, now=now_ms() - 10_000).job_ids

    response = peek_queue(api)

    assert response.status_code == 200
    assert response.json() | {"elapsed_ms": 0} == {
        "namespace": "ns", "queue": "q", "job_id": job_id, "data": None, "ttl": 0, "elapsed_ms": 0,
        "remain_tries": 0, "attributes": None}


def test_peek_queue_needs_a_token(api):
    from rest_framework.test import APIClient

    assert APIClient().get(url(suffix="/peek")).status_code == 401


# -- peek job ------------------------------------------------------------------------------------

def test_peek_job_answers_the_job_with_remain_tries_always_zero(api):
    job_id = publish(api, b"\x00\x01binary", query="tries=7&ttl=0")

    response = peek_job(api, job_id)

    assert response.status_code == 200
    job = response.json()
    assert set(job) == SHAPE
    assert job["job_id"] == job_id
    assert job["data"] == base64.b64encode(b"\x00\x01binary").decode()
    assert job["remain_tries"] == 0
    assert job["ttl"] == 0


def delayed(api, engine) -> str:
    return publish(api, query="delay=60")


def ready(api, engine) -> str:
    return publish(api)


def in_flight(api, engine) -> str:
    job_id = publish(api, query="tries=3")
    consume(api)
    return job_id


def dead(api, engine) -> str:
    return make_dead(api, engine)


@pytest.mark.parametrize("make", [delayed, ready, in_flight, dead])
def test_peek_job_works_in_every_state(api, engine, make):
    job_id = make(api, engine)

    response = peek_job(api, job_id)

    assert response.status_code == 200
    assert response.json()["job_id"] == job_id
    assert response.json()["remain_tries"] == 0
    assert decoded(response.json()) is not None


def test_a_dead_job_never_expires(api, engine):
    job_id = make_dead(api, engine, query="tries=1&ttl=30")

    engine.pump_due(now=now_ms() + 3_600_000)

    assert peek_job(api, job_id).json()["ttl"] == 0


def test_peek_job_does_not_change_the_job(api):
    job_id = publish(api, query="tries=2")

    peek_job(api, job_id)

    assert consume(api)["remain_tries"] == 1


def test_peek_job_shows_attributes(api):
    job_id = publish(api, HTTP_ENABLE_JOB_VERSION="YES", HTTP_JOB_ATTR_A="1")

    assert peek_job(api, job_id).json()["attributes"] == {"a": "1"}


def test_an_unknown_job_is_404_job_not_found(api):
    response = peek_job(api, "01ARZ3NDEKTSV4RRFFQ69G5FAV")

    assert response.status_code == 404
    assert response.json() == {"error": "job not found"}


def test_an_acked_job_is_404(api):
    job_id = publish(api)
    api.delete(url(suffix=f"/job/{job_id}"))

    assert peek_job(api, job_id).json() == {"error": "job not found"}


def test_an_expired_job_is_404_even_before_the_pump_removes_it(api, engine):
    [job_id] = engine.publish("ns", "q", [b"stale"], ttl_s=1, now=now_ms() - 10_000).job_ids

    assert peek_job(api, job_id).status_code == 404


def test_a_job_looked_up_under_another_queue_is_404(api):
    job_id = publish(api, queue="q")

    assert peek_job(api, job_id, queue="other").status_code == 404

"""GET /api/:ns/:q/stats and /stats/due — our queue statistics extensions (SPEC §2.1)."""
from __future__ import annotations

import time

import pytest

from queues.engine import now_ms
from tests.api_helpers import consume, make_dead, publish, url


def queue_stats(api, queue: str = "q") -> dict:
    response = api.get(url(queue, suffix="/stats"))
    assert response.status_code == 200
    return response.json()


def due(api, query: str = ""):
    return api.get(url(suffix="/stats/due", query=query))


# -- stats ----------------------------------------------------------------------------------------

def test_stats_of_an_unknown_queue_are_all_zero(api):
    assert queue_stats(api, "nothing") == {"namespace": "ns", "queue": "nothing", "ready": 0, "delayed": 0,
                                           "inflight": 0, "deadletter": 0, "paused": False}


def test_stats_count_each_state(api, engine):
    make_dead(api, engine)
    publish(api, query="priority=9")
    consume(api)
    publish(api)
    publish(api)
    publish(api, query="delay=60")

    assert queue_stats(api) == {"namespace": "ns", "queue": "q", "ready": 2, "delayed": 1, "inflight": 1,
                                "deadletter": 1, "paused": False}


def test_stats_show_a_paused_queue(api):
    api.put(url(suffix="/pause"))
    assert queue_stats(api)["paused"] is True

    api.delete(url(suffix="/pause"))
    assert queue_stats(api)["paused"] is False


def test_stats_follow_a_job_through_its_life(api, engine):
    job_id = publish(api, query="delay=5&tries=1")
    seen = [queue_stats(api)]
    engine.pump_due(now=now_ms() + 5_000)
    seen.append(queue_stats(api))
    consume(api, query="ttr=0")
    seen.append(queue_stats(api))
    engine.pump_due(now=now_ms() + 5_001)
    seen.append(queue_stats(api))
    api.delete(url(suffix=f"/job/{job_id}"))
    seen.append(queue_stats(api))

    states = [(s["delayed"], s["ready"], s["inflight"], s["deadletter"]) for s in seen]
    assert states == [(1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0), (0, 0, 0, 1), (0, 0, 0, 0)]


def test_stats_need_a_token():
    from rest_framework.test import APIClient

    assert APIClient().get(url(suffix="/stats")).json() == {"error": "token not found"}


# -- due histogram --------------------------------------------------------------------------------

def test_the_histogram_defaults_to_72_buckets_of_an_hour(api):
    before = int(time.time())

    response = due(api)

    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"bucket", "start", "counts"}
    assert body["bucket"] == 3600
    assert body["counts"] == [0] * 72
    assert before <= body["start"] <= time.time()


def test_delayed_jobs_land_in_the_bucket_of_their_due_time(api):
    for delay in (30, 90, 100, 150, 500):
        publish(api, query=f"delay={delay}")

    body = due(api, "bucket=60&buckets=3").json()

    assert body["bucket"] == 60
    assert body["counts"] == [1, 2, 1]


def test_ready_in_flight_and_dead_jobs_are_not_in_the_histogram(api, engine):
    make_dead(api, engine)
    publish(api)
    publish(api, query="tries=2&priority=1")
    consume(api)

    assert due(api, "bucket=1&buckets=10").json()["counts"] == [0] * 10


def test_an_overdue_delayed_job_counts_in_the_first_bucket(api, engine):
    engine.publish("ns", "q", [b"late"], delay_s=1, now=now_ms() - 60_000)

    assert due(api, "bucket=10&buckets=2").json()["counts"] == [1, 0]


def test_one_thousand_one_second_buckets_are_accepted(api):
    publish(api, query="delay=500")

    counts = due(api, "bucket=1&buckets=1000").json()["counts"]

    assert len(counts) == 1000
    assert sum(counts) == 1
    assert counts.index(1) in (498, 499, 500)


@pytest.mark.parametrize("query, message", [
    ("bucket=0", "invalid bucket"),
    ("bucket=-1", "invalid bucket"),
    ("bucket=abc", "invalid bucket"),
    ("bucket=", "invalid bucket"),
    ("buckets=0", "invalid buckets"),
    ("buckets=1001", "invalid buckets"),
    ("buckets=-1", "invalid buckets"),
    ("buckets=many", "invalid buckets"),
    ("bucket=0&buckets=0", "invalid bucket"),
])
def test_bad_histogram_parameters_are_400(api, query, message):
    response = due(api, query)

    assert response.status_code == 400
    assert response.json() == {"error": message}

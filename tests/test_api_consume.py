"""GET /api/:ns/:q1[,q2,...] — consume (lmstfy §1.4, our pause and priority extensions)."""
from __future__ import annotations

import threading
import time

import pytest

from queues import keys
from queues.engine import now_ms
from tests.api_helpers import consume, decoded, peek_job, publish, stats, url

NO_JOB = {"msg": "no job available"}


def test_a_single_consume_answers_one_object_with_lmstfys_fields(api):
    job_id = publish(api, b"hello", query="tries=2&ttl=300")

    response = api.get(url())

    assert response.status_code == 200
    job = response.json()
    assert set(job) == {"msg", "namespace", "queue", "job_id", "data", "ttl", "elapsed_ms", "remain_tries",
                        "attributes"}
    assert job["msg"] == "new job"
    assert (job["namespace"], job["queue"], job["job_id"]) == ("ns", "q", job_id)
    assert decoded(job) == b"hello"
    assert job["remain_tries"] == 1
    assert 299 <= job["ttl"] <= 300
    assert job["attributes"] is None


def test_count_above_one_answers_an_array_even_of_one_job(api):
    job_id = publish(api)

    response = api.get(url(query="count=2"))

    assert response.status_code == 200
    [job] = response.json()
    assert job["job_id"] == job_id
    assert job["msg"] == "new job"


def test_count_one_answers_an_object_when_more_jobs_are_ready(api):
    publish(api)
    publish(api)

    assert isinstance(api.get(url(query="count=1")).json(), dict)
    assert stats()["ready"] == 1


def test_a_batch_takes_at_most_count_jobs_in_fifo_order(api):
    ids = [publish(api, str(i).encode()) for i in range(5)]

    first = api.get(url(query="count=3")).json()
    rest = api.get(url(query="count=100")).json()

    assert [job["job_id"] for job in first] == ids[:3]
    assert [job["job_id"] for job in rest] == ids[3:]


def test_count_100_is_accepted(api):
    publish(api)

    response = api.get(url(query="count=100"))

    assert response.status_code == 200
    assert len(response.json()) == 1


@pytest.mark.parametrize("query, message", [
    ("ttr=-1", "invalid ttr"),
    ("ttr=abc", "invalid ttr"),
    ("ttr=1.5", "invalid ttr"),
    ("ttr=%2B3", "invalid ttr"),
    ("ttr=", "invalid ttr"),
    ("ttr=4294967296", "invalid ttr"),
    ("timeout=-1", "invalid timeout"),
    ("timeout=abc", "invalid timeout"),
    ("timeout=4294967296", "invalid timeout"),
    ("timeout=", "invalid timeout"),
    ("count=0", "invalid count"),
    ("count=101", "invalid count"),
    ("count=abc", "invalid count"),
    ("count=-1", "invalid count"),
    ("count=1.5", "invalid count"),
    ("count=4294967296", "invalid count"),
    ("count=", "invalid count"),
])
def test_a_bad_parameter_is_a_400_with_lmstfys_message(api, query, message):
    publish(api)

    response = api.get(url(query=query))

    assert response.status_code == 400
    assert response.json() == {"error": message}
    assert stats()["ready"] == 1


@pytest.mark.parametrize("path, message", [
    ("/api/ns/q?ttr=x&timeout=x&count=x", "invalid ttr"),
    ("/api/ns/q?timeout=x&count=x", "invalid timeout"),
    ("/api/ns/,,?count=0", "invalid count"),
    ("/api/ns/,,", "invalid queue name(s)"),
    ("/api/ns/,", "invalid queue name(s)"),
])
def test_checks_run_in_lmstfys_order_ttr_timeout_count_then_the_queue_list(api, path, message):
    assert api.get(path).json() == {"error": message}


def test_ttr_zero_is_accepted_and_the_job_returns_at_the_next_pump(api, engine):
    job_id = publish(api, query="tries=2")
    consume(api, query="ttr=0")

    engine.pump_due(now=now_ms() + 1)

    assert consume(api)["job_id"] == job_id


def test_the_lease_lasts_ttr_seconds(api, engine):
    job_id = publish(api, query="tries=2")
    before = now_ms()
    consume(api, query="ttr=30")
    after = now_ms()

    engine.pump_due(now=before + 29_999)
    assert stats()["inflight"] == 1

    engine.pump_due(now=after + 30_000)
    assert stats()["ready"] == 1
    assert consume(api)["job_id"] == job_id


def test_the_default_ttr_is_120_seconds(api, redis_client):
    job_id = publish(api)
    before = now_ms()
    consume(api)

    lease_end = redis_client.zscore(keys.inflight("ns", "q"), job_id)
    assert before + 120_000 <= lease_end <= now_ms() + 120_000


def test_remain_tries_counts_down_with_each_delivery(api, engine):
    publish(api, query="tries=3")

    remaining = []
    for _ in range(3):
        remaining.append(consume(api, query="ttr=0")["remain_tries"])
        engine.pump_due(now=now_ms() + 1)

    assert remaining == [2, 1, 0]
    assert stats()["deadletter"] == 1


def test_ttl_is_the_remaining_life_and_zero_means_forever(api):
    publish(api, b"short", query="ttl=50")
    publish(api, b"forever", query="ttl=0")

    short, forever = api.get(url(query="count=2")).json()

    assert 49 <= short["ttl"] <= 50
    assert forever["ttl"] == 0


def test_elapsed_ms_counts_from_publish(api, engine):
    five_seconds_ago = now_ms() - 5_000
    engine.publish("ns", "q", [b"old"], now=five_seconds_ago)

    job = consume(api)

    assert 5_000 <= job["elapsed_ms"] < 5_000 + 2_000
    assert 86394 <= job["ttl"] <= 86395


def test_elapsed_ms_counts_the_delay_too(api, engine):
    published_at = now_ms() - 10_000
    engine.publish("ns", "q", [b"delayed"], delay_s=3, now=published_at)
    engine.pump_due()

    job = consume(api)

    assert 10_000 <= job["elapsed_ms"] < 12_000


def test_no_job_is_404_with_msg_not_error(api):
    response = api.get(url())

    assert response.status_code == 404
    assert response.json() == NO_JOB
    assert "X-Queue-Paused" not in response


def test_no_job_is_404_for_a_batch_too(api):
    response = api.get(url(query="count=10"))

    assert response.status_code == 404
    assert response.json() == NO_JOB


def test_delayed_jobs_are_not_consumed_early(api):
    publish(api, query="delay=60")

    assert api.get(url()).status_code == 404


def test_a_paused_queue_answers_404_with_x_queue_paused(api):
    publish(api)
    api.put(url(suffix="/pause"))

    response = api.get(url())

    assert response.status_code == 404
    assert response.json() == NO_JOB
    assert response["X-Queue-Paused"] == "1"
    assert stats()["ready"] == 1


def test_a_paused_queue_is_skipped_in_a_multi_queue_consume(api):
    publish(api, b"paused", queue="q1")
    job_id = publish(api, b"open", queue="q2")
    api.put(url("q1", suffix="/pause"))

    assert consume(api, "q1,q2")["job_id"] == job_id


def test_multi_queue_consume_takes_from_the_first_listed_queue_with_a_job(api):
    in_q2 = publish(api, queue="q2")
    in_q1 = publish(api, queue="q1")

    first = consume(api, "q1,q2")
    second = consume(api, "q1,q2")

    assert (first["job_id"], first["queue"]) == (in_q1, "q1")
    assert (second["job_id"], second["queue"]) == (in_q2, "q2")


def test_multi_queue_order_follows_the_list_not_the_publish_time(api):
    publish(api, queue="q1")
    in_q2 = publish(api, queue="q2")

    assert consume(api, "q2,q1")["job_id"] == in_q2


def test_a_multi_queue_batch_drains_queues_in_list_order(api):
    a = publish(api, queue="a")
    b1 = publish(api, queue="b")
    b2 = publish(api, queue="b")

    batch = api.get(url("a,b", query="count=3")).json()

    assert [(job["queue"], job["job_id"]) for job in batch] == [("a", a), ("b", b1), ("b", b2)]


def test_a_queue_listed_twice_is_consumed_once_per_job(api):
    ids = [publish(api), publish(api)]

    batch = api.get(url("q,q,q", query="count=10")).json()

    assert [job["job_id"] for job in batch] == ids


def test_empty_names_in_the_list_are_dropped(api):
    job_id = publish(api, queue="q2")

    assert consume(api, ",q1,,q2,")["job_id"] == job_id


def test_a_queue_name_starting_with_underscore_is_allowed_for_consume(api):
    assert api.get(url("_hidden")).json() == NO_JOB


def test_a_forbidden_character_in_the_list_is_a_400(api):
    response = api.get(url("a;b"))

    assert response.status_code == 400
    assert response.json() == {"error": "queue name contains forbidden characters"}


def test_higher_priority_is_consumed_first_and_fifo_within_a_priority(api):
    low = publish(api, query="priority=0")
    mid1 = publish(api, query="priority=10")
    top = publish(api, query="priority=255")
    mid2 = publish(api, query="priority=10")

    order = [consume(api)["job_id"] for _ in range(4)]

    assert order == [top, mid1, mid2, low]


def test_a_job_returning_after_its_ttr_goes_behind_its_priority_peers(api, engine):
    first = publish(api, query="tries=2")
    second = publish(api)
    consume(api, query="ttr=0")

    engine.pump_due(now=now_ms() + 1)

    assert [consume(api)["job_id"] for _ in range(2)] == [second, first]


def test_an_expired_job_at_the_head_does_not_hide_the_jobs_behind_it(api, engine):
    engine.publish("ns", "q", [b"stale"], ttl_s=1, now=now_ms() - 10_000)
    fresh = publish(api, b"fresh")

    job = consume(api)

    assert job["job_id"] == fresh
    assert stats()["ready"] == 0


def test_a_consumed_job_is_in_flight_until_acked(api):
    job_id = publish(api)

    consume(api)

    assert (stats()["ready"], stats()["inflight"]) == (0, 1)
    assert peek_job(job_id).deliveries == 1


@pytest.mark.slow
def test_a_long_poll_returns_a_job_published_during_the_wait(api, engine):
    ids: list[str] = []

    def publish_later() -> None:
        time.sleep(0.3)
        ids.extend(engine.publish("ns", "q", [b"late"]).job_ids)

    publisher = threading.Thread(target=publish_later)
    started = time.monotonic()
    publisher.start()
    response = api.get(url(query="timeout=5"))
    waited = time.monotonic() - started
    publisher.join()

    assert response.status_code == 200
    assert response.json()["job_id"] == ids[0]
    assert 0.25 <= waited < 2.0


@pytest.mark.slow
def test_a_multi_queue_long_poll_wakes_for_any_listed_queue(api, engine):
    publisher = threading.Timer(0.3, lambda: engine.publish("ns", "second", [b"late"]))
    started = time.monotonic()
    publisher.start()

    response = api.get(url("first,second", query="timeout=5"))
    publisher.join()

    assert response.status_code == 200
    assert response.json()["queue"] == "second"
    assert time.monotonic() - started < 2.0


@pytest.mark.slow
def test_a_long_poll_batch_answers_an_array_as_soon_as_one_job_arrives(api, engine):
    publisher = threading.Timer(0.3, lambda: engine.publish("ns", "q", [b"late"]))
    started = time.monotonic()
    publisher.start()
    response = api.get(url(query="timeout=5&count=10"))
    publisher.join()

    assert response.status_code == 200
    assert len(response.json()) == 1
    assert time.monotonic() - started < 2.0


@pytest.mark.slow
def test_a_long_poll_gives_up_after_its_timeout(api):
    started = time.monotonic()

    response = api.get(url(query="timeout=1"))

    assert response.status_code == 404
    assert response.json() == NO_JOB
    assert 0.9 <= time.monotonic() - started < 3.0

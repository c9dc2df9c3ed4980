"""GET/PUT/DELETE /api/:ns/:q/deadletter — peek, respawn, delete (lmstfy §1.10)."""
from __future__ import annotations

import pytest

from queues.engine import Engine, now_ms
from tests.api_helpers import consume, decoded, make_dead, peek_job, publish, stats, url


def bury_many(engine: Engine, count: int, queue: str = "q") -> list[str]:
    """`count` dead jobs, oldest first, made through the engine with a moving clock."""
    start = now_ms() - 60_000
    ids = engine.publish("ns", queue, [str(i).encode() for i in range(count)], tries=1, now=start).job_ids
    for i, job_id in enumerate(ids):  # one lease a millisecond: they die in this order
        [leased] = engine.consume("ns", [queue], ttr_s=1, now=start + 1 + i).jobs
        assert leased.id == job_id
    engine.pump_due(now=start + 2_000 + count)
    assert stats(queue)["deadletter"] == count
    return ids


def dead_letter(api, method: str = "get", query: str = ""):
    return getattr(api, method)(url(suffix="/deadletter", query=query))


# -- peek ---------------------------------------------------------------------------------

def test_peek_of_an_empty_dead_letter_is_size_0_and_head_empty_string(api):
    response = dead_letter(api)

    assert response.status_code == 200
    assert response.json() == {"namespace": "ns", "queue": "q", "deadletter_size": 0, "deadletter_head": ""}


def test_peek_shows_the_size_and_the_oldest_dead_job(api, engine):
    first = make_dead(api, engine)
    make_dead(api, engine)

    assert dead_letter(api).json() == {"namespace": "ns", "queue": "q", "deadletter_size": 2,
                                       "deadletter_head": first}


def test_a_job_is_dead_only_after_its_last_try_times_out(api, engine):
    job_id = publish(api, query="tries=2")
    consume(api, query="ttr=0")
    engine.pump_due(now=now_ms() + 1)
    assert dead_letter(api).json()["deadletter_size"] == 0

    consume(api, query="ttr=0")
    engine.pump_due(now=now_ms() + 1)

    assert dead_letter(api).json()["deadletter_head"] == job_id


def test_an_expired_job_never_reaches_the_dead_letter(api, engine):
    publish(api, query="ttl=10")
    consume(api, query="ttr=20")

    engine.pump_due(now=now_ms() + 30_000)

    assert dead_letter(api).json()["deadletter_size"] == 0


def test_dead_jobs_never_expire(api, engine):
    job_id = make_dead(api, engine, query="tries=1&ttl=30")

    engine.pump_due(now=now_ms() + 10 * 86400 * 1000)

    assert dead_letter(api).json()["deadletter_head"] == job_id
    assert peek_job(job_id).ttl == 0


# -- respawn --------------------------------------------------------------------------------

def test_respawn_moves_the_oldest_dead_job_by_default(api, engine):
    first, second = make_dead(api, engine, body=b"one"), make_dead(api, engine, body=b"two")

    response = dead_letter(api, "put")

    assert response.status_code == 200
    assert response.json() == {"msg": "respawned", "count": 1}
    assert dead_letter(api).json()["deadletter_head"] == second
    assert consume(api)["job_id"] == first


def test_respawned_jobs_go_to_the_back_of_the_queue(api, engine):
    dead = make_dead(api, engine)
    waiting = publish(api)

    dead_letter(api, "put")

    assert [consume(api)["job_id"] for _ in range(2)] == [waiting, dead]


def test_a_respawned_job_has_one_try_and_keeps_its_body(api, engine):
    job_id = publish(api, b"payload", query="tries=2")
    for _ in range(2):
        consume(api, query="ttr=0")
        engine.pump_due(now=now_ms() + 1)
    assert dead_letter(api).json()["deadletter_head"] == job_id

    dead_letter(api, "put")
    job = consume(api, query="ttr=0")
    engine.pump_due(now=now_ms() + 1)

    assert decoded(job) == b"payload"
    assert job["remain_tries"] == 0
    assert dead_letter(api).json()["deadletter_head"] == job_id


def test_respawn_gives_a_default_ttl_of_one_day(api, engine):
    job_id = make_dead(api, engine)

    dead_letter(api, "put")

    assert 86399 <= peek_job(job_id).ttl <= 86400


def test_respawn_with_a_ttl_expires_the_job_after_it(api, engine):
    job_id = make_dead(api, engine)
    before = now_ms()

    dead_letter(api, "put", "ttl=50")

    assert 49 <= peek_job(job_id).ttl <= 50
    engine.pump_due(now=before + 51_000)
    assert peek_job(job_id) is None


def test_respawn_with_ttl_zero_keeps_the_job_forever(api, engine):
    job_id = make_dead(api, engine)

    dead_letter(api, "put", "ttl=0")
    engine.pump_due(now=now_ms() + 365 * 86400 * 1000)

    assert peek_job(job_id).ttl == 0
    assert consume(api)["job_id"] == job_id


def test_respawn_counts_only_what_it_moved(api, engine):
    ids = bury_many(engine, 3)

    response = dead_letter(api, "put", "limit=5")

    assert response.json() == {"msg": "respawned", "count": 3}
    assert [job["job_id"] for job in api.get(url(query="count=10")).json()] == ids


def test_respawn_of_an_empty_dead_letter_counts_zero(api):
    assert dead_letter(api, "put", "limit=10").json() == {"msg": "respawned", "count": 0}


def test_respawn_takes_a_signed_limit_like_go_parseint(api, engine):
    bury_many(engine, 3)

    assert dead_letter(api, "put", "limit=%2B2").json()["count"] == 2


def test_respawn_handles_limits_larger_than_one_batch(api, engine):
    ids = bury_many(engine, 130)

    response = dead_letter(api, "put", "limit=120")

    assert response.json()["count"] == 120
    assert stats()["ready"] == 120
    assert dead_letter(api).json()["deadletter_head"] == ids[120]


@pytest.mark.parametrize("query, message", [
    ("limit=0", "invalid limit"),
    ("limit=-1", "invalid limit"),
    ("limit=abc", "invalid limit"),
    ("limit=1.5", "invalid limit"),
    ("limit=+2", "invalid limit"),  # "+" in a query string is a space
    ("limit=", "invalid limit"),
    ("limit=9223372036854775808", "invalid limit"),
    ("ttl=-1", "invalid ttl"),
    ("ttl=abc", "invalid ttl"),
    ("ttl=", "invalid ttl"),
    ("ttl=9223372036854775808", "invalid ttl"),
    ("limit=0&ttl=-1", "invalid limit"),
])
def test_bad_respawn_parameters_are_400_and_respawn_nothing(api, engine, query, message):
    make_dead(api, engine)

    response = dead_letter(api, "put", query)

    assert response.status_code == 400
    assert response.json() == {"error": message}
    assert stats()["deadletter"] == 1


# -- delete ----------------------------------------------------------------------------------

def test_delete_removes_the_oldest_dead_job_and_its_data(api, engine):
    first, second = make_dead(api, engine), make_dead(api, engine)

    response = dead_letter(api, "delete")

    assert response.status_code == 204
    assert response.content == b""
    assert peek_job(first) is None
    assert dead_letter(api).json() == {"namespace": "ns", "queue": "q", "deadletter_size": 1,
                                       "deadletter_head": second}


def test_delete_with_a_limit_removes_that_many_oldest_first(api, engine):
    ids = bury_many(engine, 5)

    dead_letter(api, "delete", "limit=3")

    assert dead_letter(api).json()["deadletter_size"] == 2
    assert dead_letter(api).json()["deadletter_head"] == ids[3]
    assert [peek_job(job_id) is None for job_id in ids] == [True, True, True, False, False]


def test_delete_with_a_limit_beyond_the_size_empties_the_dead_letter(api, engine):
    bury_many(engine, 130)

    assert dead_letter(api, "delete", "limit=1000").status_code == 204
    assert dead_letter(api).json()["deadletter_size"] == 0


def test_delete_leaves_live_jobs_alone(api, engine):
    make_dead(api, engine)
    live = publish(api)

    dead_letter(api, "delete", "limit=10")

    assert peek_job(live) is not None
    assert stats()["ready"] == 1


@pytest.mark.parametrize("query", ["limit=0", "limit=-5", "limit=x", "limit="])
def test_bad_delete_limits_are_400_invalid_limit(api, engine, query):
    make_dead(api, engine)

    response = dead_letter(api, "delete", query)

    assert response.status_code == 400
    assert response.json() == {"error": "invalid limit"}
    assert stats()["deadletter"] == 1


@pytest.mark.parametrize("method", ["get", "put", "delete"])
def test_the_dead_letter_routes_need_a_token(method):
    from rest_framework.test import APIClient

    response = getattr(APIClient(), method)(url(suffix="/deadletter"))

    assert response.status_code == 401
    assert response.json() == {"error": "token not found"}


def test_a_limit_followed_by_a_newline_is_rejected(api, engine):
    make_dead(api, engine)

    response = dead_letter(api, "put", "limit=1%0A")

    assert response.json() == {"error": "invalid limit"}
    assert stats()["deadletter"] == 1


def test_a_huge_respawn_ttl_is_refused_or_reported_as_a_positive_ttl(api, engine):
    job_id = make_dead(api, engine)

    response = dead_letter(api, "put", "ttl=9223372036854775807")

    if response.status_code == 400:
        assert response.json() == {"error": "invalid ttl"}
        return
    assert peek_job(job_id).ttl > 0
    assert consume(api)["ttl"] > 0

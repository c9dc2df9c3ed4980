"""release.lua through Engine.release: an in-flight job goes back, with its try."""
from __future__ import annotations

import pytest
import redis

from queues.engine import Engine, JobNotFound
from tests.testutil import DELAYED, READY, T0, places, queue_state, set_index


def lease(engine: Engine, *, tries: int = 3, ttl_s: int = 60, now: int = T0) -> str:
    job_id = engine.publish("ns", "q", [b"x"], tries=tries, ttl_s=ttl_s, now=now).job_ids[0]
    [got] = engine.consume("ns", ["q"], ttr_s=30, now=now).jobs
    assert got.id == job_id
    return job_id


@pytest.mark.parametrize("give_try_back, tries", [(True, 3), (False, 2)])
def test_release_without_delay_makes_the_job_ready_again(engine: Engine, redis_client: redis.Redis,
                                                        give_try_back: bool, tries: int) -> None:
    job_id = lease(engine)

    engine.release("ns", "q", job_id, give_try_back=give_try_back, now=T0 + 5_000)

    state = queue_state(redis_client, "ns", "q")
    assert (state["ready"], state["inflight"], state["delayed"]) == ([job_id], {}, {})
    assert state["expiry"] == {job_id: T0 + 60_000}
    assert state["jobs"][job_id] == {"state": READY, "tries": tries, "deliveries": 1, "expire_at": T0 + 60_000}


@pytest.mark.parametrize("delay_s, due", [(5, T0 + 10_000), (0.25, T0 + 5_250), (3600, T0 + 3_605_000)])
def test_release_with_a_delay_makes_the_job_delayed_until_then(engine: Engine, redis_client: redis.Redis,
                                                              delay_s: float, due: int) -> None:
    job_id = lease(engine, ttl_s=0)

    engine.release("ns", "q", job_id, delay_s=delay_s, now=T0 + 5_000)

    state = queue_state(redis_client, "ns", "q")
    assert (state["ready"], state["inflight"], state["delayed"], state["expiry"]) == ([], {}, {job_id: due}, {})
    assert state["jobs"][job_id] == {"state": DELAYED, "tries": 3, "deliveries": 1, "expire_at": 0}
    engine.pump_due(now=due - 1)
    assert queue_state(redis_client, "ns", "q")["ready"] == []
    engine.pump_due(now=due)
    assert queue_state(redis_client, "ns", "q")["ready"] == [job_id]


def test_a_released_job_goes_behind_the_jobs_already_ready(engine: Engine, redis_client: redis.Redis) -> None:
    job_id = lease(engine, ttl_s=0)
    waiting = engine.publish("ns", "q", [b"a", b"b"], ttl_s=0, now=T0 + 1).job_ids

    engine.release("ns", "q", job_id, now=T0 + 2)

    assert queue_state(redis_client, "ns", "q")["ready"] == [*waiting, job_id]


@pytest.mark.parametrize("delay_s, index", [
    (5, T0 + 10_000),   # the release timer is earlier than the lease that was the index
    (60, T0 + 30_000),  # later: the index keeps the (now stale, harmless) earlier score
])
def test_release_lowers_the_index_only_for_an_earlier_timer(engine: Engine, redis_client: redis.Redis,
                                                           delay_s: int, index: int) -> None:
    job_id = lease(engine, ttl_s=0)
    assert queue_state(redis_client, "ns", "q")["index"] == T0 + 30_000

    engine.release("ns", "q", job_id, delay_s=delay_s, now=T0 + 5_000)

    assert queue_state(redis_client, "ns", "q")["index"] == index


def test_release_to_ready_lowers_the_index_to_the_ttl_expiry(engine: Engine, redis_client: redis.Redis) -> None:
    job_id = lease(engine, ttl_s=20)
    set_index(redis_client, "ns", "q", T0 + 40_000)  # as a pumper's claim leaves it

    engine.release("ns", "q", job_id, now=T0 + 5_000)

    assert queue_state(redis_client, "ns", "q")["index"] == T0 + 20_000


def ready_job(engine: Engine) -> str:
    return engine.publish("ns", "q", [b"x"], now=T0).job_ids[0]


def delayed_job(engine: Engine) -> str:
    return engine.publish("ns", "q", [b"x"], delay_s=10, now=T0).job_ids[0]


def dead_job(engine: Engine) -> str:
    job_id = lease(engine)
    engine.bury("ns", "q", job_id)
    return job_id


def acked_job(engine: Engine) -> str:
    job_id = lease(engine)
    engine.ack("ns", "q", job_id)
    return job_id


def unknown_job(engine: Engine) -> str:
    return "01NOSUCHJOB000000000000000"


@pytest.mark.parametrize("seed", [ready_job, delayed_job, dead_job, acked_job, unknown_job])
def test_release_of_a_job_that_is_not_in_flight_raises_and_changes_nothing(engine: Engine,
                                                                          redis_client: redis.Redis, seed) -> None:
    job_id = seed(engine)
    before = queue_state(redis_client, "ns", "q")

    with pytest.raises(JobNotFound):
        engine.release("ns", "q", job_id, now=T0 + 1_000)

    assert queue_state(redis_client, "ns", "q") == before


def test_release_of_an_in_flight_job_past_its_ttl_removes_it(engine: Engine, redis_client: redis.Redis) -> None:
    job_id = lease(engine, ttl_s=10)

    with pytest.raises(JobNotFound):
        engine.release("ns", "q", job_id, now=T0 + 10_000)

    assert places(redis_client, "ns", "q", job_id) == set()


def test_a_release_is_not_a_failure_the_job_can_be_released_forever(engine: Engine,
                                                                   redis_client: redis.Redis) -> None:
    job_id = lease(engine, tries=1, ttl_s=0)
    for i in range(5):
        engine.release("ns", "q", job_id, now=T0 + i)
        [got] = engine.consume("ns", ["q"], ttr_s=30, now=T0 + i).jobs
        assert (got.id, got.tries_left, got.deliveries) == (job_id, 0, i + 2)

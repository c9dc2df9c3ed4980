"""The dead letter: bury.lua, respawn.lua and delete_dead.lua through the engine."""
from __future__ import annotations

import pytest
import redis

from queues import engine as engine_module
from queues.engine import Engine, JobNotFound
from tests.testutil import DEAD, READY, T0, places, queue_state, seed_job


def seed_dead(client: redis.Redis, count: int, *, first_seq: int = 1) -> list[str]:
    ids = [f"D{i}" for i in range(count)]
    for i, job_id in enumerate(ids):
        seed_job(client, "ns", "q", job_id, state=DEAD, score=first_seq + i, tries=0, deliveries=2)
    return ids


@pytest.mark.parametrize("ttl_s, expire_at, index", [
    (0, 0, None),                       # 0 = never expires: no timer
    (60, T0 + 60_000, T0 + 60_000),     # a fresh ttl, armed and indexed
])
def test_respawn_makes_dead_jobs_ready_with_one_try_and_a_new_ttl(engine: Engine, redis_client: redis.Redis,
                                                                 ttl_s: int, expire_at: int,
                                                                 index: int | None) -> None:
    [job_id] = seed_dead(redis_client, 1)

    assert engine.respawn("ns", "q", limit=10, ttl_s=ttl_s, now=T0) == 1

    state = queue_state(redis_client, "ns", "q")
    assert (state["ready"], state["dead"], state["expiry"]) == ([job_id], [], {job_id: expire_at} if ttl_s else {})
    assert state["jobs"][job_id] == {"state": READY, "tries": 1, "deliveries": 2, "expire_at": expire_at}
    assert state["index"] == index


@pytest.mark.parametrize("dead_count, limit, respawned", [(3, 2, 2), (3, 3, 3), (2, 5, 2), (0, 5, 0)])
def test_respawn_takes_the_oldest_dead_jobs_first_up_to_the_limit(engine: Engine, redis_client: redis.Redis,
                                                                 dead_count: int, limit: int,
                                                                 respawned: int) -> None:
    ids = seed_dead(redis_client, dead_count)

    assert engine.respawn("ns", "q", limit=limit, ttl_s=0, now=T0) == respawned

    state = queue_state(redis_client, "ns", "q")
    assert (state["ready"], state["dead"]) == (ids[:respawned], ids[respawned:])


def test_respawn_works_through_the_dead_letter_in_bounded_batches(engine: Engine, redis_client: redis.Redis,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_module, "DEAD_BATCH", 2)
    ids = seed_dead(redis_client, 7)
    calls: list[list] = []
    run = engine._run

    def spy(name: str, ns: str, q: str, args: list, extra: tuple = ()):
        calls.append(args)
        return run(name, ns, q, args, extra)

    monkeypatch.setattr(engine, "_run", spy)

    assert engine.respawn("ns", "q", limit=5, ttl_s=0, now=T0) == 5

    assert [args[-1] for args in calls] == [2, 2, 1]
    assert queue_state(redis_client, "ns", "q")["ready"] == ids[:5]


def test_a_dead_job_that_was_just_buried_goes_behind_older_ones(engine: Engine, redis_client: redis.Redis) -> None:
    older = seed_dead(redis_client, 2)
    [job_id] = engine.publish("ns", "q", [b"x"], now=T0).job_ids
    engine.consume("ns", ["q"], ttr_s=30, now=T0)
    engine.bury("ns", "q", job_id)

    assert queue_state(redis_client, "ns", "q")["dead"] == [*older, job_id]


def test_respawn_by_id_moves_only_the_named_dead_jobs(engine: Engine, redis_client: redis.Redis) -> None:
    ids = seed_dead(redis_client, 3)
    [ready] = engine.publish("ns", "q", [b"x"], now=T0).job_ids

    assert engine.respawn_ids("ns", "q", [ids[1], ready, "01NOSUCH000000000000000000"], ttl_s=0, now=T0) == 1

    state = queue_state(redis_client, "ns", "q")
    assert (state["ready"], state["dead"]) == ([ready, ids[1]], [ids[0], ids[2]])
    assert state["jobs"][ready]["tries"] == 1


def test_a_respawned_job_can_be_consumed_once_more_then_dies_again(engine: Engine, redis_client: redis.Redis) -> None:
    [job_id] = seed_dead(redis_client, 1)
    engine.respawn("ns", "q", limit=1, ttl_s=0, now=T0)

    [got] = engine.consume("ns", ["q"], ttr_s=5, now=T0).jobs
    engine.pump_due(now=T0 + 5_000)

    assert (got.id, got.tries_left) == (job_id, 0)
    assert queue_state(redis_client, "ns", "q")["dead"] == [job_id]


@pytest.mark.parametrize("limit, left", [(2, 1), (3, 0), (10, 0)])
def test_delete_dead_removes_the_oldest_dead_jobs_with_their_data(engine: Engine, redis_client: redis.Redis,
                                                                  limit: int, left: int) -> None:
    ids = seed_dead(redis_client, 3)

    assert engine.delete_dead("ns", "q", limit) == 3 - left

    state = queue_state(redis_client, "ns", "q")
    assert (state["dead"], set(state["jobs"])) == (ids[3 - left:], set(ids[3 - left:]))


def test_delete_dead_by_id_removes_only_dead_jobs(engine: Engine, redis_client: redis.Redis) -> None:
    ids = seed_dead(redis_client, 3)
    [ready] = engine.publish("ns", "q", [b"x"], now=T0).job_ids

    assert engine.delete_dead_ids("ns", "q", [ids[0], ids[2], ready]) == 2

    assert places(redis_client, "ns", "q", ids[0]) == set()
    assert places(redis_client, "ns", "q", ready) == {"ready", "expiry", "jobs"}
    assert queue_state(redis_client, "ns", "q")["dead"] == [ids[1]]


def test_bury_moves_an_in_flight_job_to_the_dead_letter_at_once(engine: Engine, redis_client: redis.Redis) -> None:
    [job_id] = engine.publish("ns", "q", [b"x"], tries=5, ttl_s=60, now=T0).job_ids
    engine.consume("ns", ["q"], ttr_s=30, now=T0)

    engine.bury("ns", "q", job_id)

    state = queue_state(redis_client, "ns", "q")
    assert (state["inflight"], state["dead"]) == ({}, [job_id])
    assert state["jobs"][job_id] == {"state": DEAD, "tries": 4, "deliveries": 1, "expire_at": 0}


@pytest.mark.parametrize("delay_s", [0, 10])
def test_bury_of_a_job_that_is_not_in_flight_raises(engine: Engine, redis_client: redis.Redis, delay_s: int) -> None:
    [job_id] = engine.publish("ns", "q", [b"x"], delay_s=delay_s, now=T0).job_ids
    before = queue_state(redis_client, "ns", "q")

    with pytest.raises(JobNotFound):
        engine.bury("ns", "q", job_id)
    with pytest.raises(JobNotFound):
        engine.bury("ns", "q", "01NOSUCH000000000000000000")

    assert queue_state(redis_client, "ns", "q") == before

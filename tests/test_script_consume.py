"""consume.lua through Engine.consume: pop and lease in one script."""
from __future__ import annotations

import threading

import pytest
import redis

from queues import keys
from queues.engine import Engine, JobState
from tests.testutil import (INFLIGHT, READY, T0, ScratchRedis, calls_delta, command_calls, queue_state, seed_job,
                            set_index)


def test_consume_leases_the_job_in_flight_and_nowhere_else(engine: Engine, redis_client: redis.Redis) -> None:
    [job_id] = engine.publish("ns", "q", [b"work"], ttl_s=60, tries=3, now=T0).job_ids

    consumed = engine.consume("ns", ["q"], ttr_s=30, now=T0 + 10_000)

    [got] = consumed.jobs
    assert (got.id, got.body, got.tries_left, got.ttl, got.deliveries, got.state, consumed.paused) == \
        (job_id, b"work", 2, 50, 1, JobState.INFLIGHT, False)
    assert queue_state(redis_client, "ns", "q") == {
        "ready": [], "delayed": {}, "inflight": {job_id: T0 + 40_000}, "expiry": {}, "dead": [],
        "jobs": {job_id: {"state": INFLIGHT, "tries": 2, "deliveries": 1, "expire_at": T0 + 60_000}},
        "index": T0 + 40_000, "registered": True}
    assert redis_client.hget(keys.meta("ns", "q"), "last_consume_ms") == str(T0 + 10_000).encode()


def test_consume_of_an_empty_queue_returns_nothing_and_changes_nothing(engine: Engine,
                                                                      redis_client: redis.Redis) -> None:
    consumed = engine.consume("ns", ["q"], ttr_s=30, now=T0)

    assert (consumed.jobs, consumed.paused) == ([], False)
    assert redis_client.keys("*") == []


def test_consume_is_a_single_evalsha_and_nothing_else_touches_the_job(scratch_redis: ScratchRedis) -> None:
    client = scratch_redis.client()
    engine = Engine(client=client)
    engine.consume("ns", ["q"], ttr_s=30, now=T0)  # loads the script: later calls are a plain EVALSHA
    engine.publish("ns", "q", [b"a"], ttl_s=0, now=T0)
    set_index(client, "ns", "q", T0)  # an earlier timer: the consume need not lower the index
    before = command_calls(client)

    [got] = engine.consume("ns", ["q"], ttr_s=30, now=T0).jobs

    delta = calls_delta(before, command_calls(client))
    # One EVALSHA, and the one pop inside it: no second script, no transaction, no
    # client-side pop. (INFO also counts the commands the script ran.)
    assert (delta.get("evalsha"), delta.get("zpopmin")) == (1, 1), delta
    assert not {"eval", "multi", "exec", "bzpopmin", "zrangebyscore"} & set(delta), delta
    assert got.state == JobState.INFLIGHT


def test_a_job_is_never_seen_outside_both_ready_and_inflight_while_consumes_run(engine: Engine) -> None:
    ids = set(engine.publish("ns", "q", [b"x"] * 300, ttl_s=0, now=T0).job_ids)
    observer = redis.Redis(connection_pool=engine.client.connection_pool)
    stop = threading.Event()
    snapshots: list[tuple[set[bytes], set[bytes]]] = []

    def observe() -> None:
        while not stop.is_set():
            pipe = observer.pipeline(transaction=True)  # MULTI/EXEC: one consistent view
            pipe.zrange(keys.ready("ns", "q"), 0, -1)
            pipe.zrange(keys.inflight("ns", "q"), 0, -1)
            ready, inflight = pipe.execute()
            snapshots.append((set(ready), set(inflight)))

    thread = threading.Thread(target=observe)
    thread.start()
    try:
        for i in range(len(ids)):
            engine.consume("ns", ["q"], ttr_s=30, now=T0 + i)
    finally:
        stop.set()
        thread.join()

    expected = {i.encode() for i in ids}
    assert len(snapshots) > 10
    for ready, inflight in snapshots:
        assert not ready & inflight
        assert ready | inflight == expected


@pytest.mark.parametrize("ready_counts, count, expected", [
    # queue i has ready_counts[i] jobs; expected: (queue index, job index) in answer order
    ([0, 2, 2], 1, [(1, 0)]),                    # the first non-empty listed queue
    ([1, 1, 1], 1, [(0, 0)]),                    # listed order, not name order
    ([0, 2, 2], 3, [(1, 0), (1, 1), (2, 0)]),    # a batch spills into the next queue
    ([2, 0, 1], 5, [(0, 0), (0, 1), (2, 0)]),    # fewer ready than asked: all of them
    ([0, 0, 0], 3, []),
])
def test_multi_queue_consume_takes_jobs_in_the_listed_queue_order(engine: Engine, redis_client: redis.Redis,
                                                                 ready_counts: list[int], count: int,
                                                                 expected: list[tuple[int, int]]) -> None:
    names = ["qc", "qa", "qb"]
    published = [engine.publish("ns", name, [b"%d" % i for i in range(n)], now=T0).job_ids if n else []
                 for name, n in zip(names, ready_counts)]

    consumed = engine.consume("ns", names, ttr_s=30, count=count, now=T0 + 1)

    assert [(job.queue, job.id) for job in consumed.jobs] == [(names[q], published[q][i]) for q, i in expected]
    for q, name in enumerate(names):
        taken = {published[q][i] for qi, i in expected if qi == q}
        state = queue_state(redis_client, "ns", name)
        assert set(state["inflight"]) == taken
        assert state["ready"] == [i for i in published[q] if i not in taken]


def test_a_count_batch_takes_the_head_of_the_queue_in_order(engine: Engine, redis_client: redis.Redis) -> None:
    ids = engine.publish("ns", "q", [b"1", b"2", b"3", b"4", b"5"], now=T0).job_ids

    consumed = engine.consume("ns", ["q"], ttr_s=30, count=3, now=T0)

    assert [job.id for job in consumed.jobs] == ids[:3]
    state = queue_state(redis_client, "ns", "q")
    assert (state["ready"], state["inflight"]) == (ids[3:], {i: T0 + 30_000 for i in ids[:3]})


@pytest.mark.parametrize("paused, expected_queue, reported", [
    ({"q1"}, "q2", True),        # a paused queue is skipped and reported
    ({"q1", "q2"}, None, True),  # everything paused: nothing, but reported
    (set(), "q1", False),
    ({"q2"}, "q1", True),        # a paused queue after the one that answered is still reported
])
def test_paused_queues_are_skipped_and_reported(engine: Engine, redis_client: redis.Redis, paused: set[str],
                                               expected_queue: str | None, reported: bool) -> None:
    ids = {q: engine.publish("ns", q, [b"x"], now=T0).job_ids[0] for q in ("q1", "q2")}
    for q in paused:
        engine.pause("ns", q, by="test", now=T0)

    consumed = engine.consume("ns", ["q1", "q2"], ttr_s=30, now=T0)

    assert [job.id for job in consumed.jobs] == ([ids[expected_queue]] if expected_queue else [])
    assert consumed.paused is reported
    for q in paused:
        assert queue_state(redis_client, "ns", q)["ready"] == [ids[q]]


@pytest.mark.parametrize("stale", [1, 50])
def test_expired_ready_jobs_are_dropped_and_never_hide_a_valid_job(engine: Engine, redis_client: redis.Redis,
                                                                  stale: int) -> None:
    expired = engine.publish("ns", "q", [b"old"] * stale, ttl_s=1, now=T0).job_ids
    [valid] = engine.publish("ns", "q", [b"new"], ttl_s=0, now=T0).job_ids

    consumed = engine.consume("ns", ["q"], ttr_s=30, now=T0 + 2_000)

    assert [job.id for job in consumed.jobs] == [valid]
    state = queue_state(redis_client, "ns", "q")
    assert (state["ready"], state["expiry"], set(state["jobs"])) == ([], {}, {valid})
    assert not set(expired) & set(state["jobs"])


def test_a_job_is_still_consumable_in_its_last_millisecond_of_life(engine: Engine) -> None:
    [job_id] = engine.publish("ns", "q", [b"x"], ttl_s=1, now=T0).job_ids

    assert [job.id for job in engine.consume("ns", ["q"], ttr_s=30, now=T0 + 999).jobs] == [job_id]


def test_consume_lowers_the_index_to_the_new_lease_only_when_it_is_earlier(engine: Engine,
                                                                          redis_client: redis.Redis) -> None:
    engine.publish("ns", "early", [b"x"], ttl_s=0, now=T0)
    engine.publish("ns", "late", [b"x"], ttl_s=0, now=T0)
    set_index(redis_client, "ns", "late", T0 + 5_000)

    engine.consume("ns", ["early", "late"], ttr_s=30, count=2, now=T0)

    assert queue_state(redis_client, "ns", "early")["index"] == T0 + 30_000
    assert queue_state(redis_client, "ns", "late")["index"] == T0 + 5_000


def test_a_zero_ttr_lease_is_due_at_once(engine: Engine, redis_client: redis.Redis) -> None:
    [job_id] = engine.publish("ns", "q", [b"x"], tries=2, ttl_s=0, now=T0).job_ids

    engine.consume("ns", ["q"], ttr_s=0, now=T0)
    engine.pump_due(now=T0)

    assert queue_state(redis_client, "ns", "q")["ready"] == [job_id]


def test_a_job_with_no_tries_left_is_consumed_without_its_tries_wrapping_around(engine: Engine,
                                                                              redis_client: redis.Redis) -> None:
    # A failed delivery is released without giving the try back (the notifier
    # counts attempts itself), so a ready job can have 0 tries left.
    seed_job(redis_client, "ns", "q", "J", state=READY, score=1, tries=0, deliveries=1)

    [got] = engine.consume("ns", ["q"], ttr_s=30, now=T0).jobs

    assert got.tries_left == 0
    assert queue_state(redis_client, "ns", "q")["jobs"]["J"]["tries"] == 0
    engine.pump_due(now=T0 + 30_000)
    assert queue_state(redis_client, "ns", "q")["dead"] == ["J"]

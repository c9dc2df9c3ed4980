"""pump.lua through Engine.pump_due: delays, leases (TTR) and ttl expiry,
moved by the clock given, and the timer index settled afterwards."""
from __future__ import annotations

import pytest
import redis

from queues import engine as engine_module
from queues.engine import Engine
from tests.testutil import DEAD, DELAYED, INFLIGHT, READY, T0, places, queue_state, seed_job, set_index


@pytest.mark.parametrize("now, ready", [
    (T0 + 9_999, False),   # never before its due time
    (T0 + 10_000, True),
    (T0 + 50_000, True),
])
def test_a_delayed_job_becomes_ready_at_its_due_time(engine: Engine, redis_client: redis.Redis, now: int,
                                                    ready: bool) -> None:
    [job_id] = engine.publish("ns", "q", [b"x"], delay_s=10, ttl_s=60, now=T0).job_ids

    handled, more = engine.pump_due(now=now)

    state = queue_state(redis_client, "ns", "q")
    if ready:
        assert (handled, more) == (1, False)
        assert (state["ready"], state["delayed"], state["expiry"]) == ([job_id], {}, {job_id: T0 + 60_000})
        assert state["jobs"][job_id]["state"] == READY
        assert state["index"] == T0 + 60_000  # settled to the next timer: the ttl expiry
    else:
        assert (handled, more) == (0, False)
        assert (state["ready"], state["delayed"]) == ([], {job_id: T0 + 10_000})
        assert state["index"] == T0 + 10_000


def test_delayed_jobs_become_ready_in_due_order_then_priority(engine: Engine, redis_client: redis.Redis) -> None:
    later = engine.publish("ns", "q", [b"x"], delay_s=3, now=T0).job_ids[0]
    sooner = engine.publish("ns", "q", [b"x"], delay_s=1, now=T0).job_ids[0]
    urgent = engine.publish("ns", "q", [b"x"], delay_s=2, priority=9, now=T0).job_ids[0]

    engine.pump_due(now=T0 + 5_000)

    assert queue_state(redis_client, "ns", "q")["ready"] == [urgent, sooner, later]


@pytest.mark.parametrize("tries, after_first_lease", [
    (3, {"state": READY, "tries": 2, "deliveries": 1}),
    (1, {"state": DEAD, "tries": 0, "deliveries": 1}),
])
def test_an_unacked_job_returns_when_its_lease_ends_or_is_dead_lettered_without_tries(
        engine: Engine, redis_client: redis.Redis, tries: int, after_first_lease: dict) -> None:
    [job_id] = engine.publish("ns", "q", [b"x"], tries=tries, ttl_s=0, now=T0).job_ids
    engine.consume("ns", ["q"], ttr_s=30, now=T0)

    engine.pump_due(now=T0 + 29_999)
    assert places(redis_client, "ns", "q", job_id) == {"inflight", "jobs"}
    engine.pump_due(now=T0 + 30_000)

    state = queue_state(redis_client, "ns", "q")
    assert state["jobs"][job_id] == {**after_first_lease, "expire_at": 0}
    where = "ready" if after_first_lease["state"] == READY else "dead"
    assert state[where] == [job_id] and state["inflight"] == {}
    assert state["index"] is None  # no timers left: the queue left the index


def test_a_job_is_delivered_tries_times_then_dead_lettered(engine: Engine, redis_client: redis.Redis) -> None:
    [job_id] = engine.publish("ns", "q", [b"x"], tries=3, ttl_s=0, now=T0).job_ids
    seen = []
    now = T0
    for _ in range(3):
        [got] = engine.consume("ns", ["q"], ttr_s=10, now=now).jobs
        seen.append((got.tries_left, got.deliveries))
        now += 10_000
        engine.pump_due(now=now)

    assert seen == [(2, 1), (1, 2), (0, 3)]
    state = queue_state(redis_client, "ns", "q")
    assert (state["ready"], state["dead"]) == ([], [job_id])
    assert state["jobs"][job_id] == {"state": DEAD, "tries": 0, "deliveries": 3, "expire_at": 0}
    assert engine.consume("ns", ["q"], ttr_s=10, now=now).jobs == []


def test_a_job_back_from_its_lease_goes_to_the_tail(engine: Engine, redis_client: redis.Redis) -> None:
    [first] = engine.publish("ns", "q", [b"x"], tries=2, ttl_s=0, now=T0).job_ids
    engine.consume("ns", ["q"], ttr_s=10, now=T0)
    others = engine.publish("ns", "q", [b"y", b"z"], ttl_s=0, now=T0 + 1).job_ids

    engine.pump_due(now=T0 + 10_000)

    assert queue_state(redis_client, "ns", "q")["ready"] == [*others, first]


def seed_delayed_past_ttl(engine: Engine) -> str:
    return engine.publish("ns", "q", [b"x"], delay_s=10, ttl_s=5, now=T0).job_ids[0]


def seed_ready_past_ttl(engine: Engine) -> str:
    return engine.publish("ns", "q", [b"x"], ttl_s=10, now=T0).job_ids[0]


def seed_in_flight_past_ttl(engine: Engine) -> str:
    job_id = engine.publish("ns", "q", [b"x"], ttl_s=5, tries=3, now=T0).job_ids[0]
    engine.consume("ns", ["q"], ttr_s=10, now=T0)
    return job_id


@pytest.mark.parametrize("seed, before, at", [
    (seed_delayed_past_ttl, {"delayed", "jobs"}, T0 + 10_000),    # at its due time, its ttl has run out
    (seed_ready_past_ttl, {"ready", "expiry", "jobs"}, T0 + 10_000),
    (seed_in_flight_past_ttl, {"inflight", "jobs"}, T0 + 10_000),  # its lease ends after its ttl
])
def test_a_job_past_its_ttl_is_removed_in_any_live_state(engine: Engine, redis_client: redis.Redis, seed,
                                                        before: set[str], at: int) -> None:
    job_id = seed(engine)
    engine.pump_due(now=at - 1)
    assert places(redis_client, "ns", "q", job_id) == before

    handled, _ = engine.pump_due(now=at)

    assert handled == 1
    assert places(redis_client, "ns", "q", job_id) == set()
    assert queue_state(redis_client, "ns", "q")["index"] is None


def test_a_job_back_from_its_lease_within_its_ttl_has_its_expiry_rearmed(engine: Engine,
                                                                        redis_client: redis.Redis) -> None:
    [job_id] = engine.publish("ns", "q", [b"x"], ttl_s=60, tries=2, now=T0).job_ids
    engine.consume("ns", ["q"], ttr_s=10, now=T0)

    engine.pump_due(now=T0 + 10_000)

    state = queue_state(redis_client, "ns", "q")
    assert (state["ready"], state["expiry"], state["index"]) == ([job_id], {job_id: T0 + 60_000}, T0 + 60_000)


def test_pump_settles_the_index_to_the_next_due_timer(engine: Engine, redis_client: redis.Redis) -> None:
    engine.publish("ns", "q", [b"a"], delay_s=1, ttl_s=0, now=T0)
    engine.publish("ns", "q", [b"b"], delay_s=7, ttl_s=0, now=T0)
    engine.publish("ns", "q", [b"c"], ttl_s=0, tries=2, now=T0)
    engine.consume("ns", ["q"], ttr_s=4, now=T0)

    due_times = []
    for now in (T0 + 1_000, T0 + 4_000, T0 + 7_000):
        engine.pump_due(now=now)
        due_times.append(queue_state(redis_client, "ns", "q")["index"])

    assert due_times == [T0 + 4_000, T0 + 7_000, None]


def test_pump_claims_only_queues_whose_index_score_is_due(engine: Engine, redis_client: redis.Redis) -> None:
    [due] = engine.publish("ns", "due", [b"x"], delay_s=1, ttl_s=0, now=T0).job_ids
    engine.publish("ns", "later", [b"x"], delay_s=100, ttl_s=0, now=T0)
    # A stale timer with no index entry is not found: the index is the only way in.
    seed_job(redis_client, "ns", "hidden", "H", state=DELAYED, score=T0)

    assert engine.pump_due(now=T0 + 1_000) == (1, False)

    assert queue_state(redis_client, "ns", "due")["ready"] == [due]
    assert queue_state(redis_client, "ns", "later")["index"] == T0 + 100_000
    assert queue_state(redis_client, "ns", "hidden")["delayed"] == {"H": T0}


def test_a_stale_index_score_is_settled_without_moving_anything(engine: Engine, redis_client: redis.Redis) -> None:
    engine.publish("ns", "q", [b"x"], delay_s=50, ttl_s=0, now=T0)
    set_index(redis_client, "ns", "q", T0)  # too early, as after an ack or a consume

    assert engine.pump_due(now=T0 + 1) == (0, False)

    assert queue_state(redis_client, "ns", "q")["index"] == T0 + 50_000


def test_a_full_batch_is_pumped_again_until_the_queue_is_done(engine: Engine, redis_client: redis.Redis,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_module, "PUMP_JOB_LIMIT", 3)
    ids = engine.publish("ns", "q", [b"%d" % i for i in range(7)], delay_s=1, ttl_s=0, now=T0).job_ids

    passes = [engine.pump_due(now=T0 + 1_000) for _ in range(4)]

    assert passes == [(3, True), (3, True), (1, False), (0, False)]
    # Timers due in the same millisecond leave in id order, not publish order.
    assert sorted(queue_state(redis_client, "ns", "q")["ready"]) == sorted(ids)


def test_a_batch_limit_spans_delayed_inflight_and_expiry_timers(engine: Engine, redis_client: redis.Redis,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_module, "PUMP_JOB_LIMIT", 2)
    for i in range(2):
        seed_job(redis_client, "ns", "q", f"D{i}", state=DELAYED, score=T0)
        seed_job(redis_client, "ns", "q", f"I{i}", state=INFLIGHT, score=T0, tries=1)
        seed_job(redis_client, "ns", "q", f"E{i}", state=READY, score=i + 1, expire_at=T0)
    set_index(redis_client, "ns", "q", T0)

    counts = [engine.pump_due(now=T0)[0] for _ in range(4)]

    assert counts == [2, 2, 2, 0]
    state = queue_state(redis_client, "ns", "q")
    assert (state["ready"], set(state["jobs"])) == (["D0", "D1", "I0", "I1"], {"D0", "D1", "I0", "I1"})


def test_dead_jobs_never_expire(engine: Engine, redis_client: redis.Redis) -> None:
    [job_id] = engine.publish("ns", "q", [b"x"], ttl_s=5, now=T0).job_ids
    engine.consume("ns", ["q"], ttr_s=1, now=T0)
    engine.pump_due(now=T0 + 1_000)
    assert queue_state(redis_client, "ns", "q")["dead"] == [job_id]

    engine.pump_due(now=T0 + 10 ** 9)

    state = queue_state(redis_client, "ns", "q")
    assert (state["dead"], state["jobs"][job_id]["expire_at"]) == ([job_id], 0)

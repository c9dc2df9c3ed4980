"""publish.lua through Engine.publish: seed -> publish -> the exact Redis state."""
from __future__ import annotations

import uuid

import pytest
import redis

from queues import keys, ulid
from queues.engine import DuplicateJobId, Engine
from tests.testutil import DELAYED, PRIORITY_UNIT, READY, T0, job, queue_state, ready_scores, set_index


def expected_state(**parts) -> dict:
    state = {"ready": [], "delayed": {}, "inflight": {}, "expiry": {}, "dead": [], "jobs": {},
             "index": None, "registered": True}
    state.update(parts)
    return state


@pytest.mark.parametrize("options, where, expire_at, index", [
    # no delay, no ttl: ready, no timer at all
    ({"delay_s": 0, "ttl_s": 0, "tries": 1}, "ready", 0, None),
    # no delay, ttl: ready, its ttl expiry is the queue's timer
    ({"delay_s": 0, "ttl_s": 60, "tries": 3}, "ready", T0 + 60_000, T0 + 60_000),
    # delay, no ttl: delayed until now + delay
    ({"delay_s": 10, "ttl_s": 0, "tries": 2}, "delayed", 0, T0 + 10_000),
    # delay and ttl: the expiry is armed only once the job is ready
    ({"delay_s": 10, "ttl_s": 60, "tries": 1}, "delayed", T0 + 60_000, T0 + 10_000),
])
def test_publish_stores_the_job_ready_or_delayed_with_its_timers(
        engine: Engine, redis_client: redis.Redis, options: dict, where: str, expire_at: int,
        index: int | None) -> None:
    [job_id] = engine.publish("ns", "q", [b"hello"], now=T0, **options).job_ids

    header = {"state": READY if where == "ready" else DELAYED, "tries": options["tries"], "deliveries": 0,
              "expire_at": expire_at}
    parts: dict = {"jobs": {job_id: header}, "index": index}
    if where == "ready":
        parts["ready"] = [job_id]
        parts["expiry"] = {job_id: expire_at} if expire_at else {}
    else:
        parts["delayed"] = {job_id: T0 + options["delay_s"] * 1000}
    assert queue_state(redis_client, "ns", "q") == expected_state(**parts)


def test_publish_keeps_body_content_type_and_attributes_with_the_job(engine: Engine,
                                                                     redis_client: redis.Redis) -> None:
    [job_id] = engine.publish("ns", "q", [b"\x00\xffbinary"], content_type="text/plain",
                              attributes={"a": "1"}, versioned=True, priority=7, now=T0).job_ids

    stored = job(redis_client, "ns", "q", job_id)
    assert stored is not None
    assert (stored.body, stored.content_type, stored.attributes, stored.priority) == \
        (b"\x00\xffbinary", "text/plain", '{"a":"1"}', 7)
    assert job_id.startswith("1") and len(job_id) == 27  # a versioned lmstfy id


def test_publish_gives_job_ids_that_carry_the_delay_and_publish_time(engine: Engine) -> None:
    [job_id] = engine.publish("ns", "q", [b"x"], delay_s=42, now=T0).job_ids

    assert (ulid.delay_of(job_id), ulid.timestamp_ms(job_id)) == (42, T0)


def test_the_first_publish_registers_the_queue_and_records_its_creation(engine: Engine,
                                                                       redis_client: redis.Redis) -> None:
    engine.publish("ns", "q", [b"a"], now=T0)
    engine.publish("ns", "q", [b"b"], now=T0 + 5)

    assert redis_client.smembers(keys.QUEUE_REGISTRY) == {b"ns/q"}
    assert redis_client.hget(keys.meta("ns", "q"), "created_ms") == str(T0).encode()


@pytest.mark.parametrize("priorities, expected_order", [
    ([0, 0, 0], [0, 1, 2]),                     # FIFO
    ([0, 5, 255, 5, 0], [2, 1, 3, 0, 4]),       # higher first, FIFO within a priority
    ([1, 0, 254, 255], [3, 2, 0, 1]),
])
def test_ready_jobs_are_ordered_by_priority_then_publish_order(engine: Engine, redis_client: redis.Redis,
                                                              priorities: list[int],
                                                              expected_order: list[int]) -> None:
    ids = [engine.publish("ns", "q", [b"x"], priority=p, now=T0 + i).job_ids[0] for i, p in enumerate(priorities)]

    assert queue_state(redis_client, "ns", "q")["ready"] == [ids[i] for i in expected_order]
    assert engine.consume("ns", ["q"], ttr_s=30, count=len(ids), now=T0 + 10).jobs[0].id == ids[expected_order[0]]


def test_a_bulk_publish_keeps_the_order_of_its_bodies(engine: Engine, redis_client: redis.Redis) -> None:
    ids = engine.publish("ns", "q", [b"1", b"2", b"3", b"4"], now=T0).job_ids

    assert queue_state(redis_client, "ns", "q")["ready"] == ids
    assert [s for _, s in sorted(ready_scores(redis_client, "ns", "q").values())] == [1, 2, 3, 4]


@pytest.mark.parametrize("high, low", [(255, 0), (255, 254), (1, 0)])
def test_ready_scores_stay_exact_at_the_largest_sequence_numbers(engine: Engine, redis_client: redis.Redis,
                                                                 high: int, low: int) -> None:
    # The scores (255 - priority) * 2^45 + seq reach 2^53 - 1: any rounding
    # (Lua's %.14g, a float detour) would merge or reorder them.
    redis_client.hset(keys.meta("ns", "q"), "seq", PRIORITY_UNIT - 5)
    low_first = engine.publish("ns", "q", [b"low"], priority=low, now=T0).job_ids[0]
    high_then = engine.publish("ns", "q", [b"high"], priority=high, now=T0).job_ids[0]
    low_last = engine.publish("ns", "q", [b"low2"], priority=low, now=T0).job_ids[0]

    assert ready_scores(redis_client, "ns", "q") == {
        low_first: (low, PRIORITY_UNIT - 4), high_then: (high, PRIORITY_UNIT - 3), low_last: (low, PRIORITY_UNIT - 2)}
    assert queue_state(redis_client, "ns", "q")["ready"] == [high_then, low_first, low_last]
    assert redis_client.zscore(keys.ready("ns", "q"), high_then) == (255 - high) * PRIORITY_UNIT + PRIORITY_UNIT - 3


def test_the_same_idempotency_key_returns_the_first_ids_and_publishes_nothing(engine: Engine,
                                                                             redis_client: redis.Redis) -> None:
    first = engine.publish("ns", "q", [b"a", b"b"], idempotency_key="k1", now=T0)
    before = queue_state(redis_client, "ns", "q")

    again = engine.publish("ns", "q", [b"other"], idempotency_key="k1", delay_s=5, now=T0 + 1000)

    assert (again.job_ids, again.duplicated, first.duplicated) == (first.job_ids, True, False)
    assert queue_state(redis_client, "ns", "q") == before
    assert 86_390 < redis_client.ttl(keys.idempotency("ns", "q", "k1")) <= 86_400


def test_the_idempotency_key_still_answers_after_the_first_job_was_consumed_and_acked(engine: Engine) -> None:
    [job_id] = engine.publish("ns", "q", [b"a"], idempotency_key="k", now=T0).job_ids
    engine.consume("ns", ["q"], ttr_s=30, now=T0)
    engine.ack("ns", "q", job_id)

    again = engine.publish("ns", "q", [b"a"], idempotency_key="k", now=T0 + 1)

    assert (again.job_ids, again.duplicated) == ([job_id], True)
    assert engine.consume("ns", ["q"], ttr_s=30, now=T0 + 2).jobs == []


@pytest.mark.parametrize("other_ns, other_q, other_key", [
    ("ns", "q2", "k"),   # another queue, same key
    ("ns2", "q", "k"),   # another namespace, same queue name
    ("ns", "q", "k2"),   # same queue, another key
])
def test_an_idempotency_key_is_independent_per_queue_and_key(engine: Engine, redis_client: redis.Redis,
                                                            other_ns: str, other_q: str, other_key: str) -> None:
    first = engine.publish("ns", "q", [b"a"], idempotency_key="k", now=T0)

    other = engine.publish(other_ns, other_q, [b"b"], idempotency_key=other_key, now=T0)

    assert not other.duplicated and other.job_ids != first.job_ids
    assert queue_state(redis_client, other_ns, other_q)["ready"][-1] == other.job_ids[0]


@pytest.mark.parametrize("bodies", [[b"one"], [b"one", b"two", b"three"]])
def test_a_duplicate_job_id_raises_and_writes_nothing(engine: Engine, redis_client: redis.Redis,
                                                      monkeypatch: pytest.MonkeyPatch, bodies: list[bytes]) -> None:
    [existing] = engine.publish("ns", "q", [b"original"], ttl_s=0, now=T0).job_ids
    before = queue_state(redis_client, "ns", "q")
    fresh = ["01FRESH0000000000000000000%d" % i for i in range(len(bodies) - 1)] + [existing]
    monkeypatch.setattr(ulid, "new_job_ids", lambda count, *args: fresh[:count])

    with pytest.raises(DuplicateJobId, match=existing):
        engine.publish("ns", "q", bodies, delay_s=3, now=T0 + 1)

    assert queue_state(redis_client, "ns", "q") == before
    stored = job(redis_client, "ns", "q", existing)
    assert stored is not None and stored.body == b"original"


@pytest.mark.parametrize("existing_delay_s, new_delay_s, index", [
    (10, 5, T0 + 5_000),     # an earlier timer lowers the index
    (10, 20, T0 + 10_000),   # a later one leaves it alone
    (None, 20, T0 + 20_000),  # the first timer sets it
])
def test_publish_lowers_the_queue_index_only_for_an_earlier_timer(engine: Engine, redis_client: redis.Redis,
                                                                 existing_delay_s: int | None, new_delay_s: int,
                                                                 index: int) -> None:
    if existing_delay_s is not None:
        engine.publish("ns", "q", [b"first"], delay_s=existing_delay_s, ttl_s=0, now=T0)

    engine.publish("ns", "q", [b"second"], delay_s=new_delay_s, ttl_s=0, now=T0)

    assert queue_state(redis_client, "ns", "q")["index"] == index


def test_publish_lowers_an_index_score_that_a_pumper_claimed(engine: Engine, redis_client: redis.Redis) -> None:
    engine.publish("ns", "q", [b"first"], delay_s=10, ttl_s=0, now=T0)
    set_index(redis_client, "ns", "q", T0 + 60_000)  # as index_claim leaves it

    engine.publish("ns", "q", [b"second"], delay_s=3, ttl_s=0, now=T0)

    assert queue_state(redis_client, "ns", "q")["index"] == T0 + 3_000


def test_a_ready_publish_announces_the_jobs_on_the_ready_channel(engine: Engine, redis_client: redis.Redis) -> None:
    # Pub/sub channels are server-wide (not per DB): a queue name no other test run uses.
    q = f"announce-{uuid.uuid4().hex}"
    pubsub = redis_client.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(engine.ready_channel("ns", q))
    pubsub.get_message(timeout=1)  # the subscribe confirmation

    engine.publish("ns", q, [b"late"], delay_s=5, now=T0)
    engine.publish("ns", q, [b"a", b"b"], now=T0)

    message = pubsub.get_message(timeout=1)
    pubsub.close()
    assert message is not None and message["data"] == b"2"

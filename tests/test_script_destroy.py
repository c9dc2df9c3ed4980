"""destroy.lua through Engine.destroy: live jobs go in bounded batches, the
dead letter stays."""
from __future__ import annotations

import pytest
import redis

from queues import engine as engine_module
from queues import keys
from queues.engine import Engine
from tests.testutil import T0, queue_keys_present, queue_state


def seed_every_state(engine: Engine, ready: int, delayed: int, inflight: int, dead: int) -> dict[str, list[str]]:
    leased = engine.publish("ns", "q", [b"i"] * (inflight + dead), ttl_s=0, now=T0).job_ids
    assert len(engine.consume("ns", ["q"], ttr_s=30, count=inflight + dead, now=T0).jobs) == inflight + dead
    for job_id in leased[:dead]:
        engine.bury("ns", "q", job_id)
    return {"dead": leased[:dead], "inflight": leased[dead:],
            "ready": engine.publish("ns", "q", [b"r"] * ready, ttl_s=60, now=T0).job_ids,
            "delayed": engine.publish("ns", "q", [b"d"] * delayed, delay_s=30, now=T0).job_ids}


@pytest.mark.parametrize("batch", [3, 1000])
def test_destroy_deletes_every_live_job_in_batches_and_keeps_the_dead_letter(
        engine: Engine, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch, batch: int) -> None:
    monkeypatch.setattr(engine_module, "DESTROY_BATCH", batch)
    ids = seed_every_state(engine, ready=10, delayed=4, inflight=3, dead=2)
    assert len(ids["inflight"]) + len(ids["ready"]) + len(ids["delayed"]) == 17
    batches: list[int] = []
    run = engine._run

    def spy(name: str, ns: str, q: str, args: list, extra: tuple = ()):
        answer = run(name, ns, q, args, extra)
        if name == "destroy":
            batches.append(answer[0])
        return answer

    monkeypatch.setattr(engine, "_run", spy)

    assert engine.destroy("ns", "q") == 17

    assert sum(batches) == 17 and max(batches) <= batch
    assert len(batches) == (6 if batch == 3 else 1)
    state = queue_state(redis_client, "ns", "q")
    assert (state["ready"], state["delayed"], state["inflight"], state["expiry"]) == ([], {}, {}, {})
    assert (state["dead"], set(state["jobs"])) == (ids["dead"], set(ids["dead"]))
    assert state["registered"] is True  # the queue still has its dead letter


def test_destroy_of_a_queue_without_dead_jobs_leaves_no_trace(engine: Engine, redis_client: redis.Redis,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_module, "DESTROY_BATCH", 4)
    engine.publish("ns", "q", [b"x"] * 9, delay_s=5, now=T0)
    engine.publish("ns", "q", [b"x"] * 3, ttl_s=60, now=T0)
    engine.publish("ns", "keep", [b"x"], delay_s=5, now=T0)

    assert engine.destroy("ns", "q") == 12

    assert queue_keys_present(redis_client, "ns", "q") == []
    state = queue_state(redis_client, "ns", "q")
    assert (state["index"], state["registered"]) == (None, False)
    assert queue_state(redis_client, "ns", "keep")["index"] == T0 + 5_000


def test_destroy_of_a_large_queue_deletes_everything(engine: Engine, redis_client: redis.Redis,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_module, "DESTROY_BATCH", 700)
    for _ in range(25):
        engine.publish("ns", "q", [b"x"] * 100, now=T0)

    assert engine.destroy("ns", "q") == 2_500

    assert queue_keys_present(redis_client, "ns", "q") == []


def test_destroy_of_an_unknown_queue_deletes_nothing(engine: Engine, redis_client: redis.Redis) -> None:
    assert engine.destroy("ns", "nothing") == 0
    assert redis_client.keys("*") == []


def test_a_destroyed_queue_can_be_used_again(engine: Engine, redis_client: redis.Redis) -> None:
    engine.publish("ns", "q", [b"x"], now=T0)
    engine.destroy("ns", "q")

    [job_id] = engine.publish("ns", "q", [b"y"], delay_s=3, now=T0 + 1).job_ids

    assert redis_client.sismember(keys.QUEUE_REGISTRY, "ns/q")
    engine.pump_due(now=T0 + 3_001)
    assert [j.id for j in engine.consume("ns", ["q"], ttr_s=30, now=T0 + 3_001).jobs] == [job_id]


def test_a_publish_racing_the_end_of_a_destroy_keeps_its_queue_registered_and_indexed(
        engine: Engine, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    engine.publish("ns", "q", [b"x"] * 3, now=T0)
    publisher = Engine()
    raced: list[str] = []
    run = engine._run

    def destroy_then_publish(name: str, ns: str, q: str, args: list, extra: tuple = ()):
        answer = run(name, ns, q, args, extra)
        if name == "destroy" and answer[2] and not raced:
            # Between the last destroy script and its registry/index clean-up.
            raced.extend(publisher.publish("ns", "q", [b"new"], delay_s=5, now=T0).job_ids)
        return answer

    monkeypatch.setattr(engine, "_run", destroy_then_publish)

    assert engine.destroy("ns", "q") == 3

    state = queue_state(redis_client, "ns", "q")
    assert (state["delayed"], state["index"], state["registered"]) == ({raced[0]: T0 + 5_000}, T0 + 5_000, True)
    engine.pump_due(now=T0 + 5_000)
    assert queue_state(redis_client, "ns", "q")["ready"] == raced


def test_destroying_a_paused_queue_keeps_it_paused(engine: Engine, redis_client: redis.Redis) -> None:
    engine.publish("ns", "q", [b"x"] * 2, now=T0)
    engine.pause("ns", "q", by="alice", now=T0)

    assert engine.destroy("ns", "q") == 2

    assert redis_client.hget(keys.meta("ns", "q"), "paused_by") == b"alice"
    assert queue_state(redis_client, "ns", "q")["registered"] is True
    engine.publish("ns", "q", [b"y"], now=T0 + 1)
    assert engine.consume("ns", ["q"], ttr_s=30, now=T0 + 1).paused is True

"""ack.lua through Engine.ack: every trace of the job goes, in any state."""
from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from queues.engine import Engine
from tests.testutil import T0, places, queue_state


def ready_with_ttl(engine: Engine) -> str:
    return engine.publish("ns", "q", [b"x"], ttl_s=60, now=T0).job_ids[0]


def delayed(engine: Engine) -> str:
    return engine.publish("ns", "q", [b"x"], delay_s=30, ttl_s=60, now=T0).job_ids[0]


def in_flight(engine: Engine) -> str:
    job_id = engine.publish("ns", "q", [b"x"], ttl_s=60, tries=2, now=T0).job_ids[0]
    engine.consume("ns", ["q"], ttr_s=30, now=T0)
    return job_id


def released_later(engine: Engine) -> str:
    job_id = in_flight(engine)
    engine.release("ns", "q", job_id, delay_s=10, now=T0 + 1)
    return job_id


def dead(engine: Engine) -> str:
    job_id = in_flight(engine)
    engine.bury("ns", "q", job_id)
    return job_id


@pytest.mark.parametrize("seed, where", [
    (ready_with_ttl, {"ready", "expiry", "jobs"}),
    (delayed, {"delayed", "jobs"}),
    (in_flight, {"inflight", "jobs"}),
    (released_later, {"delayed", "jobs"}),
    (dead, {"dead", "jobs"}),
])
def test_ack_removes_every_trace_of_the_job_in_any_state(engine: Engine, redis_client: redis.Redis,
                                                        seed: Callable[[Engine], str], where: set[str]) -> None:
    job_id = seed(engine)
    [other] = engine.publish("ns", "q", [b"bystander"], ttl_s=0, now=T0).job_ids
    assert places(redis_client, "ns", "q", job_id) == where

    assert engine.ack("ns", "q", job_id) is True

    assert places(redis_client, "ns", "q", job_id) == set()
    state = queue_state(redis_client, "ns", "q")
    assert set(state["jobs"]) == {other} and state["ready"] == [other]


@pytest.mark.parametrize("job_id", ["01UNKNOWN0000000000000000", ""])
def test_ack_of_an_unknown_job_returns_false(engine: Engine, job_id: str) -> None:
    engine.publish("ns", "q", [b"x"], now=T0)

    assert engine.ack("ns", "q", job_id) is False


def test_a_second_ack_finds_nothing(engine: Engine) -> None:
    job_id = in_flight(engine)

    assert (engine.ack("ns", "q", job_id), engine.ack("ns", "q", job_id)) == (True, False)


def test_an_acked_job_never_comes_back_when_its_old_lease_ends(engine: Engine, redis_client: redis.Redis) -> None:
    job_id = in_flight(engine)
    engine.ack("ns", "q", job_id)

    engine.pump_due(now=T0 + 30_000)

    state = queue_state(redis_client, "ns", "q")
    assert (state["ready"], state["dead"], state["jobs"]) == ([], [], {})


def test_ack_in_one_queue_leaves_the_same_id_elsewhere_alone(engine: Engine, redis_client: redis.Redis) -> None:
    job_id = in_flight(engine)

    assert engine.ack("ns", "other", job_id) is False
    assert places(redis_client, "ns", "q", job_id) == {"inflight", "jobs"}

"""Long-poll consume (Engine.consume_wait and wakeup.py), in real time: a waiter
wakes within 100 ms of a job becoming ready, waiters get distinct jobs, and a
waiter does not busy-spin Redis."""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from queues.engine import Consumed, Engine, now_ms
from tests.testutil import ScratchRedis, calls_delta, command_calls

pytestmark = pytest.mark.slow

WAKE_UP_LIMIT_S = 0.1
# Commands consume.lua runs on an empty queue (counted by INFO, but not requests).
CONSUME_SCRIPT_INTERNALS = {"hexists", "zrange", "zpopmin"}


@dataclass
class Waiter:
    """consume_wait in a thread, with the moment it returned."""
    engine: Engine
    queues: list[str]
    timeout_s: float = 5.0
    result: Consumed | None = None
    returned_at: float = 0.0
    error: BaseException | None = None
    thread: threading.Thread = field(init=False)

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._run)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.result = self.engine.consume_wait("ns", self.queues, ttr_s=30, count=1, timeout_s=self.timeout_s)
        except BaseException as exc:  # noqa: BLE001 - re-raised by join()
            self.error = exc
        self.returned_at = time.monotonic()

    def join(self) -> Consumed:
        self.thread.join(timeout=self.timeout_s + 5)
        assert not self.thread.is_alive(), "the waiter never returned"
        if self.error:
            raise self.error
        assert self.result is not None
        return self.result


def test_a_waiting_consumer_gets_a_published_job_within_100_ms(engine: Engine) -> None:
    latencies = []
    for round_ in range(3):
        waiter = Waiter(engine, ["q"])
        time.sleep(0.3)
        published_at = time.monotonic()
        [job_id] = engine.publish("ns", "q", [b"round %d" % round_]).job_ids

        consumed = waiter.join()

        assert [job.id for job in consumed.jobs] == [job_id]
        latencies.append(waiter.returned_at - published_at)
    print("wake-up latency after publish: " + ", ".join(f"{s * 1000:.1f} ms" for s in latencies))
    assert max(latencies) < WAKE_UP_LIMIT_S


def test_a_waiter_on_several_queues_wakes_for_any_of_them(engine: Engine) -> None:
    waiter = Waiter(engine, ["q1", "q2", "q3"])
    time.sleep(0.3)
    published_at = time.monotonic()
    [job_id] = engine.publish("ns", "q3", [b"x"]).job_ids

    consumed = waiter.join()

    assert [(job.queue, job.id) for job in consumed.jobs] == [("q3", job_id)]
    assert waiter.returned_at - published_at < WAKE_UP_LIMIT_S


@pytest.mark.parametrize("bulk", [True, False])
def test_many_waiting_consumers_each_get_a_distinct_job(engine: Engine, bulk: bool) -> None:
    waiters = [Waiter(engine, ["q"]) for _ in range(8)]
    time.sleep(0.5)
    if bulk:
        published = engine.publish("ns", "q", [b"%d" % i for i in range(8)]).job_ids
    else:
        published = [engine.publish("ns", "q", [b"%d" % i]).job_ids[0] for i in range(8)]

    got = [job.id for waiter in waiters for job in waiter.join().jobs]

    assert sorted(got) == sorted(published)  # all 8 delivered, none twice
    assert engine.consume("ns", ["q"], ttr_s=30).jobs == []


def test_a_delayed_job_wakes_a_waiter_when_the_pumper_makes_it_ready(engine: Engine) -> None:
    [job_id] = engine.publish("ns", "q", [b"x"], delay_s=1, now=now_ms() - 1_000).job_ids  # due, not yet pumped
    waiter = Waiter(engine, ["q"])
    time.sleep(0.3)
    pumped_at = time.monotonic()
    assert engine.pump_due()[0] == 1

    consumed = waiter.join()

    assert [job.id for job in consumed.jobs] == [job_id]
    assert waiter.returned_at - pumped_at < WAKE_UP_LIMIT_S


def test_a_released_job_wakes_a_waiter(engine: Engine) -> None:
    [job_id] = engine.publish("ns", "q", [b"x"]).job_ids
    engine.consume("ns", ["q"], ttr_s=30)
    waiter = Waiter(engine, ["q"])
    time.sleep(0.3)
    released_at = time.monotonic()
    engine.release("ns", "q", job_id)

    consumed = waiter.join()

    assert [job.id for job in consumed.jobs] == [job_id]
    assert waiter.returned_at - released_at < WAKE_UP_LIMIT_S


def test_a_waiter_on_a_paused_queue_wakes_when_it_is_resumed(engine: Engine) -> None:
    [job_id] = engine.publish("ns", "q", [b"x"]).job_ids
    engine.pause("ns", "q", by="test")
    waiter = Waiter(engine, ["q"])
    time.sleep(0.3)
    resumed_at = time.monotonic()
    engine.resume("ns", "q")

    consumed = waiter.join()

    assert [job.id for job in consumed.jobs] == [job_id]
    assert waiter.returned_at - resumed_at < WAKE_UP_LIMIT_S


def test_a_waiter_with_nothing_to_consume_returns_empty_at_its_timeout(engine: Engine) -> None:
    started = time.monotonic()
    waiter = Waiter(engine, ["q"], timeout_s=0.6)

    consumed = waiter.join()

    assert (consumed.jobs, consumed.paused) == ([], False)
    assert 0.6 <= waiter.returned_at - started < 1.5


@pytest.fixture(scope="session")
def quiet_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScratchRedis]:
    """A private server kept for the whole session: the wake-up listener thread
    subscribed to it lives as long as the process, and must not lose it."""
    server = ScratchRedis(tmp_path_factory.mktemp("quiet-redis"))
    server.start()
    yield server
    server.kill()


def test_a_waiter_does_not_busy_spin_redis(quiet_redis: ScratchRedis) -> None:
    # A private server: its counters see only this test's traffic.
    engine = Engine(pool=f"scratch-{quiet_redis.port}", client=quiet_redis.client())
    observer = quiet_redis.client()
    engine.consume("ns", ["q"], ttr_s=30)  # loads the script
    before = command_calls(observer)

    consumed = engine.consume_wait("ns", ["q"], ttr_s=30, count=1, timeout_s=2)

    delta = calls_delta(before, command_calls(observer))
    delta["info"] -= 1  # the observer's first INFO
    requests = sum(count for name, count in delta.items() if name not in CONSUME_SCRIPT_INTERNALS)
    print(f"requests while waiting 2 s on an empty queue: {requests} ({delta})")
    assert consumed.jobs == []
    # One consume attempt at the start and one per safety re-poll (1 s): no spinning.
    assert delta["evalsha"] <= 4
    assert requests < 20

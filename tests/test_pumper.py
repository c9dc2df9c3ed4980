"""The pumper: Pumper.pump_once over many queues, several pumpers at once, the
publish/settle race, and the `manage.py pumper` command (once, and through a
Redis outage)."""
from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis

from queues import engine as engine_module
from queues import keys, pools, scripts
from queues.engine import Engine, now_ms
from queues.pumper import Pumper
from tests.testutil import (T0, ScratchRedis, calls_delta, command_calls, database_url_for_subprocesses, env_with,
                            index_score, queue_state, set_index)

MANAGE_PY = Path(__file__).resolve().parent.parent / "manage.py"


def pumper_for(engine: Engine) -> Pumper:
    pumper = Pumper(interval_s=1.0)
    pumper.engines = [engine]
    return pumper


def test_pump_once_moves_due_jobs_of_many_queues_across_several_passes(engine: Engine, redis_client: redis.Redis,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_module, "PUMP_QUEUE_LIMIT", 40)
    for i in range(150):
        engine.publish("ns", f"q{i}", [b"x", b"y"], delay_s=1 + i % 3, ttl_s=0, now=T0)

    assert Pumper(interval_s=1.0).pump_once(now=T0 + 2_000) == 200  # delays 1 s and 2 s
    assert Pumper(interval_s=1.0).pump_once(now=T0 + 2_000) == 0
    assert Pumper(interval_s=1.0).pump_once(now=T0 + 3_000) == 100

    assert all(len(queue_state(redis_client, "ns", f"q{i}")["ready"]) == 2 for i in range(150))
    assert redis_client.zcard(keys.TIMER_INDEX) == 0


def test_full_batches_are_pumped_again_within_one_pass(engine: Engine, redis_client: redis.Redis,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_module, "PUMP_JOB_LIMIT", 5)
    monkeypatch.setattr(engine_module, "PUMP_QUEUE_LIMIT", 3)
    for i in range(10):
        engine.publish("ns", f"q{i}", [b"x"] * 12, delay_s=1, ttl_s=0, now=T0)

    assert pumper_for(engine).pump_once(now=T0 + 1_000) == 120

    assert [len(queue_state(redis_client, "ns", f"q{i}")["ready"]) for i in range(10)] == [12] * 10
    assert redis_client.zcard(keys.TIMER_INDEX) == 0


def seed_idle_queues(engine: Engine, count: int) -> None:
    """Queues with far-future timers only: a delayed job each (one pipeline)."""
    pipe = engine.client.pipeline(transaction=False)
    for i in range(count):
        scripts.script("publish")(
            keys=keys.queue_keys("idle", f"q{i}"), client=pipe,
            args=[T0, 3_600_000, 0, 1, 0, "", "", keys.ready_channel(0, "idle", f"q{i}"), 60, f"J{i}", b"x"])
        pipe.zadd(keys.TIMER_INDEX, {keys.queue_member("idle", f"q{i}"): T0 + 3_600_000}, lt=True)
    pipe.execute()


def test_idle_queues_are_not_touched_by_a_pump_pass(engine: Engine, redis_client: redis.Redis) -> None:
    seed_idle_queues(engine, 2_000)
    index_before = redis_client.zrange(keys.TIMER_INDEX, 0, -1, withscores=True)
    pumper = pumper_for(engine)

    assert pumper.pump_once(now=T0 + 1_000) == 0
    assert redis_client.zrange(keys.TIMER_INDEX, 0, -1, withscores=True) == index_before  # nothing claimed

    [due] = engine.publish("ns", "due", [b"x"], delay_s=1, ttl_s=0, now=T0).job_ids
    assert pumper.pump_once(now=T0 + 1_000) == 1
    assert queue_state(redis_client, "ns", "due")["ready"] == [due]
    assert redis_client.zrange(keys.TIMER_INDEX, 0, -1, withscores=True) == index_before
    assert redis_client.zcard(keys.delayed("idle", "q1999")) == 1


def test_pump_cost_grows_with_due_queues_not_with_idle_ones(scratch_redis: ScratchRedis) -> None:
    """Same commands with 0 or 2 000 idle queues: claim, 3 pumps, settle, 3 rechecks."""
    client = scratch_redis.client()
    engine = Engine(client=client)
    pumper = pumper_for(engine)
    engine.publish("ns", "warm-up", [b"x"], delay_s=1, ttl_s=0, now=T0)
    pumper.pump_once(now=T0 + 1_000)  # loads every script the pass uses
    costs = []
    for idle in (0, 2_000):
        client.flushdb()
        seed_idle_queues(engine, idle)
        for i in range(3):
            engine.publish("ns", f"due{i}", [b"x"], delay_s=1, ttl_s=0, now=T0)
        before = command_calls(client)
        assert pumper.pump_once(now=T0 + 1_000) == 3
        delta = calls_delta(before, command_calls(client))
        costs.append({name: delta[name] for name in ("evalsha", "zadd", "zrangebyscore") if name in delta})

    assert costs[0] == costs[1]
    assert costs[0]["evalsha"] == 1 + 3 + 1 + 3


def test_several_pumpers_at_once_move_each_job_exactly_once(redis_client: redis.Redis,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # Small batches so that the pumpers contend for the same queues many times.
    monkeypatch.setattr(engine_module, "PUMP_JOB_LIMIT", 7)
    monkeypatch.setattr(engine_module, "PUMP_QUEUE_LIMIT", 5)
    default_pool = pools.client().connection_pool  # the default pool, configured or embedded
    publisher = Engine()
    published: dict[str, set[str]] = {}
    for qi in range(50):
        ids: set[str] = set()
        for delay in range(1, 11):
            ids.update(publisher.publish("ns", f"q{qi}", [b"x"] * 10, delay_s=delay, ttl_s=0, now=T0).job_ids)
        published[f"q{qi}"] = ids
    assert sum(len(ids) for ids in published.values()) == 5_000

    pumpers = 4
    clock = [T0 + step * 250 for step in range(1, 45)]
    barrier = threading.Barrier(pumpers)
    handled = [0] * pumpers
    errors: list[BaseException] = []

    def run(slot: int) -> None:
        engine = Engine(client=redis.Redis(connection_pool=redis.ConnectionPool(
            connection_class=default_pool.connection_class, **default_pool.connection_kwargs)))
        try:
            for now in clock:
                barrier.wait(timeout=30)  # everyone pumps the same instant together
                more = True
                while more:
                    count, more = engine.pump_due(now=now)
                    handled[slot] += count
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
            barrier.abort()
        finally:
            engine.client.close()

    threads = [threading.Thread(target=run, args=(slot,)) for slot in range(pumpers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert errors == []
    assert sum(handled) == 5_000
    assert sum(1 for count in handled if count) > 1  # they really shared the work
    for q, ids in published.items():
        state = queue_state(redis_client, "ns", q)
        assert set(state["ready"]) == ids and len(state["ready"]) == 100
        assert (state["delayed"], state["inflight"], state["dead"]) == ({}, {}, [])
        # Each make_ready takes one sequence number: 100 means no job was readied twice.
        assert redis_client.hget(keys.meta("ns", q), "seq") == b"100"
    assert redis_client.zcard(keys.TIMER_INDEX) == 0


class RacingPublish:
    """Runs a publish of an earlier timer right before the pumper's settle step,
    i.e. after pump.lua computed the queue's next due time without it."""

    def __init__(self, publisher: Engine, delay_s: int, defer_index_update: bool) -> None:
        self.publisher = publisher
        self.delay_s = delay_s
        self.deferred: list[tuple] = []
        self.fired = False
        if defer_index_update:  # the publisher is slow to send its ZADD LT
            publisher._lower_index = lambda *args: self.deferred.append(args)

    def script(self, name: str):
        if name == "index_settle" and not self.fired:
            self.fired = True
            self.publisher.publish("ns", "q", [b"racer"], delay_s=self.delay_s, ttl_s=0, now=T0)
        return scripts.script(name)

    def finish_publish(self) -> None:
        for args in self.deferred:
            Engine._lower_index(self.publisher, *args)


@pytest.mark.parametrize("delay_s, defer_index_update", [
    (5, False),    # its own index update lowers the score below the claim: settle keeps it
    (60, False),   # later than the claim: its update is a no-op and settle overwrites the score
    (60, True),    # its update has not landed yet when settle runs
    (5, True),
])
def test_a_timer_published_while_a_pumper_settles_is_never_lost(engine: Engine, redis_client: redis.Redis,
                                                                monkeypatch: pytest.MonkeyPatch, delay_s: int,
                                                                defer_index_update: bool) -> None:
    engine.publish("ns", "q", [b"due"], delay_s=1, ttl_s=0, now=T0 - 1_000)  # the claimed queue's only timer
    racing = RacingPublish(Engine(), delay_s, defer_index_update)
    monkeypatch.setattr(engine_module, "script", racing.script)

    assert engine.pump_due(now=T0) == (1, False)

    assert racing.fired
    assert index_score(redis_client, "ns", "q") == T0 + delay_s * 1_000
    racing.finish_publish()
    assert index_score(redis_client, "ns", "q") == T0 + delay_s * 1_000
    engine.pump_due(now=T0 + delay_s * 1_000)
    assert len(queue_state(redis_client, "ns", "q")["ready"]) == 2


def test_without_the_recheck_step_that_race_would_lose_the_timer(engine: Engine, redis_client: redis.Redis,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Shows the test above really exercises the race (the recheck is what saves it)."""
    engine.publish("ns", "q", [b"due"], delay_s=1, ttl_s=0, now=T0 - 1_000)
    racing = RacingPublish(Engine(), 60, defer_index_update=True)
    monkeypatch.setattr(engine_module, "script", racing.script)
    monkeypatch.setattr(engine, "_recheck_index", lambda settled: None)

    engine.pump_due(now=T0)

    assert index_score(redis_client, "ns", "q") is None


def test_a_claim_that_outlives_its_pumper_is_taken_again_when_its_lease_ends(engine: Engine,
                                                                             redis_client: redis.Redis) -> None:
    [job_id] = engine.publish("ns", "q", [b"x"], delay_s=1, ttl_s=0, now=T0).job_ids
    claimed = scripts.script("index_claim")(keys=[keys.TIMER_INDEX], client=redis_client,
                                            args=[T0 + 1_000, engine_module.PUMP_LEASE_MS, 10])
    assert claimed == [b"ns/q"]  # ...and that pumper died here

    assert engine.pump_due(now=T0 + 1_000) == (0, False)
    assert engine.pump_due(now=T0 + 1_000 + engine_module.PUMP_LEASE_MS) == (1, False)
    assert queue_state(redis_client, "ns", "q")["ready"] == [job_id]


def test_seconds_until_due_follows_the_earliest_timer(engine: Engine, redis_client: redis.Redis) -> None:
    pumper = pumper_for(engine)
    assert pumper.seconds_until_due() == 1.0
    set_index(redis_client, "ns", "q", now_ms() + 300)
    assert 0.1 < pumper.seconds_until_due() <= 0.3
    set_index(redis_client, "ns", "q", now_ms() - 5_000)
    assert pumper.seconds_until_due() == 0.0


def manage_env(**overrides: str) -> dict[str, str]:
    """This run's environment for a `manage.py` subprocess, on the test database
    (the pumper's scheduler and alert duties read it; `transactional_db` makes it
    exist and cleans what the subprocess writes)."""
    env = env_with(**overrides)
    env.pop("LMSTFY_POOLS", None)
    env["DATABASE_URL"] = database_url_for_subprocesses()
    return env


def test_the_pumper_command_runs_one_pass_with_once(engine: Engine, redis_client: redis.Redis,
                                                    transactional_db) -> None:
    now = now_ms()
    [job_id] = engine.publish("ns", "q", [b"x"], delay_s=1, ttl_s=0, now=now - 5_000).job_ids
    engine.publish("ns", "later", [b"x"], delay_s=3600, ttl_s=0, now=now)

    done = subprocess.run([sys.executable, str(MANAGE_PY), "pumper", "--once"], env=manage_env(),
                          capture_output=True, text=True, timeout=60)

    assert done.returncode == 0, done.stderr
    assert "handled 1 timers" in done.stdout, (done.stdout, done.stderr)
    assert queue_state(redis_client, "ns", "q")["ready"] == [job_id]
    assert queue_state(redis_client, "ns", "later")["ready"] == []


def wait_until(condition, timeout_s: float, process: subprocess.Popen) -> float:
    """Poll `condition` (real time: `process` moves the jobs); return the wait."""
    start = time.monotonic()
    while True:
        try:
            if condition():
                return time.monotonic() - start
        except redis.ConnectionError:
            pass
        assert process.poll() is None, f"the pumper exited with {process.returncode}"
        if time.monotonic() - start > timeout_s:
            raise AssertionError(f"not within {timeout_s}s")
        time.sleep(0.05)


@pytest.mark.slow
def test_the_pumper_command_survives_a_redis_outage_and_resumes(scratch_redis: ScratchRedis,
                                                                transactional_db) -> None:
    engine = Engine(pool="scratch", client=scratch_redis.client())
    process = subprocess.Popen([sys.executable, str(MANAGE_PY), "pumper"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               env=manage_env(REDIS_URL=scratch_redis.url, LMSTFY_PUMP_INTERVAL="0.1"))
    try:
        [before] = engine.publish("ns", "q", [b"before"], delay_s=1, ttl_s=0).job_ids
        # Real time from here: the pumper is a separate process (its start-up included).
        wait_until(lambda: engine.client.zscore(keys.ready("ns", "q"), before) is not None, 60, process)

        scratch_redis.kill()
        time.sleep(1.5)  # the pumper meets the outage and backs off
        assert process.poll() is None
        scratch_redis.start()
        [after] = engine.publish("ns", "q", [b"after"], delay_s=1, ttl_s=0).job_ids
        waited = wait_until(lambda: engine.client.zscore(keys.ready("ns", "q"), after) is not None, 30, process)
        print(f"after the outage, a job due 1 s after its publish was ready after {waited:.2f}s")

        assert engine.client.zrange(keys.ready("ns", "q"), 0, -1) == [before.encode(), after.encode()]
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            _, stderr = process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            _, stderr = process.communicate()
        print(f"pumper stderr:\n{stderr}")
    assert process.returncode == 0, stderr
    assert "Redis unavailable" in stderr
    assert "Traceback" not in stderr

"""Benchmarks 4 and 5, in-process against the bench Redis DB (no HTTP):
pump rate, pumper cost with idle queues, and Redis bytes per delayed job.
Each runs on an empty DB and flushes it afterwards."""
from __future__ import annotations

import statistics
import struct
import threading
import time
from dataclasses import dataclass

import redis

from bench.environment import NAMESPACE, flush_bench_db
from bench.report import Figure
from queues import ulid

DUE_JOBS = 100_000
SEED_BATCH = 1000
JOB_BODY = b"x" * 100
IDLE_QUEUES = 10_000
PASS_REPEATS = 200
CONSTANT_SLACK_S = 0.001  # sub-millisecond passes jitter with the machine's other load
UPSTREAM_BYTES_PER_JOB = 372
TTL_S = 86400

# The baseline of the pump: the least a Lua pump must do, moving members
# ZSET -> ZSET in bounded batches, with no job data at all.
BARE_MOVE = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZADD', KEYS[2], ARGV[1], id)
end
return #ids
"""


@dataclass
class EngineContext:
    engine: object      # queues.engine.Engine on the bench pool
    client: redis.Redis

    def flush(self) -> None:
        flush_bench_db(self.client)


def _now_ms() -> int:
    return int(time.time() * 1000)


def seed_due_jobs(ctx: EngineContext, queues: int, total: int) -> None:
    """`total` delayed jobs over `queues` queues, all already due (published 10 s
    ago with a 1 s delay), through the engine's own publish."""
    per_queue = total // queues
    past = _now_ms() - 10_000
    for index in range(queues):
        left = per_queue
        while left:
            batch = min(SEED_BATCH, left)
            ctx.engine.publish(NAMESPACE, f"pump-{index}", [JOB_BODY] * batch, delay_s=1, now=past)
            left -= batch


def pump_all(engine) -> tuple[int, int]:
    """What Pumper.pump_once does for one pool: pump until nothing more is due.
    Returns (timers handled, pump_due calls)."""
    handled = calls = 0
    more = True
    while more:
        count, more = engine.pump_due(_now_ms())
        handled += count
        calls += 1
    return handled, calls


def bare_move_rate(ctx: EngineContext) -> float:
    ctx.flush()
    source, target = "bench:bare:delayed", "bench:bare:ready"
    past = _now_ms() - 10_000
    pipe = ctx.client.pipeline(transaction=False)
    for _ in range(DUE_JOBS // SEED_BATCH):
        pipe.zadd(source, {ulid.new_job_id(1, now_ms=past): past for _ in range(SEED_BATCH)})
        pipe.execute()
    move = ctx.client.register_script(BARE_MOVE)
    started = time.perf_counter()
    moved = 0
    while True:
        count = move(keys=[source, target], args=[_now_ms(), SEED_BATCH])
        moved += count
        if count == 0:
            break
    elapsed = time.perf_counter() - started
    ctx.flush()
    return moved / elapsed


def pump_rate(ctx: EngineContext, queues: int) -> tuple[float, dict]:
    ctx.flush()
    seed_due_jobs(ctx, queues, DUE_JOBS)
    started = time.perf_counter()
    handled, calls = pump_all(ctx.engine)
    elapsed = time.perf_counter() - started
    ready = sum(ctx.client.zcard(f"lq:{{{NAMESPACE}/pump-{i}}}:ready") for i in range(queues))
    ctx.flush()
    if handled != DUE_JOBS or ready != DUE_JOBS:
        raise RuntimeError(f"pump moved {handled} timers and left {ready} ready jobs; expected {DUE_JOBS}")
    return handled / elapsed, {"seconds": round(elapsed, 4), "pump_due_calls": calls}


def pump(ctx: EngineContext) -> list[Figure]:
    baseline = bare_move_rate(ctx)
    figures = []
    for queues in (1, 100):
        rate, details = pump_rate(ctx, queues)
        figures.append(Figure(f"4a pump 100k due jobs, {queues} queue{'s' if queues > 1 else ''}", "jobs/s",
                              rate, baseline, "bare Lua ZSET->ZSET move", ">= 50,000 jobs/s", rate >= 50_000,
                              f"engine.pump_due in-process until nothing is due; {details['pump_due_calls']} "
                              f"pump_due calls, {details['seconds']} s", details))
    return figures


class CommandCounter:
    """Counts the commands Redis executes in the bench DB (scripts' inner
    commands included) with MONITOR, filtered on the DB: the other teams' test
    suites use other DBs of the same server."""

    END_MARK = "bench-monitor-end"
    # A fresh pooled connection announces itself; that is not the pumper's work.
    CONNECTION_SETUP = {"SELECT", "CLIENT", "HELLO", "AUTH", "PING"}

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.db = client.connection_pool.connection_kwargs.get("db", 0)
        self.commands: list[str] = []
        self._monitor = client.monitor()
        self._monitor.__enter__()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            entry = self._monitor.next_command()
            if int(entry["db"]) != self.db:
                continue
            if self.END_MARK in entry["command"]:
                return
            name = entry["command"].split(" ", 1)[0].strip('"').upper()
            if name not in self.CONNECTION_SETUP:
                self.commands.append(name)

    def stop(self) -> list[str]:
        self.client.echo(self.END_MARK)
        self._thread.join(10)
        self._monitor.__exit__(None, None, None)
        return self.commands


def seed_idle_queues(ctx: EngineContext, queues: int) -> None:
    """One delayed job per queue, due in a day: timers the pumper must not touch."""
    for index in range(queues):
        ctx.engine.publish(NAMESPACE, f"idle-{index}", [JOB_BODY], delay_s=TTL_S - 1)


def one_pass_cost(ctx: EngineContext) -> tuple[float, int, list[str]]:
    """Median seconds of one pumper pass, and the commands one pass runs."""
    for _ in range(PASS_REPEATS // 10):  # warm connections and script cache first
        pump_all(ctx.engine)
    timings = []
    for _ in range(PASS_REPEATS):
        started = time.perf_counter()
        pump_all(ctx.engine)
        timings.append(time.perf_counter() - started)
    counter = CommandCounter(ctx.client)
    pump_all(ctx.engine)
    commands = counter.stop()
    return statistics.median(timings), len(commands), commands


def pump_idle(ctx: EngineContext) -> list[Figure]:
    ctx.flush()
    empty_s, empty_commands, empty_list = one_pass_cost(ctx)
    seed_idle_queues(ctx, IDLE_QUEUES)
    idle_s, idle_commands, idle_list = one_pass_cost(ctx)
    ctx.flush()
    met = idle_commands <= empty_commands and idle_s <= empty_s + CONSTANT_SLACK_S
    details = {"pass_s_idle": idle_s, "pass_s_empty": empty_s, "commands_idle": idle_list,
               "commands_empty": empty_list}
    return [
        Figure(f"4b pumper pass, {IDLE_QUEUES:,} idle queues", "ms/pass", idle_s * 1000, empty_s * 1000,
               "0 idle queues", "~constant (+1 ms, same commands)", met,
               f"median of {PASS_REPEATS} passes; Redis commands per pass: {idle_commands} with "
               f"{IDLE_QUEUES:,} idle queues vs {empty_commands} with none ({', '.join(idle_list)})", details),
    ]


def upstream_member(ns: str, queue: str, tries: int, job_id: str) -> bytes:
    """lmstfy's timer_set member: u16 len + ns, u16 len + queue, u16 tries, u16 len + id (LE)."""
    parts = [struct.pack("<H", len(ns)), ns.encode(), struct.pack("<H", len(queue)), queue.encode(),
             struct.pack("<HH", tries, len(job_id)), job_id.encode()]
    return b"".join(parts)


def _used_memory(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def _memory_usage_by_key(client: redis.Redis) -> dict[str, int]:
    """MEMORY USAGE of each key of the bench DB, the ones holding jobs apart and
    the rest lumped: unlike used_memory, blind to the server's other DBs (but it
    misses the expires table)."""
    sizes: dict[str, int] = {}
    keys = list(client.scan_iter(count=1000))
    pipe = client.pipeline(transaction=False)
    for start in range(0, len(keys), 1000):
        chunk = keys[start:start + 1000]
        for key in chunk:
            pipe.memory_usage(key, samples=0)
        for key, size in zip(chunk, pipe.execute()):
            name = key.decode(errors="replace")
            name = name if len(keys) < 100 else "(many keys)"
            sizes[name] = sizes.get(name, 0) + (size or 0)
    return sizes


def measure_layout(ctx: EngineContext, fill) -> tuple[float, dict[str, float]]:
    """Bytes per job by used_memory delta, and by MEMORY USAGE per key."""
    ctx.flush()
    time.sleep(0.2)
    before = _used_memory(ctx.client)
    fill()
    time.sleep(0.2)
    after = _used_memory(ctx.client)
    by_key = {key: round(size / DUE_JOBS, 1) for key, size in _memory_usage_by_key(ctx.client).items()}
    ctx.flush()
    return (after - before) / DUE_JOBS, by_key


def fill_ours(ctx: EngineContext) -> None:
    for _ in range(0, DUE_JOBS, SEED_BATCH):
        ctx.engine.publish(NAMESPACE, "memory", [JOB_BODY] * SEED_BATCH, delay_s=3600, ttl_s=TTL_S)


def fill_upstream(ctx: EngineContext) -> None:
    """lmstfy's layout for a delayed job: SET j/ns/q/id body EX ttl, ZADD timer_set."""
    due_s = int(time.time()) + 3600
    pipe = ctx.client.pipeline(transaction=False)
    for index in range(DUE_JOBS):
        job_id = ulid.new_job_id(3600)
        pipe.set(f"j/{NAMESPACE}/memory/{job_id}", JOB_BODY, ex=TTL_S)
        pipe.zadd("timer_set", {upstream_member(NAMESPACE, "memory", 1, job_id): due_s})
        if len(pipe) >= 2 * SEED_BATCH:
            pipe.execute()
    pipe.execute()


def memory(ctx: EngineContext) -> list[Figure]:
    # Load our scripts into Redis first: the script cache must not count as job data.
    ctx.engine.publish(NAMESPACE, "warm", [JOB_BODY], delay_s=3600)
    ours, ours_keys = measure_layout(ctx, lambda: fill_ours(ctx))
    upstream, upstream_keys = measure_layout(ctx, lambda: fill_upstream(ctx))
    biggest = ", ".join(f"{key.split(':')[-1]} {size:.0f}" for key, size in
                        sorted(ours_keys.items(), key=lambda item: -item[1])[:3])
    notes = (f"used_memory delta over {DUE_JOBS:,} delayed jobs with {len(JOB_BODY)}-byte bodies in one queue; "
             f"cross-check by MEMORY USAGE (blind to other DBs, misses the expires table): ours "
             f"{sum(ours_keys.values()):.0f} ({biggest}), upstream layout {sum(upstream_keys.values()):.0f}; "
             f"upstream's own figure {UPSTREAM_BYTES_PER_JOB}")
    return [Figure("5 Redis bytes per delayed job", "bytes/job", ours, upstream,
                   "upstream lmstfy layout, same Redis", "<= 300", ours <= 300, notes,
                   {"ours_memory_usage_per_job": ours_keys, "upstream_memory_usage_per_job": upstream_keys})]


BENCHMARKS = {"pump": pump, "pump_idle": pump_idle, "memory": memory}

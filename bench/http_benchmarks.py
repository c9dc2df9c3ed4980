"""Benchmarks 1-3: throughput through HTTP, ours against the framework floor.

Each comparison runs both sides with the same generator, connections and
duration, after a short warm-up, for several rounds in alternating order
(floor first, then ours first, ...), and keeps each side's best round: on a
shared 2-core machine, interference only ever lowers a figure.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from bench.environment import NAMESPACE
from bench.loadgen import Load, Scenario
from bench.report import Figure
from bench.servers import Server

JOB_BODY = json.dumps({"payload": "x" * 85}).encode()  # 100 bytes, a typical small JSON job
assert len(JOB_BODY) == 100
BULK_JOBS = 64
BULK_BODY = b"[" + b",".join([JOB_BODY] * BULK_JOBS) + b"]"
BATCH_COUNT = 64
UPSTREAM_BULK_JOBS_S = 23_000      # lmstfy on 2 cores (the reference figure)
UPSTREAM_BATCH_CONSUME_JOBS_S = 17_700
SEED_BATCH = 1000


@dataclass
class HttpContext:
    ours: Server
    floor: Server
    token: str
    engine: object          # queues.engine.Engine on the bench pool
    generator: object       # loadgen.Wrk or loadgen.PythonLoad
    duration_s: float
    warmup_s: float
    rounds: int
    connections: int


Measure = Callable[[Load], float]


def compare(ctx: HttpContext, ours: Scenario, floor: Scenario, measure: Measure,
            prepare: Callable[[float], None] | None = None) -> tuple[Load, Load]:
    """Best round of each side. `measure` turns a Load into the figure compared;
    `prepare(expected_rate)` runs before each of our rounds (seeding jobs)."""
    sides = {"floor": (ctx.floor, floor), "ours": (ctx.ours, ours)}
    best: dict[str, Load] = {}
    for name, (server, scenario) in sides.items():
        if prepare and name == "ours":
            prepare(0.0)
        ctx.generator.run(server.base_url, scenario, ctx.warmup_s, ctx.connections)
    for round_index in range(ctx.rounds):
        order = ["floor", "ours"] if round_index % 2 == 0 else ["ours", "floor"]
        for name in order:
            server, scenario = sides[name]
            if prepare and name == "ours":
                prepare(measure(best["ours"]) if "ours" in best else 0.0)
            load = _timed_run(ctx, server, scenario)
            if name not in best or measure(load) > measure(best[name]):
                best[name] = load
    return best["ours"], best["floor"]


def _timed_run(ctx: HttpContext, server: Server, scenario: Scenario) -> Load:
    """One measured round; also records CPU per request of the workers and of
    Redis, figures that other load on the machine disturbs far less than req/s."""
    cpu_before, redis_before = server.workers_cpu_s(), _redis_cpu_s(ctx)
    load = ctx.generator.run(server.base_url, scenario, ctx.duration_s, ctx.connections)
    cpu, redis_cpu = server.workers_cpu_s() - cpu_before, _redis_cpu_s(ctx) - redis_before
    load.extra["worker_cpu_ms_per_request"] = round(1000 * cpu / max(1, load.requests), 3)
    load.extra["redis_cpu_ms_per_request"] = round(1000 * redis_cpu / max(1, load.requests), 3)
    load.extra["worker_cpu_share"] = round(cpu / load.duration_s, 2) if load.duration_s else 0
    return load


def _redis_cpu_s(ctx: HttpContext) -> float:
    """Redis server CPU so far: server-wide, so it also counts the other DBs' clients
    (the team's test suites), which stay small beside a benchmark's load."""
    info = ctx.engine.client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _put(path: str, body: bytes, token: str = "") -> Scenario:
    return Scenario("PUT", path, body=body, token=token, content_type="application/json")


def _details(ours: Load, floor: Load) -> dict:
    return {"ours": ours.as_dict(), "baseline": floor.as_dict()}


def _cpu(ours: Load, floor: Load) -> str:
    """CPU per request of each process kind (ours | floor): far steadier than
    req/s while other work shares the machine."""
    parts = []
    for label, key in (("workers", "worker"), ("Redis", "redis"), ("generator", "generator")):
        field = f"{key}_cpu_ms_per_request"
        parts.append(f"{label} {ours.extra[field]:.2f} | {floor.extra[field]:.2f}")
    return (f"CPU ms per request (ours | floor): {', '.join(parts)}; workers used "
            f"{ours.extra['worker_cpu_share']:.2f} | {floor.extra['worker_cpu_share']:.2f} cores.")


def _failures(ours: Load, floor: Load) -> str:
    bad = ours.bad + ours.socket_errors + floor.bad + floor.socket_errors
    return f"{bad} failed requests (ours {ours.bad}+{ours.socket_errors}, floor {floor.bad}+{floor.socket_errors})" \
        if bad else ""


def publish(ctx: HttpContext) -> list[Figure]:
    path = f"/api/{NAMESPACE}/publish"
    ours, floor = compare(ctx, _put(path, JOB_BODY, ctx.token), _put(path, JOB_BODY), lambda load: load.rps)
    ratio = ours.rps / floor.rps if floor.rps else 0.0
    notes = f"p50/p99 latency ours {ours.p50_ms:.1f}/{ours.p99_ms:.1f} ms, floor {floor.p50_ms:.1f}/" \
            f"{floor.p99_ms:.1f} ms at {ctx.connections} connections. {_cpu(ours, floor)} {_failures(ours, floor)}"
    return [Figure("1 publish (1 job/request)", "req/s", ours.rps, floor.rps, "floor app",
                   ">= 0.9x baseline", ratio >= 0.9, notes.strip(), _details(ours, floor))]


def bulk_publish(ctx: HttpContext) -> list[Figure]:
    path = f"/api/{NAMESPACE}/bulk/bulk"
    ours, floor = compare(ctx, _put(path, BULK_BODY, ctx.token), _put(path, BULK_BODY), lambda load: load.rps)
    ours_jobs, floor_jobs = ours.rps * BULK_JOBS, floor.rps * BULK_JOBS
    notes = f"{BULK_JOBS} x {len(JOB_BODY)}-byte jobs per request; upstream lmstfy reference " \
            f"{UPSTREAM_BULK_JOBS_S:,} jobs/s (ours is {ours_jobs / UPSTREAM_BULK_JOBS_S:.2f}x it). " \
            f"{_cpu(ours, floor)} {_failures(ours, floor)}"
    return [Figure("2 bulk publish (64 jobs/request)", "jobs/s", ours_jobs, floor_jobs, "floor app",
                   ">= 46,000 jobs/s", ours_jobs >= 46_000, notes.strip(), _details(ours, floor))]


class Seeder:
    """Keeps enough ready jobs in a queue for the next consume round (published
    in-process through the engine, outside the timed window)."""

    def __init__(self, ctx: HttpContext, queue: str, minimum: int) -> None:
        self.ctx, self.queue, self.minimum = ctx, queue, minimum
        self.consumed_before = 0

    def ready(self) -> int:
        from queues import inspect

        return inspect.ready_size(self.ctx.engine.pool, NAMESPACE, self.queue)

    def __call__(self, expected_jobs_per_s: float) -> None:
        wanted = max(self.minimum, int(expected_jobs_per_s * self.ctx.duration_s * 1.5))
        missing = wanted - self.ready()
        while missing > 0:
            batch = min(SEED_BATCH, missing)
            self.ctx.engine.publish(NAMESPACE, self.queue, [JOB_BODY] * batch)
            missing -= batch


def _consume_path(queue: str, count: int) -> str:
    return f"/api/{NAMESPACE}/{queue}?ttr=300" + (f"&count={count}" if count > 1 else "")


def consume(ctx: HttpContext) -> list[Figure]:
    queue = "consume"
    path = _consume_path(queue, 1)
    seeder = Seeder(ctx, queue, minimum=30_000)
    ours, floor = compare(ctx, Scenario("GET", path, token=ctx.token), Scenario("GET", path),
                          lambda load: load.rps, prepare=seeder)
    notes = f"each request leases one job (ttr 300 s). {_cpu(ours, floor)} {_failures(ours, floor)}"
    return [Figure("3a consume (count 1)", "jobs/s", ours.rps, floor.rps, "floor app", "-", None,
                   notes.strip(), _details(ours, floor))]


def batch_consume(ctx: HttpContext) -> list[Figure]:
    """Jobs per request are counted from the answers' sizes: our queue is kept
    deep enough that every answer is a full batch (checked: a short answer would
    still be a 200 but the seeder's queue would have run dry)."""
    queue = "batch"
    path = _consume_path(queue, BATCH_COUNT)
    seeder = Seeder(ctx, queue, minimum=150_000)
    ours, floor = compare(ctx, Scenario("GET", path, token=ctx.token), Scenario("GET", path),
                          lambda load: load.rps * BATCH_COUNT, prepare=seeder)
    left = seeder.ready()
    ours_jobs, floor_jobs = ours.rps * BATCH_COUNT, floor.rps * BATCH_COUNT
    notes = f"{BATCH_COUNT} jobs per request ({left:,} still ready after the last round, so every batch " \
            f"was full); upstream lmstfy reference {UPSTREAM_BATCH_CONSUME_JOBS_S:,} jobs/s (ours is " \
            f"{ours_jobs / UPSTREAM_BATCH_CONSUME_JOBS_S:.2f}x it). {_cpu(ours, floor)} {_failures(ours, floor)}"
    return [Figure("3b batch consume (count 64)", "jobs/s", ours_jobs, floor_jobs, "floor app",
                   ">= 35,000 jobs/s", ours_jobs >= 35_000, notes.strip(), _details(ours, floor))]


def consume_ack(ctx: HttpContext) -> list[Figure]:
    queue = "consume_ack"
    path = _consume_path(queue, 1)
    prefix = f"/api/{NAMESPACE}/{queue}"
    seeder = Seeder(ctx, queue, minimum=20_000)
    ours, floor = compare(ctx, Scenario("GET", path, token=ctx.token, consume_ack=True, ack_prefix=prefix),
                          Scenario("GET", path, consume_ack=True, ack_prefix=prefix),
                          lambda load: load.acks_per_s, prepare=seeder)
    notes = f"a job is consumed, then acked: 2 requests per job. {_cpu(ours, floor)} {_failures(ours, floor)}"
    return [Figure("3c consume + ack loop", "jobs/s", ours.acks_per_s, floor.acks_per_s, "floor app", "-", None,
                   notes.strip(), _details(ours, floor))]


BENCHMARKS = {"publish": publish, "bulk": bulk_publish, "consume": consume, "batch_consume": batch_consume,
              "consume_ack": consume_ack}

"""Reproducible benchmarks: `make bench` (extra arguments via BENCH_ARGS).

Every figure is printed beside a baseline measured in the same run, with the
ratio and the target (see docs/benchmarks.md). Phases:
1. in-process engine benchmarks (pump, idle pumper, memory) on an empty bench DB;
2. HTTP benchmarks against `manage.py runall` (ours) and bench/floor_site (the
   framework floor), both started here on free ports and stopped at the end,
   whatever happens.

Examples:
    python bench/run.py                           # everything (a few minutes)
    python bench/run.py --only publish,memory     # two benchmarks
    python bench/run.py --only 3 --json out.json  # benchmark 3 (a, b and c)
"""
from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import environment, report, servers  # noqa: E402
from bench.loadgen import pick_generator  # noqa: E402

ENGINE_BENCHMARKS = ("pump", "pump_idle", "memory")
HTTP_BENCHMARKS = ("publish", "bulk", "consume", "batch_consume", "consume_ack", "latency", "lateness")
ALL = ENGINE_BENCHMARKS + HTTP_BENCHMARKS
# The numbering, accepted by --only.
BY_NUMBER = {"1": ("publish",), "2": ("bulk",), "3": ("consume", "batch_consume", "consume_ack"),
             "4": ("pump", "pump_idle"), "5": ("memory",), "6": ("latency", "lateness")}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help=f"comma-separated: 1-6 or names {', '.join(ALL)}")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per measured round, whole with wrk (default 5)")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds of warm-up per side, whole with wrk (default 1)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per side, best kept (default 2)")
    parser.add_argument("--connections", type=int, default=16, help="concurrent connections (default 16)")
    parser.add_argument("--samples", type=int, default=500, help="latency samples (default 500)")
    parser.add_argument("--generator", choices=("auto", "wrk", "python"), default="auto",
                        help="load generator: wrk when installed (auto), or the Python one")
    return parser.parse_args(argv)


def selected(only: str) -> list[str]:
    if not only:
        return list(ALL)
    names: list[str] = []
    for item in (part.strip() for part in only.split(",") if part.strip()):
        expanded = BY_NUMBER.get(item, (item,))
        for name in expanded:
            if name not in ALL:
                raise SystemExit(f"unknown benchmark {name!r}; choose from 1-6 or {', '.join(ALL)}")
            names.append(name)
    return [name for name in ALL if name in names]


def run_engine_benchmarks(run: Run, names: list[str]) -> list[report.Figure]:
    from bench import engine_benchmarks

    ctx = engine_benchmarks.EngineContext(engine=run.engine, client=run.client)
    figures = []
    for name in names:
        progress(f"running {name}")
        figures += engine_benchmarks.BENCHMARKS[name](ctx)
    return figures


def run_http_benchmarks(run: Run, names: list[str]) -> list[report.Figure]:
    """Start both servers, run the benchmarks, stop the servers whatever happens."""
    from bench import http_benchmarks, latency

    args = run.args
    ours_port = servers.free_port()
    floor_port = servers.free_port(ours_port + 1)
    with ExitStack() as stack:
        progress(f"starting the real stack (manage.py runall) on :{ours_port}")
        ours = servers.start_real_stack(run.env, ours_port, run.log_dir)
        stack.callback(ours.stop)
        progress(f"starting the floor app on :{floor_port}")
        floor = servers.start_floor(environment.floor_env(floor_port), floor_port, run.log_dir)
        stack.callback(floor.stop)
        ctx = http_benchmarks.HttpContext(ours=ours, floor=floor, token=run.token, engine=run.engine,
                                          generator=run.generator, duration_s=args.duration, warmup_s=args.warmup,
                                          rounds=args.rounds, connections=args.connections)
        figures = []
        for name in names:
            progress(f"running {name}")
            if name == "latency":
                figures += latency.wake_latency(ours, run.token, run.engine, run.client, args.samples)
            elif name == "lateness":
                figures += latency.firing_lateness(ours, run.token, args.samples)
            else:
                figures += http_benchmarks.BENCHMARKS[name](ctx)
            environment.flush_bench_db(run.client)
        return figures


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def stop_on_signals() -> None:
    """SIGTERM/SIGHUP become SystemExit, so every `finally` (server stops) runs."""
    def leave(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, leave)
    signal.signal(signal.SIGHUP, leave)


@dataclass
class Run:
    """What every benchmark of one run shares."""
    args: argparse.Namespace
    names: list[str]
    env: dict[str, str]
    log_dir: Path
    client: object = None     # redis.Redis on the bench DB
    engine: object = None     # queues.engine.Engine on the bench pool
    token: str = ""
    generator: object = None  # loadgen.Wrk or loadgen.PythonLoad
    machine: object = None    # environment.Machine, sampled before the first benchmark
    busy_after: list[str] = field(default_factory=list)


def prepare(run: Run) -> None:
    """Fresh database with migrations, the real site loaded in-process, an empty
    bench DB, a token minted through the database, and the machine described."""
    environment.fresh_database()
    environment.setup_django(run.env)
    environment.migrate()
    from queues import pools
    from queues.engine import Engine

    run.client = pools.client()
    environment.flush_bench_db(run.client)
    run.engine = Engine()
    run.token = environment.mint_token()
    run.generator = pick_generator(run.args.generator)
    progress("sampling what else runs on the machine")
    run.machine = environment.describe_machine(run.client)


def run_benchmarks(run: Run) -> list[report.Figure]:
    figures = run_engine_benchmarks(run, [n for n in run.names if n in ENGINE_BENCHMARKS])
    http_names = [n for n in run.names if n in HTTP_BENCHMARKS]
    if http_names:
        progress(f"load generator: {run.generator.name}")
        figures += run_http_benchmarks(run, http_names)
    run.busy_after = environment.busy_processes()
    return figures


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    stop_on_signals()
    log_dir = Path(tempfile.mkdtemp(prefix="lmstfy-bench-"))
    run = Run(args=args, names=selected(args.only), env=environment.service_env(log_dir), log_dir=log_dir)
    try:
        prepare(run)
        figures = run_benchmarks(run)
    except BaseException:
        progress(f"failed; the servers' logs are kept in {log_dir}")
        raise
    else:
        shutil.rmtree(log_dir, ignore_errors=True)
    finally:
        if run.client is not None:
            environment.flush_bench_db(run.client)
    print_report(figures, run)
    if args.json:
        report.save_json(args.json, figures, run_info(run, argv))
    return 0


def run_info(run: Run, argv: list[str]) -> dict:
    from django.conf import settings

    args = run.args
    return {"command": "python bench/run.py " + " ".join(argv), "machine": run.machine.as_dict(),
            "busy_after": run.busy_after, "load_average_after": environment.load_average(),
            "generator": run.generator.name,
            "gunicorn": {"workers": settings.LMSTFY_WORKERS, "threads": settings.LMSTFY_THREADS},
            "duration_s": args.duration, "rounds": args.rounds, "connections": args.connections,
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}


def print_report(figures: list[report.Figure], run: Run) -> None:
    from django.conf import settings

    machine, args = run.machine, run.args
    print(f"machine: {machine.nproc} cores, {machine.cpu_model}; Redis {machine.redis_version}; "
          f"Python {machine.python}")
    print(f"load average at start {machine.load_average}, at end {environment.load_average()}")
    print(f"other CPU users at start: {'; '.join(machine.busy_processes) or 'none'}")
    print(f"other CPU users at end:   {'; '.join(run.busy_after) or 'none'}")
    if any(name in HTTP_BENCHMARKS for name in run.names):
        print(f"load generator: {run.generator.name}, {args.connections} connections, {args.rounds} x "
              f"{args.duration:g} s rounds (best kept); gunicorn gthread {settings.LMSTFY_WORKERS} workers x "
              f"{settings.LMSTFY_THREADS} threads for both sides")
    print()
    print(report.table(figures))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

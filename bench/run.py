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
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per measured round (default 5)")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds of warm-up per side (default 1)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per side, best kept (default 2)")
    parser.add_argument("--connections", type=int, default=16, help="concurrent connections (default 16)")
    parser.add_argument("--samples", type=int, default=500, help="latency samples (default 500)")
    parser.add_argument("--generator", choices=("auto", "wrk", "python"), default="auto",
                        help="load generator: wrk when installed (auto), or the Python one")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="record our workers with py-spy during the first round of each HTTP benchmark")
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


def run_engine_benchmarks(names: list[str], engine, client) -> list[report.Figure]:
    from bench import engine_benchmarks

    ctx = engine_benchmarks.EngineContext(engine=engine, client=client)
    figures = []
    for name in names:
        progress(f"running {name}")
        figures += engine_benchmarks.BENCHMARKS[name](ctx)
    return figures


def run_http_benchmarks(names: list[str], args, env, token, engine, client, generator,
                        log_dir: Path) -> list[report.Figure]:
    from bench import http_benchmarks, latency

    ours_port = servers.free_port()
    floor_port = servers.free_port(ours_port + 1)
    with ExitStack() as stack:
        progress(f"starting the real stack (manage.py runall) on :{ours_port}")
        ours = servers.start_real_stack(env, ours_port, log_dir)
        stack.callback(ours.stop)
        progress(f"starting the floor app on :{floor_port}")
        floor = servers.start_floor(environment.floor_env(floor_port), floor_port, log_dir)
        stack.callback(floor.stop)
        ctx = http_benchmarks.HttpContext(ours=ours, floor=floor, token=token, engine=engine, generator=generator,
                                          duration_s=args.duration, warmup_s=args.warmup, rounds=args.rounds,
                                          connections=args.connections, profiler=profiler(args))
        figures = []
        for name in names:
            progress(f"running {name}")
            ctx.label = name
            if name == "latency":
                figures += latency.wake_latency(ours, token, engine, client, args.samples)
            elif name == "lateness":
                figures += latency.firing_lateness(ours, token, args.samples)
            else:
                figures += http_benchmarks.BENCHMARKS[name](ctx)
            flush_bench_db(client)
        return figures


def profiler(args):
    if args.profile is None:
        return None
    from bench.profiling import Profiler

    return Profiler(args.profile)


def flush_bench_db(client) -> None:
    db = client.connection_pool.connection_kwargs.get("db", 0)
    if db != environment.redis_db():
        raise RuntimeError(f"refusing to flush Redis DB {db}")
    client.flushdb()


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def stop_on_signals() -> None:
    """SIGTERM/SIGHUP become SystemExit, so every `finally` (server stops) runs."""
    def leave(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, leave)
    signal.signal(signal.SIGHUP, leave)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    names = selected(args.only)
    stop_on_signals()
    var_dir = Path(tempfile.mkdtemp(prefix="lmstfy-bench-"))
    try:
        env = environment.service_env(var_dir)
        environment.fresh_database()
        environment.setup_django(env)
        environment.migrate()
        from queues import pools
        from queues.engine import Engine

        client = pools.client()
        flush_bench_db(client)
        engine = Engine()
        token = environment.mint_token()
        generator = pick_generator(args.generator)
        progress("sampling what else runs on the machine")
        machine = environment.describe_machine(client)
        figures = run_engine_benchmarks([n for n in names if n in ENGINE_BENCHMARKS], engine, client)
        http_names = [n for n in names if n in HTTP_BENCHMARKS]
        if http_names:
            progress(f"load generator: {generator.name}")
            figures += run_http_benchmarks(http_names, args, env, token, engine, client, generator, var_dir)
        busy_after = environment.busy_processes()
        flush_bench_db(client)
    finally:
        shutil.rmtree(var_dir, ignore_errors=True)
    print_report(figures, machine, busy_after, generator.name, args)
    if args.json:
        report.save_json(args.json, figures, run_info(machine, busy_after, generator.name, args, argv))
    return 0


def run_info(machine, busy_after, generator: str, args, argv: list[str]) -> dict:
    from django.conf import settings

    return {"command": "python bench/run.py " + " ".join(argv), "machine": machine.as_dict(),
            "busy_after": busy_after, "generator": generator,
            "gunicorn": {"workers": settings.LMSTFY_WORKERS, "threads": settings.LMSTFY_THREADS},
            "duration_s": args.duration, "rounds": args.rounds, "connections": args.connections,
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}


def print_report(figures, machine, busy_after, generator: str, args) -> None:
    from django.conf import settings

    print(f"machine: {machine.nproc} cores, {machine.cpu_model}; Redis {machine.redis_version}; "
          f"Python {machine.python}; load average {machine.load_average}")
    print(f"other CPU users at start: {'; '.join(machine.busy_processes) or 'none'}")
    print(f"other CPU users at end:   {'; '.join(busy_after) or 'none'}")
    print(f"load generator: {generator}, {args.connections} connections, {args.rounds} x {args.duration:g} s "
          f"rounds (best kept); gunicorn gthread {settings.LMSTFY_WORKERS} workers x "
          f"{settings.LMSTFY_THREADS} threads for both sides\n")
    print(report.table(figures))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

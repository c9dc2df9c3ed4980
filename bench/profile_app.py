"""Where a request's CPU goes inside the WSGI application, without gunicorn.

Calls the real site's WSGI application in-process (same settings as the
service, bench DB and database) for one request shape of bench/run.py, and
prints: CPU per request (process time, so the machine's other load barely
matters), the floor app's CPU per request for the same request (measured in a
child process, since it has its own settings), the split by layer (Django +
middleware, DRF, our view, engine, redis-py) and the costliest functions.

    python -m bench.profile_app publish        # or bulk, consume, batch_consume, ack
    python -m bench.profile_app bulk --requests 1000 --top 40

Under gunicorn each request costs about 0.6-0.8 ms more on both sides
(gthread's event loop, thread hand-off, access log): see docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import environment  # noqa: E402
from bench.http_benchmarks import BATCH_COUNT, BULK_BODY, JOB_BODY  # noqa: E402

NAMESPACE = environment.NAMESPACE
# name -> (method, path, query, body): the requests bench/run.py sends.
REQUESTS = {
    "publish": ("PUT", f"/api/{NAMESPACE}/publish", "", JOB_BODY),
    "bulk": ("PUT", f"/api/{NAMESPACE}/bulk/bulk", "", BULK_BODY),
    "consume": ("GET", f"/api/{NAMESPACE}/consume", "ttr=300", b""),
    "batch_consume": ("GET", f"/api/{NAMESPACE}/batch", f"ttr=300&count={BATCH_COUNT}", b""),
    "ack": ("DELETE", f"/api/{NAMESPACE}/ack/job/01J00000000000000000000000", "", b""),
}
JOBS_PER_REQUEST = {"consume": 1, "batch_consume": BATCH_COUNT}
WARMUP = 200
# Cumulative time of the first frame matching each marker (cProfile keys are
# file:line:function); a layer's own time is its total minus the next layer's.
LAYER_MARKERS = (
    ("Django handler + middleware", "django/core/handlers/wsgi.py", "__call__"),
    ("DRF APIView machinery", "rest_framework/views.py", "dispatch"),
    ("our view code (queues/api)", "queues/api/views.py", None),
    ("engine, Python side", "queues/engine.py", None),
    ("redis-py client", "redis/client.py", "execute_command"),
)


def wsgi_call(app, method: str, path: str, query: str, body: bytes, token: str) -> str:
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query, "SERVER_NAME": "127.0.0.1",
               "SERVER_PORT": "80", "HTTP_HOST": "127.0.0.1", "SERVER_PROTOCOL": "HTTP/1.1",
               "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(body), "wsgi.errors": sys.stderr,
               "CONTENT_LENGTH": str(len(body)), "CONTENT_TYPE": "application/json", "HTTP_X_TOKEN": token}
    status = []
    b"".join(app(environ, lambda code, headers, exc_info=None: status.append(code)))
    return status[0]


def cpu_ms_per_request(call, requests: int) -> float:
    started = time.process_time()
    for _ in range(requests):
        call()
    return 1000 * (time.process_time() - started) / requests


def seed_for(name: str, requests: int) -> None:
    """Enough ready jobs that every consume of warm-up, timing and profile gets full batches."""
    from queues.engine import Engine

    per_request = JOBS_PER_REQUEST.get(name, 0)
    queue = REQUESTS[name][1].rsplit("/", 1)[1]
    jobs = per_request * (WARMUP + 2 * requests + 1)
    engine = Engine()
    for start in range(0, jobs, 1000):
        engine.publish(NAMESPACE, queue, [JOB_BODY] * min(1000, jobs - start))


def layers(stats: pstats.Stats) -> list[tuple[str, float]]:
    """Own CPU share of each layer, from the cumulative times of its entry points."""
    totals = []
    for label, file_part, function in LAYER_MARKERS:
        matches = [cumulative for (file, _, func), (_, _, _, cumulative, _) in stats.stats.items()
                   if file_part in file and (function is None or func == function)]
        totals.append((label, max(matches, default=0.0)))
    whole = totals[0][1] or 1.0
    return [(label, (total - (totals[i + 1][1] if i + 1 < len(totals) else 0.0)) / whole)
            for i, (label, total) in enumerate(totals)]


def profile_ours(name: str, requests: int, top: int) -> dict:
    var_dir = Path(tempfile.mkdtemp(prefix="lmstfy-profile-"))
    (var_dir / "static").mkdir()  # WhiteNoise warns about a missing STATIC_ROOT otherwise
    environment.fresh_database()
    environment.setup_django(environment.service_env(var_dir))
    environment.migrate()
    from django.core.wsgi import get_wsgi_application

    from queues import pools

    client = pools.client()
    environment.flush_bench_db(client)
    try:
        token = environment.mint_token()
        seed_for(name, requests)
        app = get_wsgi_application()
        method, path, query, body = REQUESTS[name]
        call = lambda: wsgi_call(app, method, path, query, body, token)  # noqa: E731
        first = call()
        for _ in range(WARMUP):
            call()
        cpu_ms = cpu_ms_per_request(call, requests)
        profiler = cProfile.Profile(time.process_time)
        profiler.runcall(lambda: [call() for _ in range(requests)])
    finally:
        environment.flush_bench_db(client)
    stats = pstats.Stats(profiler)
    text = io.StringIO()
    stats.stream = text
    stats.sort_stats(os.environ.get("PROFILE_SORT", "tottime")).print_stats(top)
    return {"status": first, "cpu_ms": cpu_ms, "layers": layers(stats), "top": text.getvalue()}


def floor_cpu_ms(name: str, requests: int) -> float:
    """The floor app's CPU per request, in a child process (its own Django settings)."""
    out = subprocess.run([sys.executable, "-m", "bench.profile_app", name, "--floor", "--requests", str(requests)],
                         cwd=environment.REPO_DIR, capture_output=True, text=True, timeout=300,
                         env=environment.floor_env(0))
    if out.returncode:
        raise RuntimeError(f"floor measurement failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout)["cpu_ms"]


def measure_floor(name: str, requests: int) -> None:
    from bench.floor_site.wsgi import application

    method, path, query, body = REQUESTS[name]
    call = lambda: wsgi_call(application, method, path, query, body, "")  # noqa: E731
    for _ in range(WARMUP):
        call()
    print(json.dumps({"cpu_ms": min(cpu_ms_per_request(call, requests) for _ in range(3))}))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("request", choices=sorted(REQUESTS))
    parser.add_argument("--requests", type=int, default=2000, help="requests timed and profiled (default 2000)")
    parser.add_argument("--top", type=int, default=25, help="functions listed (default 25)")
    parser.add_argument("--floor", action="store_true", help=argparse.SUPPRESS)  # the child of floor_cpu_ms
    args = parser.parse_args(argv)
    if args.floor:
        measure_floor(args.request, args.requests)
        return 0
    floor = floor_cpu_ms(args.request, args.requests)
    ours = profile_ours(args.request, args.requests, args.top)
    print(f"{args.request}: first answer {ours['status']}; CPU per request in-process: ours {ours['cpu_ms']:.3f} ms, "
          f"floor {floor:.3f} ms ({ours['cpu_ms'] / floor:.1f}x)\n")
    print("own CPU share by layer (cProfile, process time):")
    for label, share in ours["layers"]:
        print(f"  {100 * share:5.1f}%  {label}")
    print("\n" + ours["top"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The /metrics exporter with 10 000 queues: memory of the serving process and
scrape time, beside two baselines measured in the same run.

    BENCH_REDIS_URL=redis://127.0.0.1:6379/9 python bench/metrics_bench.py [--queues 10000] [--scrapes 10]

Scenarios (each in a fresh process, so their memory figures do not mix):
1. "collector, 0 queues": our gunicorn worker (runall's worker class, --config,
   multiprocess mode) scraping an empty bench DB: the fixed cost of a scrape.
2. "collector, N queues": the same after seeding N registered queues (one
   pipeline; 100 namespaces; every meta hash with its cumulative totals).
3. "bare registry": a plain prometheus-client registry holding the same number
   of per-queue samples as ordinary labelled Gauges and rendering them with
   generate_latest(): what an exporter that keeps its series in process memory
   (as upstream lmstfy's does) costs for the same page.

Memory is read from /proc/<pid>/status: RSS before the first scrape, RSS after
the last, and the peak (VmHWM, reset through clear_refs before the first scrape).
The bench Redis DB is flushed before and after (bench/environment.py).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import environment, servers  # noqa: E402

NAMESPACES = 100
PER_QUEUE_FAMILIES = 12  # queues/metrics.py: 5 gauges + 7 counters per queue
READ_SECONDS = re.compile(rb"^lmstfy_exporter_redis_read_seconds ([0-9.e+-]+)$", re.M)


@dataclass
class Figures:
    scenario: str
    samples: int
    body_bytes: int
    rss_before_kb: int
    rss_after_kb: int
    peak_kb: int
    scrape_s: list[float]
    redis_read_s: list[float]

    @property
    def rss_delta_mb(self) -> float:
        return (self.rss_after_kb - self.rss_before_kb) / 1024

    @property
    def peak_delta_mb(self) -> float:
        return (self.peak_kb - self.rss_before_kb) / 1024


# -- /proc memory -----------------------------------------------------------------------------
def memory_kb(pid: int) -> dict[str, int]:
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(rest.split()[0])
    return found


def reset_peak(pid: int) -> None:
    """Make VmHWM start again from the current RSS (Linux >= 4.0), so the peak
    measured is the scrape's, not start-up's."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


# -- seeding ----------------------------------------------------------------------------------
def seed(client, queues: int) -> None:
    """N registered queues, one ready job each, meta hashes as the scripts leave them."""
    from queues import inspect, keys

    now = int(time.time() * 1000)
    pipe = client.pipeline(transaction=False)
    for i in range(queues):
        ns, q = f"namespace-{i % NAMESPACES:03d}", f"queue-{i:05d}"
        pipe.sadd(keys.QUEUE_REGISTRY, keys.queue_member(ns, q))
        pipe.zadd(keys.ready(ns, q), {f"job{i}": i})
        pipe.hset(keys.meta(ns, q), mapping={"seq": 1, "created_ms": now,
                                             **{field: i + n for n, field in enumerate(inspect.TOTAL_FIELDS)}})
        if len(pipe) >= 3000:
            pipe.execute()
    pipe.execute()


# -- scenario: our gunicorn worker ------------------------------------------------------------
PORTS = range(17500, 18000)  # apart from bench/run.py's 18000-18999, so both can run at once


def server_env(var_dir: Path, token: str) -> dict[str, str]:
    env = environment.service_env(var_dir)
    env.pop("DATABASE_URL", None)  # /metrics with a bearer token never touches the database
    env.update({"LMSTFY_METRICS_TOKEN": token, "PROMETHEUS_MULTIPROC_DIR": str(var_dir / "prometheus")})
    (var_dir / "prometheus").mkdir(parents=True, exist_ok=True)
    return env


def gunicorn_argv(port: int) -> list[str]:
    """runall's gunicorn command line (worker class, --config, timeouts), with one worker."""
    from queues.management.commands.runall import Command

    argv = Command()._commands()[0]
    argv = argv[:argv.index("--bind")] if "--bind" in argv else argv
    argv[argv.index("--workers") + 1] = "1"
    return argv + ["--bind", f"127.0.0.1:{port}"]


def scrape_once(port: int, token: str) -> tuple[float, bytes]:
    import requests

    started = time.perf_counter()
    response = requests.get(f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {token}"},
                            timeout=120)
    took = time.perf_counter() - started
    response.raise_for_status()
    return took, response.content


def measure_server(scenario: str, scrapes: int, log_dir: Path) -> Figures:
    import requests

    token = secrets.token_urlsafe(24)
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as var_dir:
        port = servers.free_port(PORTS.start, PORTS)
        server = servers.start(scenario.split(",")[0].replace(" ", "-"), gunicorn_argv(port),
                               server_env(Path(var_dir), token), port, log_dir)
        try:
            server.wait_ready("/version")
            for _ in range(3):
                requests.get(f"http://127.0.0.1:{port}/version", timeout=10)  # warm: imports, first request
            [worker] = server.worker_pids()
            before = memory_kb(worker)["VmRSS"]
            reset_peak(worker)
            timings, reads, body = [], [], b""
            for _ in range(scrapes):
                took, body = scrape_once(port, token)
                timings.append(took)
                reads.append(float(READ_SECONDS.search(body).group(1)))
            after = memory_kb(worker)
        finally:
            server.stop()
    samples = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    return Figures(scenario, samples, len(body), before, after["VmRSS"], after["VmHWM"], timings, reads)


# -- scenario: a bare prometheus-client registry (run in a child process) ----------------------
def bare_registry_child(queues: int, scrapes: int) -> None:
    """Print, as JSON, the figures of a registry of labelled Gauges holding
    PER_QUEUE_FAMILIES samples per queue, rendered `scrapes` times."""
    from prometheus_client import CollectorRegistry, Gauge, generate_latest

    pid = os.getpid()
    registry = CollectorRegistry(auto_describe=False)
    before = memory_kb(pid)["VmRSS"]
    reset_peak(pid)
    gauges = [Gauge(f"bare_family_{n}", "A per-queue gauge.", ["pool", "namespace", "queue"], registry=registry)
              for n in range(PER_QUEUE_FAMILIES)]
    for i in range(queues):
        labels = ("default", f"namespace-{i % NAMESPACES:03d}", f"queue-{i:05d}")
        for gauge in gauges:
            gauge.labels(*labels).set(i)
    timings, body = [], b""
    for _ in range(scrapes):
        started = time.perf_counter()
        body = generate_latest(registry)
        timings.append(time.perf_counter() - started)
    after = memory_kb(pid)
    samples = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    print(json.dumps({"samples": samples, "body_bytes": len(body), "rss_before_kb": before,
                      "rss_after_kb": after["VmRSS"], "peak_kb": after["VmHWM"], "scrape_s": timings}))


def measure_bare_registry(queues: int, scrapes: int) -> Figures:
    child = subprocess.run([sys.executable, __file__, "--bare-registry-child", str(queues), "--scrapes", str(scrapes)],
                           capture_output=True, text=True, check=True, timeout=600)
    data = json.loads(child.stdout)
    return Figures(f"bare registry, {queues} queues", redis_read_s=[], **data)


# -- report -------------------------------------------------------------------------------------
def report(rows: list[Figures]) -> None:
    print(f"{'scenario':34} {'samples':>8} {'body MB':>8} {'RSS before':>11} {'RSS delta':>10} "
          f"{'peak delta':>11} {'scrape median':>14} {'max':>8} {'Redis read':>11}")
    for row in rows:
        read = f"{statistics.median(row.redis_read_s) * 1000:8.0f} ms" if row.redis_read_s else f"{'-':>11}"
        print(f"{row.scenario:34} {row.samples:8d} {row.body_bytes / 1e6:8.1f} {row.rss_before_kb / 1024:8.1f} MB "
              f"{row.rss_delta_mb:+7.1f} MB {row.peak_delta_mb:+8.1f} MB "
              f"{statistics.median(row.scrape_s) * 1000:11.0f} ms {max(row.scrape_s) * 1000:5.0f} ms {read}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queues", type=int, default=10_000)
    parser.add_argument("--scrapes", type=int, default=10)
    parser.add_argument("--bare-registry-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare_registry_child is not None:
        bare_registry_child(args.bare_registry_child, args.scrapes)
        return 0

    with tempfile.TemporaryDirectory(prefix="bench-metrics-logs-") as log_dir:
        environment.setup_django(environment.service_env(Path(log_dir)))
        from queues import pools

        client = pools.client()
        environment.flush_bench_db(client)
        try:
            rows = [measure_server("collector, 0 queues", args.scrapes, Path(log_dir))]
            seed(client, args.queues)
            rows.append(measure_server(f"collector, {args.queues} queues", args.scrapes, Path(log_dir)))
            rows.append(measure_bare_registry(args.queues, args.scrapes))
        finally:
            environment.flush_bench_db(client)
    print(f"/metrics, {args.scrapes} scrapes per scenario, one gunicorn gthread worker; python "
          f"{sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {environment.load_average()}")
    report(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

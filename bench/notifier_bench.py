"""Push-delivery benchmark: deliveries/s from ONE `manage.py notifier` process
to a fast local HTTP sink, beside a bare baseline measured in the same run,
plus end-to-end latency publish -> callback for a ready job.

- sink: a minimal asyncio HTTP/1.1 server (keep-alive) in its own process; it
  answers 200 with an empty body, counts requests and notes arrival times;
- ours: N jobs published into a paused queue with a topic pointing at the sink;
  the notifier is started, the queue resumed, and the sink's first..last
  arrival gives the rate (each delivery also leases, acks and logs its attempt);
- baseline: a separate process with a ThreadPoolExecutor of the same
  concurrency, one requests.Session per thread (configured like delivery.py's:
  trust_env off, no redirects), POSTing the same bodies to the same sink: the
  floor for "Python threads + requests" on this machine;
- latency: with the notifier idle, one job published (engine.publish, in this
  process) at a time; latency = the sink's arrival time - the publish time.

Redis DB 7 (flushed: it is the benchmark's own) and the PostgreSQL database
`bench_notifier` (recreated) by default; see --help.

    python bench/notifier_bench.py                    # 20 000 jobs, 2 rounds a side, 300 latency samples
    python bench/notifier_bench.py --jobs 5000 --rounds 1 --profile /tmp/notifier-prof
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REPO_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_DIR))

REDIS_URL = os.environ.get("NOTIFIER_BENCH_REDIS_URL", "redis://127.0.0.1:6379/7")
DATABASE_URL = os.environ.get("NOTIFIER_BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/bench_notifier")
NAMESPACE, QUEUE = "bench", "push"
TARGET_RATIO = 0.8
TARGET_RATE = 2000.0


# -- the sink (its own process) ----------------------------------------------------------------
class _SinkProtocol(asyncio.Protocol):
    OK = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"

    def __init__(self, stats: dict) -> None:
        self.stats = stats
        self.buffer = b""

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].lower()
            length = 0
            at = head.find(b"\r\ncontent-length:")
            if at >= 0:
                stop = head.find(b"\r\n", at + 2)
                length = int(head[at + 17:stop if stop > 0 else len(head)])
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length:]
            self.transport.write(self._answer(head))

    def _answer(self, head: bytes) -> bytes:
        if head.startswith(b"get /__stats"):
            body = json.dumps({k: v for k, v in self.stats.items()
                               if k != "arrivals" or b"arrivals" in head.split(b"\r\n", 1)[0]}).encode()
            return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
                len(body), body)
        if head.startswith(b"post /__reset"):
            self.stats.update(count=0, first=None, last=None, arrivals={})
            return self.OK
        now = time.time()
        self.stats["count"] += 1
        self.stats["first"] = self.stats["first"] or now
        self.stats["last"] = now
        at = head.find(b"\r\nx-lmstfy-job-id:")
        if at >= 0 and self.stats["record_arrivals"]:
            end = head.find(b"\r\n", at + 2)
            job_id = head[at + 18:end if end > 0 else None].strip().decode().upper()
            self.stats["arrivals"][job_id] = now
        return self.OK


def run_sink(record_arrivals: bool) -> None:
    stats = {"count": 0, "first": None, "last": None, "arrivals": {}, "record_arrivals": record_arrivals}

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(lambda: _SinkProtocol(stats), "127.0.0.1", 0,
                                                                backlog=1024)
        print(server.sockets[0].getsockname()[1], flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


class Sink:
    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, __file__, "--sink"], stdout=subprocess.PIPE)
        self.port = int(self.process.stdout.readline())
        self.url = f"http://127.0.0.1:{self.port}/hook"

    def _call(self, method: str, path: str) -> dict:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method,
                                         data=b"" if method == "POST" else None)
        with urllib.request.urlopen(request, timeout=10) as answer:
            body = answer.read()
        return json.loads(body) if body else {}

    def reset(self) -> None:
        self._call("POST", "/__reset")

    def stats(self, arrivals: bool = False) -> dict:
        return self._call("GET", "/__stats?arrivals=1" if arrivals else "/__stats")

    def wait_for(self, count: int, timeout_s: float) -> dict:
        deadline = time.monotonic() + timeout_s
        while True:
            stats = self.stats()
            if stats["count"] >= count or time.monotonic() > deadline:
                return stats
            time.sleep(0.05)

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(10)


# -- the baseline (its own process) --------------------------------------------------------------
def body_of(i: int) -> bytes:
    """The same ~200-byte JSON body for job i, on both sides."""
    return json.dumps({"event": "order.paid", "order": i, "amount": 1299, "currency": "EUR",
                       "customer": f"cus_{i:08d}", "note": "x" * 100}).encode()


def run_baseline(url: str, jobs: int, concurrency: int) -> None:
    import requests

    local = threading.local()

    def post(i: int) -> int:
        session = getattr(local, "session", None)
        if session is None:
            session = local.session = requests.Session()
            session.trust_env = False   # as queues/delivery.py: no proxy lookup per request
        answer = session.post(url, data=body_of(i), headers={"Content-Type": "application/json"}, timeout=(1, 3),
                              allow_redirects=False)
        answer.close()
        return answer.status_code

    started = time.monotonic()
    with ThreadPoolExecutor(concurrency) as pool:
        statuses = list(pool.map(post, range(jobs), chunksize=64))
    elapsed = time.monotonic() - started
    print(json.dumps({"elapsed_s": elapsed, "ok": sum(1 for s in statuses if s == 200),
                      "cpu_s": time.process_time()}), flush=True)


# -- the run -----------------------------------------------------------------------------------
def environment(var_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LMSTFY_POOLS", "DJANGO_SETTINGS_MODULE")}
    env.update({"DJANGO_SETTINGS_MODULE": "lmstfy_site.settings", "REDIS_URL": REDIS_URL,
                "DATABASE_URL": DATABASE_URL, "LMSTFY_VAR_DIR": str(var_dir), "DEBUG": "0",
                "LMSTFY_ALLOW_PRIVATE_CALLBACKS": "1", "SECRET_KEY": env.get("SECRET_KEY") or "notifier-bench-" * 4})
    return env


def fresh_database() -> None:
    import psycopg

    parts = urlsplit(DATABASE_URL)
    name = parts.path.strip("/")
    if not name.startswith("bench"):
        raise SystemExit(f"refusing to recreate database {name!r}: only 'bench*' databases")
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


class Run:
    def __init__(self, args: argparse.Namespace, env: dict[str, str]) -> None:
        self.args = args
        self.env = env
        os.environ.update(env)
        import django

        django.setup()
        from django.core.management import call_command

        from queues import pools
        from queues.engine import Engine
        from queues.models import Namespace, Topic

        call_command("migrate", interactive=False, verbosity=0)
        self.client = pools.client()
        assert self.client.connection_pool.connection_kwargs.get("db") == int(urlsplit(REDIS_URL).path.strip("/"))
        self.client.flushdb()   # DB 7 is the benchmark's own
        self.engine = Engine()
        self.sink = Sink()
        namespace = Namespace.objects.create(name=NAMESPACE)
        self.topic = Topic.objects.create(namespace=namespace, queue=QUEUE, callback_url=self.sink.url,
                                          concurrency=args.concurrency, timeout_ms=3000)
        self.notifier: subprocess.Popen | None = None

    # notifier process
    def start_notifier(self) -> None:
        log_path = Path(self.env["LMSTFY_VAR_DIR"]) / "notifier.log"
        with open(log_path, "ab") as log:   # the child keeps its own copy of the descriptor
            self.notifier = subprocess.Popen([sys.executable, "manage.py", "notifier", "--threads",
                                              str(self.args.concurrency)], cwd=REPO_DIR, env=self.env,
                                             stdout=log, stderr=subprocess.STDOUT)
        time.sleep(2.0)   # Django start-up and the first topic load
        if self.notifier.poll() is not None:
            raise SystemExit(f"the notifier exited: see {log_path}")

    def stop_notifier(self) -> None:
        if self.notifier is not None and self.notifier.poll() is None:
            self.notifier.send_signal(signal.SIGTERM)
            try:
                self.notifier.wait(30)
            except subprocess.TimeoutExpired:
                self.notifier.kill()
        self.notifier = None

    def publish_paused(self, jobs: int) -> None:
        self.engine.pause(NAMESPACE, QUEUE, by="bench")
        batch = 500
        for start in range(0, jobs, batch):
            bodies = [body_of(i) for i in range(start, min(jobs, start + batch))]
            self.engine.publish(NAMESPACE, QUEUE, bodies, ttl_s=3600, content_type="application/json")

    def queue_empty(self) -> bool:
        from queues import inspect

        stats = inspect.queue_stats("default", NAMESPACE, QUEUE).as_dict()
        return not (stats["ready"] or stats["delayed"] or stats["inflight"] or stats["deadletter"])

    # measurements
    def ours_rate(self, profile_to: Path | None) -> tuple[float, dict]:
        jobs = self.args.jobs
        self.publish_paused(jobs)
        self.sink.reset()
        cpu_before = process_cpu_s(self.notifier.pid)
        started = time.monotonic()
        self.engine.resume(NAMESPACE, QUEUE)
        recorder = None
        if profile_to is not None:
            time.sleep(1.0)   # past the start (thread and session creation): the steady state
            recorder = subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "--pid",
                                         str(self.notifier.pid), "--rate", "200", "--format", "raw", "--gil",
                                         "--duration", "6", "--output", str(profile_to)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        stats = self.sink.wait_for(jobs, timeout_s=max(60.0, jobs / 200))
        wall = time.monotonic() - started
        if recorder is not None:
            recorder.wait(60)
        deadline = time.monotonic() + 10
        while not self.queue_empty() and time.monotonic() < deadline:
            time.sleep(0.05)
        cpu = process_cpu_s(self.notifier.pid) - cpu_before
        rate = (stats["count"] - 1) / (stats["last"] - stats["first"]) if stats["count"] > 1 else 0.0
        return rate, {"delivered": stats["count"], "wall_s": round(wall, 2), "queue_empty": self.queue_empty(),
                      "cpu_ms_per_delivery": round(cpu * 1000 / max(1, stats["count"]), 3)}

    def baseline_rate(self) -> tuple[float, dict]:
        self.sink.reset()
        output = subprocess.run([sys.executable, __file__, "--baseline", self.sink.url, str(self.args.jobs),
                                 str(self.args.concurrency)], capture_output=True, check=True, timeout=600)
        reported = json.loads(output.stdout.decode().strip().splitlines()[-1])
        stats = self.sink.stats()
        rate = (stats["count"] - 1) / (stats["last"] - stats["first"]) if stats["count"] > 1 else 0.0
        return rate, {"delivered": stats["count"], "ok": reported["ok"], "wall_s": round(reported["elapsed_s"], 2),
                      "cpu_ms_per_delivery": round(reported["cpu_s"] * 1000 / max(1, stats["count"]), 3)}

    def latency_ms(self, samples: int) -> list[float]:
        from queues.ulid import timestamp_ms  # noqa: F401  (import warms the module before timing)

        found = []
        self.sink.reset()
        for i in range(samples):
            published_at = time.time()
            job_id = self.engine.publish(NAMESPACE, QUEUE, [body_of(i)], ttl_s=3600).job_ids[0]
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                if self.sink.stats()["count"] > i:
                    break
                time.sleep(0.002)
            time.sleep(0.02 + (i % 7) * 0.003)   # idle again, at a varying phase
            found.append((job_id, published_at))
        arrivals = self.sink.stats(arrivals=True)["arrivals"]
        return [(arrivals[job_id.upper()] - at) * 1000 for job_id, at in found if job_id.upper() in arrivals]

    def close(self) -> None:
        self.stop_notifier()
        self.sink.stop()


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process, all its threads (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], percent: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(percent / 100 * (len(ordered) - 1)))]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=20_000, help="deliveries per round (default 20000)")
    parser.add_argument("--concurrency", type=int, default=32,
                        help="notifier threads = topic concurrency = baseline threads (default 32)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per side, best kept (default 2)")
    parser.add_argument("--samples", type=int, default=300, help="latency samples (default 300)")
    parser.add_argument("--profile", type=Path, metavar="DIR", help="py-spy the notifier during the last round")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--sink", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--baseline", nargs=3, metavar=("URL", "JOBS", "CONCURRENCY"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.sink:
        run_sink(record_arrivals=True)
        return 0
    if args.baseline:
        run_baseline(args.baseline[0], int(args.baseline[1]), int(args.baseline[2]))
        return 0

    from bench.report import Figure, table

    fresh_database()
    with tempfile.TemporaryDirectory(prefix="notifier-bench-") as var_dir:
        run = Run(args, environment(Path(var_dir)))
        try:
            baseline_rates, our_rates, details = [], [], {}
            run.start_notifier()
            for round_index in range(args.rounds):
                rate, details["baseline"] = run.baseline_rate()
                baseline_rates.append(rate)
                profile_to = None
                if args.profile and round_index == args.rounds - 1:
                    args.profile.mkdir(parents=True, exist_ok=True)
                    profile_to = args.profile / "notifier.txt"
                rate, details["ours"] = run.ours_rate(profile_to)
                our_rates.append(rate)
                print(f"round {round_index + 1}: baseline {baseline_rates[-1]:,.0f}/s, notifier {rate:,.0f}/s "
                      f"{details['ours']}", file=sys.stderr, flush=True)
            latencies = run.latency_ms(args.samples)
        finally:
            run.close()
    ours, baseline = max(our_rates), max(baseline_rates)
    figures = [
        Figure("notifier throughput", "deliveries/s", ours, baseline, "threads + requests.Session",
               f">= {TARGET_RATIO}x and >= {TARGET_RATE:,.0f}/s",
               ours >= TARGET_RATIO * baseline and ours >= TARGET_RATE,
               notes=f"{args.jobs} jobs, concurrency {args.concurrency}, {os.cpu_count()} CPUs",
               details={"rounds_ours": [round(r) for r in our_rates],
                        "rounds_baseline": [round(r) for r in baseline_rates], **details}),
        Figure("push latency p50", "ms", percentile(latencies, 50), None, "", "< 1000 (SPEC: sent within 1 s)",
               percentile(latencies, 50) < 1000, details={"samples": len(latencies)}),
        Figure("push latency p99", "ms", percentile(latencies, 99), None, "", "< 1000",
               percentile(latencies, 99) < 1000, details={"max": round(max(latencies), 1),
                                                          "mean": round(statistics.mean(latencies), 1)}),
    ]
    print(table(figures))
    for figure in figures:
        if figure.details:
            print(f"  {figure.benchmark}: {json.dumps(figure.details)}")
    if args.json:
        args.json.write_text(json.dumps([f.as_dict() for f in figures], indent=2))
    if args.profile:
        from bench.profiling import summarize

        files = [p for p in args.profile.glob("notifier*.txt") if "summary" not in p.name]
        if files:
            (args.profile / "notifier-summary.txt").write_text(summarize(files))
            print(f"profile: {args.profile / 'notifier-summary.txt'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Load generation: wrk when installed, else a Python generator (pyload.py).

One generator drives both sides of a comparison in the same run, so the CPU it
steals from the server on a 2-core machine weighs on ours and the baseline alike.
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.environment import REPO_DIR

WRK_SCRIPT = Path(__file__).resolve().parent / "wrk" / "bench.lua"
RESULT_MARKER = "BENCH_JSON "


@dataclass(frozen=True)
class Scenario:
    """What every connection sends. `consume_ack`: GET `path`, then DELETE
    `ack_prefix`/job/<id> for each job received."""
    method: str
    path: str
    body: bytes = b""
    token: str = ""
    content_type: str = ""
    consume_ack: bool = False
    ack_prefix: str = ""


@dataclass
class Load:
    requests: int
    ok: int
    bad: int
    acked: int
    duration_s: float
    p50_ms: float
    p99_ms: float
    socket_errors: int = 0
    generator: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def rps(self) -> float:
        return self.ok / self.duration_s if self.duration_s else 0.0

    @property
    def acks_per_s(self) -> float:
        return self.acked / self.duration_s if self.duration_s else 0.0

    def as_dict(self) -> dict:
        return {**asdict(self), "rps": round(self.rps, 1)}


class Wrk:
    name = "wrk"

    def __init__(self, threads: int = 1) -> None:
        # One wrk thread is plenty for a few thousand req/s and leaves the most CPU to the server.
        self.threads = threads

    def run(self, base_url: str, scenario: Scenario, duration_s: float, connections: int) -> Load:
        with tempfile.NamedTemporaryFile(prefix="bench-body-", delete=False) as body_file:
            body_file.write(scenario.body)
        env = {**os.environ, "BENCH_MODE": "consume_ack" if scenario.consume_ack else "static",
               "BENCH_METHOD": scenario.method, "BENCH_BODY_FILE": body_file.name if scenario.body else "",
               "BENCH_TOKEN": scenario.token, "BENCH_CONTENT_TYPE": scenario.content_type,
               "BENCH_ACK_PREFIX": scenario.ack_prefix}
        # wrk takes whole seconds only.
        argv = ["wrk", "-t", str(self.threads), "-c", str(max(connections, self.threads)),
                "-d", f"{max(1, round(duration_s))}s", "--timeout", "10s", "-s", str(WRK_SCRIPT), base_url + scenario.path]
        started = _children_cpu_s()
        try:
            out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=duration_s + 60)
        finally:
            os.unlink(body_file.name)
        return _with_cpu(Load(**_result_line(out.stdout, out.stderr), generator=self.name), started)


class PythonLoad:
    """Several processes, each with threads on keep-alive http.client connections."""
    name = "python"

    def __init__(self, processes: int = 2) -> None:
        self.processes = processes

    def run(self, base_url: str, scenario: Scenario, duration_s: float, connections: int) -> Load:
        started = _children_cpu_s()
        per_process = _split(connections, self.processes)
        spec = {"base_url": base_url, "duration_s": duration_s, "scenario": {
            **asdict(scenario), "body": scenario.body.decode("latin-1")}}
        children = [subprocess.Popen([sys.executable, "-m", "bench.pyload", json.dumps({**spec, "threads": n})],
                                     cwd=REPO_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                    for n in per_process if n]
        results = []
        for child in children:
            stdout, stderr = child.communicate(timeout=duration_s + 60)
            results.append(_result_line(stdout, stderr))
        return _with_cpu(_merge(results, self.name), started)


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _with_cpu(load: Load, started_cpu_s: float) -> Load:
    """The generator's own CPU per request: on 2 cores it is taken from the server."""
    used = _children_cpu_s() - started_cpu_s
    load.extra["generator_cpu_ms_per_request"] = round(1000 * used / max(1, load.requests), 3)
    return load


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def _result_line(stdout: str, stderr: str) -> dict:
    for line in stdout.splitlines():
        if line.startswith(RESULT_MARKER):
            return json.loads(line[len(RESULT_MARKER):])
    raise RuntimeError(f"load generator gave no result:\n{stdout[-2000:]}\n{stderr[-2000:]}")


def _merge(results: list[dict], generator: str) -> Load:
    latencies = sorted(x for r in results for x in r.pop("latencies_ms"))
    total = {key: sum(r[key] for r in results) for key in ("requests", "ok", "bad", "acked", "socket_errors")}
    return Load(**total, duration_s=max(r["duration_s"] for r in results), p50_ms=_percentile(latencies, 50),
                p99_ms=_percentile(latencies, 99), generator=generator)


def _percentile(sorted_values: list[float], percent: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, int(round(percent / 100 * (len(sorted_values) - 1))))
    return sorted_values[index]


def pick_generator(wanted: str = "auto"):
    """wrk when asked or available; the Python generator otherwise."""
    if wanted == "python":
        return PythonLoad()
    if shutil.which("wrk"):
        return Wrk()
    if wanted == "wrk":
        raise RuntimeError("wrk is not installed (Debian: apt-get install -y wrk)")
    return PythonLoad()

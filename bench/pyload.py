"""One process of the Python load generator (used when wrk is not installed).

Run as `python -m bench.pyload SPEC_JSON`: `threads` threads, each with one
keep-alive connection, send the scenario until `duration_s` has passed, then
one line "BENCH_JSON {...}" reports the totals and every latency.
"""
from __future__ import annotations

import http.client
import json
import re
import sys
import threading
import time
from urllib.parse import urlsplit

JOB_ID = re.compile(rb'"job_id":\s*"([^"]+)"')


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ok = self.bad = self.acked = self.socket_errors = 0
        self.latencies_ms: list[float] = []

    def add(self, status: int, latency_ms: float, acked: bool) -> None:
        with self.lock:
            if 200 <= status < 300:
                self.ok += 1
            else:
                self.bad += 1
            self.acked += acked
            self.latencies_ms.append(round(latency_ms, 3))


def drive(spec: dict, tally: Tally, deadline: float) -> None:
    url = urlsplit(spec["base_url"])
    scenario = spec["scenario"]
    body = scenario["body"].encode("latin-1") or None
    headers = {}
    if scenario["token"]:
        headers["X-Token"] = scenario["token"]
    if scenario["content_type"]:
        headers["Content-Type"] = scenario["content_type"]
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    pending: list[str] = []
    while time.monotonic() < deadline:
        if pending:
            method, path, payload = "DELETE", f"{scenario['ack_prefix']}/job/{pending.pop()}", None
        else:
            method, path, payload = scenario["method"], scenario["path"], body
        started = time.perf_counter()
        try:
            conn.request(method, path, body=payload, headers=headers)
            response = conn.getresponse()
            answer = response.read()
        except (OSError, http.client.HTTPException):
            with tally.lock:
                tally.socket_errors += 1
            conn.close()
            conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
            continue
        if scenario["consume_ack"] and response.status == 200 and method == "GET":
            found = JOB_ID.search(answer)
            if found:
                pending.append(found.group(1).decode())
        tally.add(response.status, (time.perf_counter() - started) * 1000,
                  acked=method == "DELETE" and response.status == 204)
    conn.close()


def main(spec: dict) -> None:
    tally = Tally()
    started = time.monotonic()
    deadline = started + spec["duration_s"]
    workers = [threading.Thread(target=drive, args=(spec, tally, deadline)) for _ in range(spec["threads"])]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    result = {"requests": tally.ok + tally.bad, "ok": tally.ok, "bad": tally.bad, "acked": tally.acked,
              "duration_s": time.monotonic() - started, "socket_errors": tally.socket_errors,
              "latencies_ms": tally.latencies_ms}
    print("BENCH_JSON " + json.dumps(result))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))

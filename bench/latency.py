"""Benchmark 6: how soon a waiting consumer gets its job.

- wake-up: a long-poll consume is waiting on an empty queue; a job is published
  (in-process, straight through the engine); latency = publish started ->
  answer received. Baseline: the same with LPUSH -> BLPOP on the same Redis.
- firing lateness: jobs published through the API with delay=1 while the
  pumper (started by runall) runs and consumers long-poll; lateness = answer
  received - due time (the publish time inside the job id + 1 s).
"""
from __future__ import annotations

import http.client
import json
import statistics
import threading
import time
from urllib.parse import urlsplit

import redis

from bench.environment import NAMESPACE
from bench.report import Figure
from bench.servers import Server
from queues import ulid

JOB_BODY = b"x" * 100
WARMUP_SAMPLES = 10
# Long enough for a consume request to reach the server and start waiting.
SETTLE_S = 0.015
LATENESS_CONSUMERS = 16
LATENESS_SPACING_S = 0.02
DELAY_S = 1


def percentile(values: list[float], percent: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(percent / 100 * (len(ordered) - 1))))]


class OneShotWaiter:
    """A thread that, each time it is started, runs `wait_once` and records the
    moment it returned: one persistent thread, so thread start-up is not timed."""

    def __init__(self, wait_once) -> None:
        self.wait_once = wait_once
        self.go = threading.Event()
        self.done = threading.Event()
        self.received_at = 0.0
        self.answer = None
        self.stopping = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            self.go.wait()
            self.go.clear()
            if self.stopping:
                return
            self.answer = self.wait_once()
            self.received_at = time.perf_counter()
            self.done.set()

    def trigger(self) -> None:
        self.done.clear()
        self.go.set()

    def stop(self) -> None:
        self.stopping = True
        self.go.set()


def _sample(waiter: OneShotWaiter, release, settle_s: float) -> float:
    waiter.trigger()
    time.sleep(settle_s)
    started = time.perf_counter()
    release()
    if not waiter.done.wait(10):
        raise RuntimeError("the waiting consumer got nothing within 10 s")
    return (waiter.received_at - started) * 1000


def long_poll_wake_ms(server: Server, token: str, engine, samples: int) -> list[float]:
    queue = "wake"
    url = urlsplit(server.base_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)

    def consume_once() -> int:
        conn.request("GET", f"/api/{NAMESPACE}/{queue}?timeout=10&ttr=60", headers={"X-Token": token})
        response = conn.getresponse()
        response.read()
        return response.status

    waiter = OneShotWaiter(consume_once)
    latencies = []
    try:
        for index in range(WARMUP_SAMPLES + samples):
            latency = _sample(waiter, lambda: engine.publish(NAMESPACE, queue, [JOB_BODY]), SETTLE_S)
            if waiter.answer != 200:
                raise RuntimeError(f"long-poll consume answered {waiter.answer}")
            if index >= WARMUP_SAMPLES:
                latencies.append(latency)
    finally:
        waiter.stop()
        conn.close()
    return latencies


def blpop_wake_ms(client: redis.Redis, samples: int) -> list[float]:
    key = "bench:blpop"
    consumer = redis.Redis(connection_pool=client.connection_pool)
    waiter = OneShotWaiter(lambda: consumer.blpop([key], timeout=10))
    latencies = []
    try:
        for index in range(WARMUP_SAMPLES + samples):
            latency = _sample(waiter, lambda: client.lpush(key, JOB_BODY), SETTLE_S)
            if index >= WARMUP_SAMPLES:
                latencies.append(latency)
    finally:
        waiter.stop()
    return latencies


def wake_latency(server: Server, token: str, engine, client: redis.Redis, samples: int) -> list[Figure]:
    ours = long_poll_wake_ms(server, token, engine, samples)
    base = blpop_wake_ms(client, samples)
    details = {"ours_ms": {"p50": percentile(ours, 50), "p99": percentile(ours, 99), "max": max(ours)},
               "blpop_ms": {"p50": percentile(base, 50), "p99": percentile(base, 99), "max": max(base)},
               "samples": samples}
    notes = f"{samples} samples; job published in-process while one HTTP long poll (timeout=10) waits"
    return [
        Figure("6a ready job -> waiting long poll", "p50 ms", percentile(ours, 50), percentile(base, 50),
               "LPUSH->BLPOP", "-", None, notes, details),
        Figure("6a ready job -> waiting long poll", "p99 ms", percentile(ours, 99), percentile(base, 99),
               "LPUSH->BLPOP", "< 50 ms", percentile(ours, 99) < 50),
    ]


class LatenessRun:
    """Publishers and long-poll consumers of one delayed-jobs run."""

    def __init__(self, server: Server, token: str, samples: int) -> None:
        self.url = urlsplit(server.base_url)
        self.token = token
        self.samples = samples
        self.queue = "lateness"
        self.received: dict[str, float] = {}  # job id -> wall-clock ms when its consumer got it
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def _connection(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.url.hostname, self.url.port, timeout=30)

    def consume_loop(self) -> None:
        conn = self._connection()
        path = f"/api/{NAMESPACE}/{self.queue}?timeout=2&ttr=60"
        while not self.stop.is_set():
            conn.request("GET", path, headers={"X-Token": self.token})
            response = conn.getresponse()
            answer = response.read()
            got_at = time.time() * 1000
            if response.status == 200:
                with self.lock:
                    self.received[json.loads(answer)["job_id"]] = got_at
                    if len(self.received) >= self.samples:
                        self.stop.set()
        conn.close()

    def publish_all(self) -> list[str]:
        conn = self._connection()
        ids = []
        next_at = time.monotonic()
        for _ in range(self.samples):
            conn.request("PUT", f"/api/{NAMESPACE}/{self.queue}?delay={DELAY_S}", body=JOB_BODY,
                         headers={"X-Token": self.token})
            response = conn.getresponse()
            answer = response.read()
            if response.status != 201:
                raise RuntimeError(f"publish answered {response.status}: {answer[:200]!r}")
            ids.append(json.loads(answer)["job_id"])
            next_at += LATENESS_SPACING_S
            time.sleep(max(0.0, next_at - time.monotonic()))
        conn.close()
        return ids

    def run(self) -> list[float]:
        consumers = [threading.Thread(target=self.consume_loop, daemon=True) for _ in range(LATENESS_CONSUMERS)]
        for consumer in consumers:
            consumer.start()
        ids = self.publish_all()
        self.stop.wait(DELAY_S + 10)
        self.stop.set()
        for consumer in consumers:
            consumer.join(5)
        missing = [job_id for job_id in ids if job_id not in self.received]
        if missing:
            raise RuntimeError(f"{len(missing)} delayed jobs never reached a consumer (e.g. {missing[0]})")
        return [self.received[job_id] - (ulid.timestamp_ms(job_id) + DELAY_S * 1000) for job_id in ids]


def firing_lateness(server: Server, token: str, samples: int) -> list[Figure]:
    lateness = LatenessRun(server, token, samples).run()
    early = sum(1 for x in lateness if x < 0)
    details = {"p50_ms": percentile(lateness, 50), "p99_ms": percentile(lateness, 99), "max_ms": max(lateness),
               "min_ms": min(lateness), "early": early, "samples": samples}
    notes = (f"{samples} jobs published via the API with delay={DELAY_S}, one every {LATENESS_SPACING_S * 1000:.0f} "
             f"ms, {LATENESS_CONSUMERS} long-poll consumers, runall's pumper; p50 "
             f"{statistics.median(lateness):.1f} ms, max {max(lateness):.1f} ms, {early} early")
    p99 = percentile(lateness, 99)
    return [Figure("6b delayed job firing lateness", "p99 ms", p99, None, "", "< 1100 ms", p99 < 1100 and early == 0,
                   notes, details)]

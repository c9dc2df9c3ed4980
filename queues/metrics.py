"""Prometheus metrics served at /metrics (names prefixed ``lmstfy_``).

Every figure is either shared by all processes or merged from all of them, so
several gunicorn workers (and several machines) agree:

1. Kept in Redis, read at scrape time through inspect.py (RedisReading):
   - per-queue depths and pause flag: the queue's own sorted sets;
   - per-queue job counters (published, consumed, acked, released, expired,
     dead-lettered, respawned): totals the Lua scripts keep in the queue's meta
     hash (lua/_job.lua count_total), updated in the same atomic step as the
     job, so they are exact;
   - deliveries by topic and outcome and the delivery duration histogram (the
     notifier, which may run on any machine and has no HTTP server), rate-limit
     hits and token-authentication failures (the alert rules read these too):
     small hashes in the default pool, written by engine.py;
   - Redis memory used / max per pool (INFO at scrape time).
2. Observed in the API process, on the hot path where another Redis round trip
   would cost: HTTP requests and their duration per route, and the
   publish -> consume latency of pulled jobs. With PROMETHEUS_MULTIPROC_DIR set
   (runall sets it for gunicorn) prometheus-client's multiprocess mode gives
   each worker its own mmap file and a scrape merges every file; without it (a
   single process: runserver, tests) the process's own registry is served.

Label cardinality stays bounded: per-queue series carry (pool, namespace,
queue) only; histograms are labelled by namespace or by route, never by
queue; label values come from our own routes and names, never from a raw path.
"""
from __future__ import annotations

import glob
import itertools
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import redis
from django.http import HttpRequest, HttpResponse
from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.utils import floatToGoString

from queues import inspect, pools
from queues.engine import Engine, Job

log = logging.getLogger(__name__)
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4  # what generate_latest() writes; every Prometheus reads it
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
QUEUE_BATCH = 500  # queues per Redis pipeline at scrape time: bounds each answer's size

# Bucket bounds in seconds. Long polls wait up to 600 s; delayed jobs wait hours.
HTTP_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 600)
CONSUME_LATENCY_BUCKETS_S = (0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 21600, 86400)
# Delivery durations are kept in Redis as integer milliseconds per bucket.
DELIVERY_BUCKETS_MS = (10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000)

# _created samples exist only outside multiprocess mode: leave them out so both
# modes export the same series.
disable_created_metrics()

# -- process-local observations (multiprocess mode under gunicorn) ---------------------
PROCESS_REGISTRY = CollectorRegistry(auto_describe=False)
HTTP_REQUESTS = Counter("lmstfy_http_requests", "HTTP requests answered, by route pattern, method and status code.",
                        ["route", "method", "code"], registry=PROCESS_REGISTRY)
HTTP_DURATION = Histogram("lmstfy_http_request_duration_seconds",
                          "Time to answer an HTTP request (long polls included), by route pattern and method.",
                          ["route", "method"], buckets=HTTP_BUCKETS_S, registry=PROCESS_REGISTRY)
PUBLISH_TO_CONSUME = Histogram("lmstfy_publish_to_consume_seconds",
                               "Time from publish to consume of jobs consumed through the API (elapsed_ms; "
                               "a delayed job's delay included), by namespace.",
                               ["namespace"], buckets=CONSUME_LATENCY_BUCKETS_S, registry=PROCESS_REGISTRY)

KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNMATCHED_ROUTE = "<unmatched>"  # unknown paths ("api not found") and static files


def route_label(request: HttpRequest) -> str:
    """The URL pattern that served the request, never the raw path: the path holds
    namespaces, queues and job ids, which would make one series per job."""
    match = getattr(request, "resolver_match", None)
    if match is None or match.route.startswith("^"):  # the catch-all re_path of lmstfy_site/urls.py
        return UNMATCHED_ROUTE
    return "/" + match.route


def method_label(method: str | None) -> str:
    return method if method in KNOWN_METHODS else "other"


def observe_request(route: str, method: str, code: int, seconds: float) -> None:
    HTTP_REQUESTS.labels(route, method, str(code)).inc()
    HTTP_DURATION.labels(route, method).observe(seconds)


class HttpMetricsMiddleware:
    """Counts and times every response by route pattern, method and status code."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        observe_request(route_label(request), method_label(request.method), response.status_code,
                        time.perf_counter() - started)
        return response


def observe_consumed(namespace: str, jobs: Iterable[Job]) -> None:
    """Publish -> consume latency of jobs just consumed through the API. Only
    namespaces a valid token was granted for get here, so the label is bounded."""
    histogram = PUBLISH_TO_CONSUME.labels(namespace)
    for job in jobs:
        histogram.observe(job.elapsed_ms / 1000)


# -- cluster-wide counters kept in Redis (engine.py writes, inspect.py reads) -----------
def _count_in_redis(what: str, count: Callable[[Engine], None]) -> None:
    """A metric must never change an answer: a Redis failure here is logged, not raised."""
    try:
        count(Engine(pools.DEFAULT_POOL))
    except redis.RedisError as exc:
        log.warning("metrics: could not count %s: %s", what, exc)


def delivery_bucket(duration_ms: int) -> str:
    """The (non-cumulative) bucket of a delivery duration: its upper bound in ms, or +Inf."""
    for bound in DELIVERY_BUCKETS_MS:
        if duration_ms <= bound:
            return str(bound)
    return "+Inf"


def record_delivery(topic_id: int, namespace: str, queue: str, outcome: str, duration_ms: int,
                    attempt: dict[str, str], max_attempts_logged: int) -> None:
    """One delivery attempt of the notifier (outcome success, retry or dead): its
    attempt-log entry and its counters, written together."""
    _count_in_redis("a delivery", lambda engine: engine.record_delivery(
        topic_id, namespace, queue, outcome, delivery_bucket(duration_ms), max(0, int(duration_ms)),
        attempt, max_attempts_logged))


def count_rate_limited(namespace: str, direction: str) -> None:
    _count_in_redis("a rate-limited request", lambda engine: engine.count_rate_limited(namespace, direction))


def count_auth_failure(reason: str) -> None:
    """A 401 of the token authentication. No namespace label: the namespace of a
    refused request comes from an unauthenticated path, so it is unbounded."""
    _count_in_redis("an auth failure", lambda engine: engine.count_auth_failure(reason))


# -- scrape ------------------------------------------------------------------------------
PER_QUEUE_GAUGES = (
    ("lmstfy_queue_ready", "Jobs ready to be consumed.", "ready"),
    ("lmstfy_queue_delayed", "Jobs waiting for their delay to pass.", "delayed"),
    ("lmstfy_queue_inflight", "Jobs consumed and not yet acked (leased).", "inflight"),
    ("lmstfy_queue_deadletter", "Jobs in the dead letter.", "deadletter"),
    ("lmstfy_queue_paused", "1 when the queue is paused.", "paused"),
)
# In inspect.TOTAL_FIELDS order.
PER_QUEUE_COUNTERS = (
    ("lmstfy_jobs_published", "Jobs published to the queue."),
    ("lmstfy_jobs_consumed", "Jobs leased by consumers (pull consume and push delivery)."),
    ("lmstfy_jobs_acked", "Jobs deleted by ack (a successful delivery acks too)."),
    ("lmstfy_jobs_released", "In-flight jobs given back by release (and delivery retries)."),
    ("lmstfy_jobs_expired", "Jobs removed because their ttl ran out."),
    ("lmstfy_jobs_dead_lettered", "Jobs moved to the dead letter."),
    ("lmstfy_jobs_respawned", "Dead jobs respawned to the ready queue."),
)


@dataclass
class PoolReading:
    pool: str
    up: bool
    queues: list[inspect.QueueMetrics] = field(default_factory=list)
    used_memory: int = 0
    maxmemory: int = 0


@dataclass
class ClusterReading:
    """The default pool's metric hashes (None when that pool could not be read)."""

    deliveries: list[tuple[str, str, str, str, int]]
    delivery_latency: dict[str, tuple[dict[str, int], int]]
    rate_limited: list[tuple[str, str, int]]
    auth_failures: dict[str, int]


def read_pool(pool: str) -> PoolReading:
    try:
        members = inspect.queue_members(pool)
        queues: list[inspect.QueueMetrics] = []
        for start in range(0, len(members), QUEUE_BATCH):
            queues.extend(inspect.queue_metrics(pool, members[start:start + QUEUE_BATCH]))
        used, maximum = inspect.redis_memory(pool)
    except redis.RedisError as exc:
        log.warning("metrics: pool %s cannot be read: %s", pool, exc)
        return PoolReading(pool, up=False)
    return PoolReading(pool, True, queues, used, maximum)


def read_cluster() -> ClusterReading | None:
    try:
        return ClusterReading(inspect.delivery_outcomes(), inspect.delivery_latency(), inspect.rate_limited(),
                              inspect.auth_failures_by_reason())
    except redis.RedisError as exc:
        log.warning("metrics: the default pool's counters cannot be read: %s", exc)
        return None


class RedisReading:
    """Everything kept in Redis, read once per scrape (read()), then written out
    family by family (render()), so the page is never held whole in memory."""

    def __init__(self) -> None:
        self.pools: list[PoolReading] = []
        self.cluster: ClusterReading | None = None
        self.read_seconds = 0.0

    def read(self) -> RedisReading:
        started = time.perf_counter()
        self.pools = [read_pool(pool) for pool in pools.pool_names()]
        self.cluster = read_cluster()
        self.read_seconds = time.perf_counter() - started
        return self

    def render(self) -> Iterator[bytes]:
        yield from render(self._pool_families())
        yield from render_per_queue(list(self._queues()))
        if self.cluster is not None:
            yield from render(self._cluster_families(self.cluster))
        yield from render([GaugeMetricFamily("lmstfy_exporter_redis_read_seconds",
                                             "Time this scrape spent reading Redis.", value=self.read_seconds)])

    def _pool_families(self) -> Iterator[Metric]:
        for name, documentation, value_of in (
                ("lmstfy_redis_up", "1 when the pool's Redis answered this scrape.", lambda p: p.up),
                ("lmstfy_redis_used_memory_bytes", "Redis used_memory.", lambda p: p.used_memory),
                ("lmstfy_redis_maxmemory_bytes", "Redis maxmemory (0 = no limit).", lambda p: p.maxmemory),
                ("lmstfy_queues", "Queues in the pool's registry.", lambda p: len(p.queues))):
            family = GaugeMetricFamily(name, documentation, labels=["pool"])
            for reading in self.pools:
                if reading.up or name == "lmstfy_redis_up":
                    family.add_metric([reading.pool], float(value_of(reading)))
            yield family

    def _queues(self) -> Iterator[tuple[str, inspect.QueueMetrics]]:
        for reading in self.pools:
            for queue in reading.queues:
                yield reading.pool, queue

    @staticmethod
    def _cluster_families(cluster: ClusterReading) -> Iterator[Metric]:
        deliveries = CounterMetricFamily("lmstfy_deliveries", "Push delivery attempts by topic and outcome "
                                         "(success, retry, dead).", labels=["topic", "namespace", "queue", "outcome"])
        for topic, ns, q, outcome, count in sorted(cluster.deliveries):
            deliveries.add_metric([topic, ns, q, outcome], count)
        yield deliveries
        yield delivery_histogram(cluster.delivery_latency)
        limited = CounterMetricFamily("lmstfy_rate_limited", "Requests refused by a token's rate limit (429).",
                                      labels=["namespace", "direction"])
        for ns, direction, count in sorted(cluster.rate_limited):
            limited.add_metric([ns, direction], count)
        yield limited
        failures = CounterMetricFamily("lmstfy_auth_failures", "401 answers of the API's token authentication.",
                                       labels=["reason"])
        for reason, count in sorted(cluster.auth_failures.items()):
            failures.add_metric([reason], count)
        yield failures


def delivery_histogram(latency: dict[str, tuple[dict[str, int], int]]) -> HistogramMetricFamily:
    """Redis keeps one count per bucket; Prometheus wants cumulative buckets in seconds."""
    family = HistogramMetricFamily("lmstfy_delivery_duration_seconds",
                                   "Duration of push delivery attempts (the callback's answer), by namespace.",
                                   labels=["namespace"])
    for ns, (counts, total_ms) in sorted(latency.items()):
        running, buckets = 0, []
        for bound in DELIVERY_BUCKETS_MS:
            running += counts.get(str(bound), 0)
            buckets.append((floatToGoString(bound / 1000), running))
        buckets.append(("+Inf", running + counts.get("+Inf", 0)))
        family.add_metric([ns], buckets, total_ms / 1000)
    return family


def multiprocess_dir() -> str | None:
    return os.environ.get(MULTIPROC_ENV) or None


def process_families() -> list[Metric]:
    """The API processes' own observations: merged from every worker's file in
    multiprocess mode, else this process's registry."""
    path = multiprocess_dir()
    if path:
        return list(MultiProcessCollector(None, path=path).collect())
    return list(PROCESS_REGISTRY.collect())


class _Families:
    """generate_latest() takes anything with collect()."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


def render(families: Iterable[Metric]) -> Iterator[bytes]:
    """The text exposition, one family at a time (generate_latest per family)."""
    for family in families:
        yield generate_latest(_Families([family]))


def escape_label_value(value: str) -> str:
    """The text format's escaping of a label value (backslash, newline, quote)."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def family_header(name: str, documentation: str, kind: str) -> str:
    return f"# HELP {name} {documentation}\n# TYPE {name} {kind}\n"


def render_per_queue(queues: list[tuple[str, inspect.QueueMetrics]]) -> Iterator[bytes]:
    """The per-queue series, written straight in the text format (the same text
    generate_latest() writes, integers without ".0"). They are 12 lines per queue,
    120 000 at 10 000 queues: generate_latest() validates and escapes every label
    of every sample again (~40 us each, seconds per scrape), while here each
    queue's label set is escaped once and shared by its 12 lines."""
    labelled = [(f'{{namespace="{escape_label_value(queue.namespace)}",pool="{escape_label_value(pool)}",'
                 f'queue="{escape_label_value(queue.queue)}"}}', queue) for pool, queue in queues]
    for name, documentation, attribute in PER_QUEUE_GAUGES:
        lines = [f"{name}{labels} {int(getattr(queue, attribute))}\n" for labels, queue in labelled]
        yield (family_header(name, documentation, "gauge") + "".join(lines)).encode()
    for index, (name, documentation) in enumerate(PER_QUEUE_COUNTERS):
        name += "_total"
        lines = [f"{name}{labels} {queue.totals[index]}\n" for labels, queue in labelled]
        yield (family_header(name, documentation, "counter") + "".join(lines)).encode()


def scrape() -> Iterator[bytes]:
    """Read everything first (a Redis failure must not cut the page half-way),
    then render lazily."""
    process = process_families()
    reading = RedisReading().read()
    return itertools.chain(render(process), reading.render())


def prepare_multiprocess_dir(path: str | Path) -> str:
    """Create the directory and remove the files a previous run left: runall calls
    this before starting gunicorn, so totals start from zero with the new processes."""
    Path(path).mkdir(parents=True, exist_ok=True)
    for stale in glob.glob(os.path.join(str(path), "*.db")):
        os.remove(stale)
    return str(path)

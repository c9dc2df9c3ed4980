"""Push delivery: lease ready jobs of active topics and POST them to their
callbacks. The command (management/commands/notifier.py) only loops.

A job of a topic's queue is leased with consume.lua (ttr = timeout + margin,
the topic's concurrency and rate enforced in the script, so across every
notifier process), sent by delivery.send(), then acked, released with a
backoff delay, or dead-lettered. A notifier that dies mid-delivery leaves the
job to its lease: it is delivered again (at-least-once; receivers dedupe on
webhook-id).
"""
from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone

from django.conf import settings
from django.core.mail import send_mail
from django.utils import timezone as django_timezone
from django.db import close_old_connections
from django.db import connection as db_connection

from queues import delivery, metrics, pools, wakeup
from queues.engine import Engine, Job, JobNotFound, now_ms
from queues.expressions import Expression, ExpressionError, parse
from queues.models import AlertEvent, Topic

log = logging.getLogger(__name__)
LEASE_MARGIN_S = 5.0
TOPIC_RELOAD_S = 1.0
FETCH_BATCH = 16
# While a topic has deliveries running, lease for it only once this many seats
# are free: a consume of one job costs nearly as much as a consume of sixteen.
FETCH_FLOOR = 8
IDLE_WAIT_S = 1.0
RESPONSE_LOG_BYTES = 2048


@dataclass(frozen=True)
class TopicConfig:
    """A topic as the notifier needs it, with its expression parsed once."""

    id: int
    namespace: str
    queue: str
    pool: str
    callback_url: str
    method: str
    headers: dict
    timeout_ms: int
    expression: Expression | None
    max_attempts: int
    backoff: str
    min_backoff_s: int
    max_backoff_s: int
    concurrency: int
    rate_per_s: float
    paused: bool
    signing_secret: str
    alert_emails: tuple[str, ...]

    @classmethod
    def from_model(cls, topic: Topic) -> TopicConfig:
        return cls(id=topic.id, namespace=topic.namespace.name, queue=topic.queue, pool=topic.pool,
                   callback_url=topic.callback_url, method=topic.method, headers=dict(topic.headers or {}),
                   timeout_ms=topic.timeout_ms,
                   expression=parse(topic.retry_expression) if topic.retry_expression.strip() else None,
                   max_attempts=topic.max_attempts, backoff=topic.backoff, min_backoff_s=topic.min_backoff_s,
                   max_backoff_s=topic.max_backoff_s, concurrency=topic.concurrency, rate_per_s=topic.rate_per_s,
                   paused=topic.paused, signing_secret=topic.signing_secret,
                   alert_emails=tuple(topic.alert_emails or ()))

    @property
    def lease_s(self) -> float:
        return self.timeout_ms / 1000 + LEASE_MARGIN_S


def backoff_delay_s(topic: TopicConfig, failed_attempt: int) -> float:
    """Seconds before retry n (n = the attempt that just failed, 1-based)."""
    n = max(1, failed_attempt)
    if topic.backoff == Topic.Backoff.DQ:
        return (2 * n - 1) * 60.0
    if topic.backoff == Topic.Backoff.FIXED:
        return float(topic.min_backoff_s)
    delay = min(topic.min_backoff_s * 2 ** (n - 1), topic.max_backoff_s)
    return delay * random.uniform(0.9, 1.1)


@dataclass(frozen=True)
class Verdict:
    outcome: str                 # success, retry or dead
    delay_s: float = 0.0


def judge(topic: TopicConfig, attempt: int, response: delivery.Response) -> Verdict:
    """SPEC §4 outcome rules."""
    completed = response.error is None and response.status is not None
    if completed and 200 <= response.status < 300:
        if topic.expression is None or not topic.expression.evaluate(response.status, response.body):
            return Verdict("success")
    if response.status == 410 or attempt >= topic.max_attempts:
        return Verdict("dead")
    delay = backoff_delay_s(topic, attempt)
    if response.status in (429, 503) and response.retry_after_s is not None:
        delay = max(delay, response.retry_after_s)
    return Verdict("retry", delay)


def content_type(job: Job) -> str:
    if job.content_type:
        return job.content_type
    try:
        json.loads(job.body)
    except ValueError:
        return "application/octet-stream"
    return "application/json"


def build_request(topic: TopicConfig, message_id: str, body: bytes, ctype: str, attempt: int) -> delivery.Request:
    sent_body = b"" if topic.method == Topic.Method.GET else body
    headers = {**topic.headers,
               "X-Lmstfy-Namespace": topic.namespace, "X-Lmstfy-Queue": topic.queue,
               "X-Lmstfy-Job-Id": message_id, "X-Lmstfy-Attempt": str(attempt),
               "X-Lmstfy-Max-Attempts": str(topic.max_attempts),
               **delivery.signed_headers(topic.signing_secret, message_id, sent_body)}
    if sent_body or topic.method != Topic.Method.GET:
        headers["Content-Type"] = ctype
    return delivery.Request(topic.callback_url, topic.method, sent_body, headers, topic.timeout_ms)


def attempt_record(job_id: str, attempt: int, response: delivery.Response, verdict: Verdict,
                   at_ms: int) -> dict[str, str]:
    next_at = "" if verdict.outcome != "retry" else iso_ms(at_ms + int(verdict.delay_s * 1000))
    return {"job_id": job_id, "attempt": str(attempt), "at": iso_ms(at_ms),
            "duration_ms": str(response.duration_ms), "status": "" if response.status is None else str(response.status),
            "error": response.error or "", "response": response.body[:RESPONSE_LOG_BYTES].decode("utf-8", "replace"),
            "outcome": verdict.outcome, "next_attempt_at": next_at}


def iso_ms(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds")


class TopicCache:
    """Active topics, reloaded at most every TOPIC_RELOAD_S so that topic and
    pause changes reach every notifier within 2 s."""

    def __init__(self) -> None:
        self._topics: list[TopicConfig] = []
        self._loaded_at = float("-inf")
        self._broken: set[int] = set()   # topics already reported as unusable

    def active(self) -> list[TopicConfig]:
        if time.monotonic() - self._loaded_at >= TOPIC_RELOAD_S:
            self._topics = [config for config in map(self._load, Topic.objects.select_related("namespace")
                                                     .filter(paused=False)) if config is not None]
            self._loaded_at = time.monotonic()
        return self._topics

    def _load(self, topic: Topic) -> TopicConfig | None:
        """The topic's config, or None (logged once) when a row that skipped
        validation cannot be used: one bad topic must not stop every other."""
        try:
            if topic.pool not in pools.configured_urls():
                raise pools.UnknownPool(topic.pool)
            config = TopicConfig.from_model(topic)
        except (ExpressionError, pools.UnknownPool) as exc:
            if topic.id not in self._broken:
                log.error("topic %s (%s/%s) skipped: %s: %s", topic.id, topic.namespace.name, topic.queue,
                          type(exc).__name__, exc)
            self._broken.add(topic.id)
            return None
        self._broken.discard(topic.id)
        return config


class Notifier:
    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads or settings.LMSTFY_NOTIFIER_THREADS
        self.executor = ThreadPoolExecutor(self.threads, thread_name_prefix="deliver")
        self.topics = TopicCache()
        self._lock = threading.Lock()
        self._busy: dict[int, int] = {}      # topic id -> deliveries running in this process
        self._seat_freed = threading.Event()
        self._engines: dict[str, Engine] = {}
        self._next_topic = 0

    # -- the unit of work ---------------------------------------------------------------
    def dispatch_ready(self) -> bool:
        """Lease ready jobs of active topics, as many as there are free seats, and
        hand each to the pool. Returns True if it leased any (call again now)."""
        topics = self.topics.active()
        if not topics:
            return False
        found = False
        start = self._next_topic % len(topics)
        self._next_topic += 1
        for topic in topics[start:] + topics[:start]:   # rotate: no topic always goes first
            seats = self._free_seats(topic, len(topics))
            if seats <= 0 or (seats < min(FETCH_FLOOR, topic.concurrency) and self._running(topic)):
                continue
            jobs = self.engine(topic.pool).consume(
                topic.namespace, [topic.queue], ttr_s=topic.lease_s, count=min(seats, FETCH_BATCH),
                max_inflight=topic.concurrency, rate_per_s=topic.rate_per_s, keep_tries=True).jobs
            for job in jobs:
                self._take_seat(topic)
                self.executor.submit(self._deliver_and_free_seat, topic, job)
            found = found or bool(jobs)
        return found

    def deliver_one(self, topic: TopicConfig, job: Job) -> bool:
        """Send one leased job and apply the outcome. Returns True on success."""
        attempt = job.deliveries
        engine = self.engine(topic.pool)
        if attempt > topic.max_attempts:   # e.g. max_attempts lowered, or crashes mid-delivery
            self._bury(topic, job, attempt, reason="attempts exhausted before sending")
            return False
        request = build_request(topic, job.id, job.body, content_type(job), attempt)
        started = now_ms()
        response = delivery.send(request)
        verdict = judge(topic, attempt, response)
        try:
            if verdict.outcome == "success":
                engine.ack(topic.namespace, topic.queue, job.id)
            elif verdict.outcome == "retry":
                engine.release(topic.namespace, topic.queue, job.id, delay_s=verdict.delay_s, give_try_back=False)
            else:
                self._bury(topic, job, attempt, reason=f"status {response.status}" if response.status == 410
                           else "attempts exhausted")
        except JobNotFound:
            log.info("job %s of topic %s was acked or removed during its delivery", job.id, topic.id)
        self.record_attempt(topic, attempt_record(job.id, attempt, response, verdict, started),
                            verdict.outcome, response.duration_ms)
        return verdict.outcome == "success"

    # -- helpers ----------------------------------------------------------------------------
    def engine(self, pool: str) -> Engine:
        if pool not in self._engines:
            self._engines[pool] = Engine(pool)
        return self._engines[pool]

    def record_attempt(self, topic: TopicConfig, record: dict[str, str], outcome: str, duration_ms: int) -> None:
        """The attempt log entry and the delivery metrics, in one round trip."""
        metrics.record_delivery(topic.id, topic.namespace, topic.queue, outcome, duration_ms, record,
                                settings.LMSTFY_ATTEMPT_LOG_MAX)

    def _running(self, topic: TopicConfig) -> bool:
        with self._lock:
            return self._busy.get(topic.id, 0) > 0

    def _bury(self, topic: TopicConfig, job: Job, attempt: int, reason: str) -> None:
        try:
            self.engine(topic.pool).bury(topic.namespace, topic.queue, job.id)
        except JobNotFound:
            return
        record_delivery_exhausted(topic, job.id, attempt, reason)

    def _deliver_and_free_seat(self, topic: TopicConfig, job: Job) -> None:
        try:
            self.deliver_one(topic, job)
        except Exception:
            # The lease brings the job back; a bug must not kill the delivery thread.
            log.exception("delivery of job %s (topic %s) failed unexpectedly", job.id, topic.id)
        finally:
            with self._lock:
                self._busy[topic.id] -= 1
            self._seat_freed.set()

    def busy(self) -> int:
        with self._lock:
            return sum(self._busy.values())

    def _free_seats(self, topic: TopicConfig, active_topics: int) -> int:
        """Seats this topic may fill now: within the pool, and, when other topics
        exist, at most half of it, so a slow endpoint cannot starve the rest."""
        with self._lock:
            used = sum(self._busy.values())
            mine = self._busy.get(topic.id, 0)
        share = self.threads if active_topics == 1 else max(1, self.threads // 2)
        return min(self.threads - used, share - mine, topic.concurrency - mine)

    def _take_seat(self, topic: TopicConfig) -> None:
        with self._lock:
            self._busy[topic.id] = self._busy.get(topic.id, 0) + 1

    def wait_for_work(self, timeout_s: float = IDLE_WAIT_S) -> None:
        """Sleep until a topic queue gets a ready job or a seat frees, at most `timeout_s`."""
        self._seat_freed.clear()
        if self.busy() >= self.threads:
            self._seat_freed.wait(timeout_s)
            return
        by_pool: dict[str, list[str]] = {}
        for topic in self.topics.active():
            channel = self.engine(topic.pool).ready_channel(topic.namespace, topic.queue)
            by_pool.setdefault(topic.pool, []).append(channel)
        if not by_pool:
            self._seat_freed.wait(timeout_s)
            return
        with contextlib.ExitStack() as stack:
            for pool, channels in by_pool.items():
                engine = self.engine(pool)
                stack.enter_context(wakeup.listener(pool, engine.client).waiting(channels, self._seat_freed))
            # Registered first, then looked once more: a job made ready in
            # between is found here rather than missed until the timeout.
            if not self.dispatch_ready():
                self._seat_freed.wait(timeout_s)

    def shutdown(self, grace_s: float) -> int:
        """Stop taking work; wait up to `grace_s` for running deliveries. Returns
        how many are still running (left to their leases)."""
        deadline = time.monotonic() + grace_s
        while self.busy() and time.monotonic() < deadline:
            self._seat_freed.wait(0.1)
            self._seat_freed.clear()
        left = self.busy()
        self.executor.shutdown(wait=left == 0, cancel_futures=True)
        return left


def record_delivery_exhausted(topic: TopicConfig, job_id: str, attempt: int, reason: str) -> None:
    """Dead-lettered after its last attempt: an alert event, and mail to the topic's list."""
    message = (f"job {job_id} of {topic.namespace}/{topic.queue} was dead-lettered after attempt "
               f"{attempt} of {topic.max_attempts} ({reason}); callback {topic.callback_url}")
    # Runs in a delivery thread: drop a connection the database has closed since
    # (a restart) rather than fail on it, and keep none open per thread after.
    close_old_connections()
    try:
        # A point event: resolved as it happens, so it never shows as "firing";
        # alert rules of kind delivery_exhausted count these and fire themselves.
        now = django_timezone.now()
        AlertEvent.objects.create(kind="delivery_exhausted", namespace=topic.namespace, queue=topic.queue,
                                  message=message, details={"topic": topic.id, "job_id": job_id, "attempt": attempt},
                                  fired_at=now, resolved_at=now)
    finally:
        if not db_connection.in_atomic_block:
            db_connection.close()
    log.warning("delivery exhausted: %s", message)
    if topic.alert_emails:
        try:
            send_mail(f"[lmstfy] delivery exhausted: {topic.namespace}/{topic.queue}", message,
                      settings.DEFAULT_FROM_EMAIL, list(topic.alert_emails))
        except Exception:
            log.exception("could not mail the delivery_exhausted alert of topic %s", topic.id)


def send_test_delivery(topic: Topic) -> dict[str, str]:
    """One delivery of a sample body to the topic's callback, with real headers
    and signature; publishes nothing. Logged like any attempt."""
    from queues import ulid

    config = TopicConfig.from_model(topic)
    message_id = "test_" + ulid.new_ulid()
    body = json.dumps({"test": True, "topic": topic.id, "namespace": config.namespace,
                       "queue": config.queue}).encode()
    started = now_ms()
    response = delivery.send(build_request(config, message_id, body, "application/json", 1))
    verdict = judge(config, 1, response)
    if verdict.outcome == "dead":  # a test never dead-letters anything
        verdict = Verdict("retry")
    record = attempt_record(message_id, 1, response, Verdict(verdict.outcome), started)
    Engine("default").log_attempt(topic.id, record, settings.LMSTFY_ATTEMPT_LOG_MAX)
    return record

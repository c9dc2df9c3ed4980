"""Alert rules (SPEC §6): conditions over pools, queues, deliveries, schedules
and logins, evaluated by the pumper, told by email and webhook when they start
and when they clear. The history is the AlertEvent table.

Kinds, and what `threshold` and `window_s` mean for each
--------------------------------------------------------
A rule breaches when its figure is strictly above `threshold`.

    redis_down             a pool does not answer PING             threshold, window unused
    backlog_above          ready jobs of a queue                   threshold: jobs
    deadletter_above       dead-lettered jobs of a queue           threshold: jobs
    delivery_exhausted     deliveries of a queue dead-lettered     threshold: count (0 = any) in window_s
                           after their last attempt (the
                           notifier's AlertEvents, kind
                           delivery_exhausted, rule null)
    delivery_failure_rate  share of a topic's attempts in          threshold: a fraction 0..1 (0.2 = 20 %)
                           window_s that were not a success
                           (outcome retry or dead; test
                           deliveries not counted; needs at
                           least one attempt)
    consumer_idle          ready > 0 and no consume for N minutes  threshold: minutes (paused queues never)
                           (since the queue's creation if it was
                           never consumed)
    schedule_missed        an enabled schedule's next_fire_at is   threshold: seconds
                           older than threshold (the scheduler
                           duty is not firing it)
    auth_failures_above    401s of the token authentication in     threshold: count; the window is counted
                           window_s                                in whole minutes (rounded up)

Scope: `namespace` (optional) and `queue_pattern` (an fnmatch glob; empty is
"*") select the queues, topics (by their queue) and schedules (by their queue)
a rule watches; redis_down and auth_failures_above are deployment-wide.

Subjects: one rule, many alerts
-------------------------------
A rule watches many things at once; each *subject* (a queue of a pool, a topic,
a schedule, a pool) fires and resolves on its own. Its key ("queue:default:ns/q")
is kept in AlertEvent.details["subject"], and a rule's open events (resolved_at
null) are its whole state: nothing else is stored.

One pass (evaluate_rules)
-------------------------
1. Close, without a message, the open events of disabled and deleted rules.
2. For each enabled rule, find the breaching subjects (one checker per kind).
3. A breaching subject with no open event fires: a new AlertEvent, then the
   rule's channels. Cooldown: not if an event of the same rule and subject fired
   less than cooldown_s ago (a flapping condition notifies at most once per
   cooldown; it fires again later if it still holds).
4. An open event whose subject no longer breaches resolves: resolved_at, then a
   resolution message on the same channels. A subject that could not be read this
   pass (its pool is down) stays as it is: unknown is not clear.

Channels
--------
- email: Django's mail settings (console backend by default), to `emails`;
- webhook: a JSON POST through delivery.send (timeouts, SSRF guard), body
      {"rule", "kind", "status": "firing" | "resolved", "message", "fired_at",
       "resolved_at", "details", "namespace", "queue", "event_id"}
  (times ISO 8601 UTC, resolved_at null while firing).
A failing channel is logged and noted in the event's details["notify_errors"];
it never stops the pass. Delivery is at most once: the event is written first.

Once per deployment
-------------------
Every pumper runs the duty (AlertDuty); a pass runs only in the one holding the
"alerts" lease, a database row claimed with a conditional UPDATE (take_lease).
In the database, not Redis, because the evaluator needs the database anyway
(rules, events) and must keep working — and report redis_down — while a Redis
pool, the default one included, is down. The holder renews the lease before each
rule; another pumper takes over LEASE_TTL after the holder stops renewing.
"""
from __future__ import annotations

import fnmatch
import json
import logging
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

import redis
from django.conf import settings
from django.core.mail import get_connection, send_mail
from django.db import DatabaseError
from django.db import connection as db_connection
from django.db.models import Count, Max, Q
from django.utils import timezone

from queues import delivery, inspect, pools
from queues.models import AlertEvent, AlertRule, Lease, Schedule, Topic

log = logging.getLogger(__name__)

Kind = AlertRule.Kind
FIRING, RESOLVED = "firing", "resolved"

EVALUATION_INTERVAL_S = 5.0
LEASE_NAME = "alerts"
LEASE_TTL = timedelta(seconds=30)   # renewed before each rule; a stalled holder is replaced after this
STATS_BATCH = 1000                  # queues per Redis pipeline
WEBHOOK_TIMEOUT_MS = 5000
EMAIL_TIMEOUT_S = 10.0
JOBS_LISTED = 10                    # job ids kept in a delivery_exhausted alert's details
SUBJECT_CHARS = 180                 # an email subject line stays readable
TEST_DELIVERY_PREFIX = "test_"      # notifier.send_test_delivery's message ids

# What a rule created without a threshold gets (the management API).
DEFAULT_THRESHOLDS: dict[str, float] = {
    Kind.REDIS_DOWN: 0, Kind.BACKLOG_ABOVE: 1000, Kind.DEADLETTER_ABOVE: 0, Kind.DELIVERY_EXHAUSTED: 0,
    Kind.DELIVERY_FAILURE_RATE: 0.5, Kind.CONSUMER_IDLE: 10, Kind.SCHEDULE_MISSED: 60,
    Kind.AUTH_FAILURES_ABOVE: 100,
}
THRESHOLD_UNITS: dict[str, str] = {
    Kind.REDIS_DOWN: "unused", Kind.BACKLOG_ABOVE: "ready jobs", Kind.DEADLETTER_ABOVE: "dead jobs",
    Kind.DELIVERY_EXHAUSTED: "exhausted deliveries in the window", Kind.DELIVERY_FAILURE_RATE:
    "share of failed attempts in the window (0..1)", Kind.CONSUMER_IDLE: "minutes without a consume",
    Kind.SCHEDULE_MISSED: "seconds late", Kind.AUTH_FAILURES_ABOVE: "401s in the window",
}


# -- what a checker finds ------------------------------------------------------------------
@dataclass(frozen=True)
class Breach:
    subject: str
    message: str
    namespace: str = ""
    queue: str = ""
    details: dict = field(default_factory=dict)


@dataclass
class Findings:
    breaches: dict[str, Breach] = field(default_factory=dict)
    # Subject key prefixes that could not be read this pass: their open events stay open.
    unknown: set[str] = field(default_factory=set)

    def add(self, breach: Breach) -> None:
        self.breaches[breach.subject] = breach

    def known(self, subject: str) -> bool:
        return not any(subject.startswith(prefix) for prefix in self.unknown)


class Snapshot:
    """What one pass reads from Redis, each at most once however many rules need it."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self.now_ms = int(now.timestamp() * 1000)
        self._pool_errors: dict[str, str | None] = {}
        self._stats: dict[str, list[inspect.QueueStats]] = {}
        self._activity: dict[str, list[inspect.ConsumerActivity]] = {}

    def pool_error(self, pool: str) -> str | None:
        if pool not in self._pool_errors:
            self._pool_errors[pool] = inspect.pool_error(pool)
        return self._pool_errors[pool]

    def queue_stats(self, pool: str) -> list[inspect.QueueStats]:
        if pool not in self._stats:
            self._stats[pool] = [stats for batch in _batches(inspect.queue_members(pool))
                                 for stats in inspect.many_queue_stats(pool, batch)]
        return self._stats[pool]

    def consumer_activity(self, pool: str) -> list[inspect.ConsumerActivity]:
        if pool not in self._activity:
            self._activity[pool] = [activity for batch in _batches(inspect.queue_members(pool))
                                    for activity in inspect.consumer_activity(pool, batch)]
        return self._activity[pool]


def _batches(queues: list[tuple[str, str]]) -> Iterator[list[tuple[str, str]]]:
    for start in range(0, len(queues), STATS_BATCH):
        yield queues[start:start + STATS_BATCH]


def in_scope(rule: AlertRule, namespace: str, queue: str) -> bool:
    if rule.namespace_id is not None and rule.namespace.name != namespace:
        return False
    return fnmatch.fnmatchcase(queue, rule.queue_pattern or "*")


def where(namespace: str, queue: str, pool: str = pools.DEFAULT_POOL) -> str:
    return f"{namespace}/{queue}" if pool == pools.DEFAULT_POOL else f"{namespace}/{queue} (pool {pool})"


def figure(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


# -- one checker per kind --------------------------------------------------------------------
def readable_pools(snapshot: Snapshot, findings: Findings, prefix: str) -> Iterator[str]:
    """The pools that answer; the others' subjects (prefix + pool) are unknown this pass."""
    for pool in pools.pool_names():
        if snapshot.pool_error(pool) is None:
            yield pool
        else:
            findings.unknown.add(f"{prefix}{pool}:")


def check_redis_down(rule: AlertRule, snapshot: Snapshot) -> Findings:
    findings = Findings()
    for pool in pools.pool_names():
        error = snapshot.pool_error(pool)
        if error is not None:
            findings.add(Breach(f"pool:{pool}", f"Redis pool {pool!r} is unreachable: {error}",
                                details={"pool": pool, "error": error}))
    return findings


def _check_queue_figure(rule: AlertRule, snapshot: Snapshot, figure_name: str, noun: str) -> Findings:
    findings = Findings()
    for pool in readable_pools(snapshot, findings, "queue:"):
        try:
            stats = snapshot.queue_stats(pool)
        except redis.RedisError:
            findings.unknown.add(f"queue:{pool}:")
            continue
        for queue in stats:
            value = getattr(queue, figure_name)
            if value > rule.threshold and in_scope(rule, queue.namespace, queue.queue):
                findings.add(Breach(
                    f"queue:{pool}:{queue.namespace}/{queue.queue}",
                    f"{where(queue.namespace, queue.queue, pool)} has {value} {noun} "
                    f"(threshold {figure(rule.threshold)})",
                    queue.namespace, queue.queue, {"pool": pool, figure_name: value, "threshold": rule.threshold}))
    return findings


def check_backlog_above(rule: AlertRule, snapshot: Snapshot) -> Findings:
    return _check_queue_figure(rule, snapshot, "ready", "ready jobs")


def check_deadletter_above(rule: AlertRule, snapshot: Snapshot) -> Findings:
    return _check_queue_figure(rule, snapshot, "deadletter", "dead-lettered jobs")


def check_consumer_idle(rule: AlertRule, snapshot: Snapshot) -> Findings:
    """Ready jobs waiting and no consume for `threshold` minutes. A paused queue is
    idle on purpose. A queue never consumed counts from its first publish."""
    findings = Findings()
    idle_after_ms = rule.threshold * 60_000
    for pool in readable_pools(snapshot, findings, "queue:"):
        try:
            activities = snapshot.consumer_activity(pool)
        except redis.RedisError:
            findings.unknown.add(f"queue:{pool}:")
            continue
        for queue in activities:
            since_ms = queue.last_consume_ms if queue.last_consume_ms is not None else queue.created_ms
            if queue.ready <= 0 or queue.paused or since_ms is None:
                continue
            idle_ms = snapshot.now_ms - since_ms
            if idle_ms < idle_after_ms or not in_scope(rule, queue.namespace, queue.queue):
                continue
            activity = (f"no consume for {idle_ms // 60_000} min" if queue.last_consume_ms is not None
                        else f"was never consumed (created {idle_ms // 60_000} min ago)")
            findings.add(Breach(
                f"queue:{pool}:{queue.namespace}/{queue.queue}",
                f"{where(queue.namespace, queue.queue, pool)} has {queue.ready} ready jobs and {activity} "
                f"(threshold {figure(rule.threshold)} min)",
                queue.namespace, queue.queue,
                {"pool": pool, "ready": queue.ready, "idle_s": idle_ms // 1000,
                 "last_consume_ms": queue.last_consume_ms, "threshold": rule.threshold}))
    return findings


def check_delivery_exhausted(rule: AlertRule, snapshot: Snapshot) -> Findings:
    """Counts the notifier's delivery_exhausted events (rule null) per queue in the window."""
    findings = Findings()
    occurrences = AlertEvent.objects.filter(
        rule__isnull=True, kind=Kind.DELIVERY_EXHAUSTED,
        fired_at__gt=snapshot.now - timedelta(seconds=rule.window_s), fired_at__lte=snapshot.now)
    if rule.namespace_id is not None:
        occurrences = occurrences.filter(namespace=rule.namespace.name)
    per_queue = occurrences.values("namespace", "queue").annotate(count=Count("id"), latest=Max("fired_at"))
    for row in per_queue:
        if row["count"] <= rule.threshold or not in_scope(rule, row["namespace"], row["queue"]):
            continue
        latest = list(occurrences.filter(namespace=row["namespace"], queue=row["queue"])
                      .order_by("-fired_at", "-id").values_list("details", flat=True)[:JOBS_LISTED])
        job_ids = [details.get("job_id") for details in latest if isinstance(details, dict) and details.get("job_id")]
        newest = f"; latest job {job_ids[0]}" if job_ids else ""
        findings.add(Breach(
            f"exhausted:{row['namespace']}/{row['queue']}",
            f"{row['count']} deliveries of {row['namespace']}/{row['queue']} were dead-lettered after their last "
            f"attempt in the last {rule.window_s} s (threshold {figure(rule.threshold)}){newest}",
            row["namespace"], row["queue"],
            {"count": row["count"], "job_ids": job_ids, "window_s": rule.window_s, "threshold": rule.threshold,
             "topic": latest[0].get("topic") if latest and isinstance(latest[0], dict) else None}))
    return findings


def check_delivery_failure_rate(rule: AlertRule, snapshot: Snapshot) -> Findings:
    """Share of each topic's attempts in the window that were not a success."""
    findings = Findings()
    topics = Topic.objects.select_related("namespace")
    if rule.namespace_id is not None:
        topics = topics.filter(namespace_id=rule.namespace_id)
    start_ms = snapshot.now_ms - rule.window_s * 1000
    for topic in topics:
        if not in_scope(rule, topic.namespace.name, topic.queue):
            continue
        try:   # every attempt log lives in the default pool (Notifier.record_attempt)
            records = inspect.attempts_between(topic.id, start_ms, snapshot.now_ms)
        except redis.RedisError:
            findings.unknown.add("topic:")
            return findings
        outcomes = [r.get("outcome") for r in records if not r.get("job_id", "").startswith(TEST_DELIVERY_PREFIX)]
        if not outcomes:
            continue
        failed = sum(1 for outcome in outcomes if outcome != "success")
        rate = failed / len(outcomes)
        if rate > rule.threshold:
            findings.add(Breach(
                f"topic:{topic.id}",
                f"{rate:.0%} of {len(outcomes)} delivery attempts of {topic.namespace.name}/{topic.queue} failed "
                f"in the last {rule.window_s} s (threshold {rule.threshold:.0%})",
                topic.namespace.name, topic.queue,
                {"topic": topic.id, "attempts": len(outcomes), "failed": failed, "rate": round(rate, 4),
                 "window_s": rule.window_s, "threshold": rule.threshold}))
    return findings


def check_schedule_missed(rule: AlertRule, snapshot: Snapshot) -> Findings:
    findings = Findings()
    late = Schedule.objects.filter(enabled=True, next_fire_at__lt=snapshot.now - timedelta(seconds=rule.threshold))
    if rule.namespace_id is not None:
        late = late.filter(namespace_id=rule.namespace_id)
    for schedule in late.select_related("namespace"):
        if not in_scope(rule, schedule.namespace.name, schedule.queue):
            continue
        late_s = int((snapshot.now - schedule.next_fire_at).total_seconds())
        findings.add(Breach(
            f"schedule:{schedule.id}",
            f"schedule {schedule.namespace.name}/{schedule.name} (→ {schedule.queue}) has not fired its tick of "
            f"{schedule.next_fire_at:%Y-%m-%d %H:%M:%S} UTC: {late_s} s late (threshold {figure(rule.threshold)} s)",
            schedule.namespace.name, schedule.queue,
            {"schedule": schedule.id, "next_fire_at": schedule.next_fire_at.isoformat(), "late_s": late_s,
             "threshold": rule.threshold}))
    return findings


def check_auth_failures_above(rule: AlertRule, snapshot: Snapshot) -> Findings:
    """401s counted per minute (engine.count_auth_failure): the window is whole minutes."""
    findings = Findings()
    minutes = max(1, math.ceil(rule.window_s / 60))
    try:
        count = inspect.auth_failures_in_last(minutes, now=snapshot.now_ms)
    except redis.RedisError:
        findings.unknown.add("auth")
        return findings
    if count > rule.threshold:
        findings.add(Breach("auth", f"{count} failed token authentications (401) in the last {minutes} min "
                                    f"(threshold {figure(rule.threshold)})",
                            details={"count": count, "minutes": minutes, "threshold": rule.threshold}))
    return findings


CHECKERS: dict[str, Callable[[AlertRule, Snapshot], Findings]] = {
    Kind.REDIS_DOWN: check_redis_down,
    Kind.BACKLOG_ABOVE: check_backlog_above,
    Kind.DEADLETTER_ABOVE: check_deadletter_above,
    Kind.DELIVERY_EXHAUSTED: check_delivery_exhausted,
    Kind.DELIVERY_FAILURE_RATE: check_delivery_failure_rate,
    Kind.CONSUMER_IDLE: check_consumer_idle,
    Kind.SCHEDULE_MISSED: check_schedule_missed,
    Kind.AUTH_FAILURES_ABOVE: check_auth_failures_above,
}


# -- a pass ------------------------------------------------------------------------------------
def evaluate_rules(now: datetime | None = None, still_leader: Callable[[], bool] | None = None) -> int:
    """Evaluate every enabled rule at `now`; return how many alerts fired or resolved.
    `still_leader` (renewing the lease) is asked before each rule; a pass that lost
    the lease stops. One rule that fails is logged and does not stop the others."""
    now = now or timezone.now()
    close_events_of_inactive_rules(now)
    snapshot = Snapshot(now)
    changes = 0
    for rule in AlertRule.objects.filter(enabled=True).select_related("namespace"):
        if still_leader is not None and not still_leader():
            log.warning("alerts: lease lost during a pass; another pumper evaluates the rules now")
            break
        try:
            changes += evaluate_rule(rule, snapshot)
        except DatabaseError:
            raise
        except Exception:
            log.exception("alert rule %r (%s) could not be evaluated", rule.name, rule.kind)
    return changes


def evaluate_rule(rule: AlertRule, snapshot: Snapshot) -> int:
    """Steps 2-4 of the module docstring for one rule; returns fires + resolutions."""
    checker = CHECKERS.get(rule.kind)
    if checker is None:
        log.warning("alert rule %r has an unknown kind %r", rule.name, rule.kind)
        return 0
    findings = checker(rule, snapshot)
    now = snapshot.now
    open_events = {subject_of(event): event for event in rule.events.filter(resolved_at__isnull=True)}
    cooling = recently_fired_subjects(rule, now)
    changes = 0
    for subject, breach in findings.breaches.items():
        if subject not in open_events and subject not in cooling:
            fire(rule, breach, now)
            changes += 1
    for subject, event in open_events.items():
        if subject not in findings.breaches and findings.known(subject) and resolve(rule, event, now):
            changes += 1
    record_rule_state(rule, now, notified=changes > 0)
    return changes


def subject_of(event: AlertEvent) -> str:
    return (event.details or {}).get("subject", "") if isinstance(event.details, dict) else ""


def recently_fired_subjects(rule: AlertRule, now: datetime) -> set[str]:
    """Subjects of the rule that fired less than cooldown_s ago: they do not fire again yet."""
    if rule.cooldown_s <= 0:
        return set()
    recent = rule.events.filter(fired_at__gt=now - timedelta(seconds=rule.cooldown_s), fired_at__lte=now)
    return {subject_of(event) for event in recent.only("details")}


def fire(rule: AlertRule, breach: Breach, now: datetime) -> AlertEvent:
    event = AlertEvent.objects.create(rule=rule, kind=rule.kind, namespace=breach.namespace, queue=breach.queue,
                                      message=breach.message, details={**breach.details, "subject": breach.subject},
                                      fired_at=now)
    log.warning("alert firing: %s: %s", rule.name, breach.message)
    notify(rule, event, FIRING)
    return event


def resolve(rule: AlertRule, event: AlertEvent, now: datetime) -> bool:
    """Close the event and send the resolution, unless it was closed meanwhile
    (the conditional UPDATE: a pumper that lost the lease mid-pass resolves nothing twice)."""
    if not AlertEvent.objects.filter(pk=event.pk, resolved_at__isnull=True).update(resolved_at=now):
        return False
    event.resolved_at = now
    log.info("alert resolved: %s: %s", rule.name, event.message)
    notify(rule, event, RESOLVED)
    return True


def record_rule_state(rule: AlertRule, now: datetime, notified: bool) -> None:
    """An UPDATE, not rule.save(): an edit saved meanwhile is not overwritten."""
    firing = rule.events.filter(resolved_at__isnull=True).exists()
    changes: dict = {"firing": firing} if firing != rule.firing else {}
    if notified:
        changes["last_notified_at"] = now
    if changes:
        AlertRule.objects.filter(pk=rule.pk).update(**changes)


def close_events_of_inactive_rules(now: datetime) -> int:
    """Disabled or deleted rules fire no more and send no resolution: their open
    events are closed silently. (The notifier's own delivery_exhausted events have
    no subject and are left alone.)"""
    closed = (AlertEvent.objects.filter(resolved_at__isnull=True)
              .filter(Q(rule__enabled=False) | Q(rule__isnull=True, details__has_key="subject"))
              .update(resolved_at=now))
    AlertRule.objects.filter(enabled=False, firing=True).update(firing=False)
    return closed


# -- channels ---------------------------------------------------------------------------------
def iso(moment: datetime | None) -> str | None:
    return moment.astimezone(dt_timezone.utc).isoformat().replace("+00:00", "Z") if moment else None


def alert_payload(rule: AlertRule, event: AlertEvent, status: str) -> dict:
    """The webhook's JSON body (the module docstring documents it)."""
    return {"rule": rule.name, "kind": event.kind, "status": status, "message": status_message(event, status),
            "fired_at": iso(event.fired_at), "resolved_at": iso(event.resolved_at),
            "details": event.details, "namespace": event.namespace, "queue": event.queue, "event_id": event.id}


def status_message(event: AlertEvent, status: str) -> str:
    if status == FIRING or event.resolved_at is None:
        return event.message
    minutes = max(0, int((event.resolved_at - event.fired_at).total_seconds() // 60))
    return f"resolved after {minutes} min; it fired with: {event.message}"


def notify(rule: AlertRule, event: AlertEvent, status: str) -> list[str]:
    """Tell the rule's channels; return (and note on the event) what failed."""
    payload = alert_payload(rule, event, status)
    errors = []
    if rule.emails:
        try:
            send_alert_mail(rule, event, status, payload)
        except Exception as exc:  # SMTP down, bad settings: logged, the pass goes on
            log.exception("alert %s: the %s mail to %s could not be sent", rule.name, status, rule.emails)
            errors.append(f"{status} email: {type(exc).__name__}: {exc}")
    if rule.webhook_url:
        error = post_webhook(rule.webhook_url, event, status, payload)
        if error:
            log.warning("alert %s: the %s webhook to %s failed: %s", rule.name, status, rule.webhook_url, error)
            errors.append(f"{status} webhook: {error}")
    if errors:
        details = {**(event.details or {}), "notify_errors": [*(event.details or {}).get("notify_errors", []),
                                                              *errors]}
        AlertEvent.objects.filter(pk=event.pk).update(details=details)
        event.details = details
    return errors


def send_alert_mail(rule: AlertRule, event: AlertEvent, status: str, payload: dict) -> None:
    headline = " ".join(payload["message"].split())
    subject = f"[lmstfy] {status.upper()} {rule.name}: {headline}"
    if len(subject) > SUBJECT_CHARS:
        subject = subject[:SUBJECT_CHARS - 1] + "…"
    scope = rule.namespace.name if rule.namespace_id is not None else "all namespaces"
    body = "\n".join([
        payload["message"], "",
        f"Rule:      {rule.name} ({rule.kind})",
        f"Scope:     {scope}, queues {rule.queue_pattern or '*'}",
        f"Status:    {status}",
        f"Fired at:  {payload['fired_at']}",
        f"Resolved:  {payload['resolved_at'] or '-'}",
        "Details:", json.dumps(event.details, indent=2, sort_keys=True, default=str), "",
    ])
    send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, list(rule.emails),
              connection=get_connection(timeout=EMAIL_TIMEOUT_S))


def post_webhook(url: str, event: AlertEvent, status: str, payload: dict) -> str | None:
    """POST the payload; return an error text, or None when a 2xx came back."""
    body = json.dumps(payload, default=str).encode()
    headers = {"Content-Type": "application/json",
               # Receivers dedupe on this: one per event and status.
               "X-Lmstfy-Alert-Id": f"{event.id}-{status}"}
    try:
        response = delivery.send(delivery.Request(url, "POST", body, headers, WEBHOOK_TIMEOUT_MS))
    except Exception as exc:  # send() never raises; a bug in it still must not stop the pass
        return f"{type(exc).__name__}: {exc}"
    if response.error is not None:
        return response.error
    if response.status is None or not 200 <= response.status < 300:
        return f"status {response.status}"
    return None


# -- once per deployment: the lease -------------------------------------------------------------
def take_lease(name: str, owner: str, now: datetime, ttl: timedelta = LEASE_TTL) -> bool:
    """Hold the lease `name` until now + ttl if it is free, expired or already ours.

    1. Make sure its row exists (a unique name: racing creators end up with one row).
    2. The claim is one conditional UPDATE (no lock held): 1 row means ours; 0 means
       another pumper holds it. Two racing claims: PostgreSQL makes the second wait
       for the first's row lock, then re-checks the WHERE on the row the first wrote,
       which no longer matches."""
    Lease.objects.get_or_create(name=name, defaults={"expires_at": now})
    claimed = (Lease.objects.filter(Q(owner=owner) | Q(expires_at__lte=now), name=name)
               .update(owner=owner, expires_at=now + ttl))
    return claimed == 1


def release_lease(name: str, owner: str, now: datetime | None = None) -> None:
    """Give the lease up (a pumper stopping), so another takes over at once."""
    Lease.objects.filter(name=name, owner=owner).update(owner="", expires_at=now or timezone.now())


def default_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class AlertDuty:
    """The pumper's alert duty. `tick()` starts a pass every `interval_s`, in a thread
    of its own: a slow SMTP server or webhook must not hold up the timers, which make
    a due job ready within a second. A pass evaluates only where the lease is held."""

    def __init__(self, interval_s: float = EVALUATION_INTERVAL_S, owner: str | None = None) -> None:
        self.interval_s = interval_s
        self.owner = owner or default_owner()
        self._thread: threading.Thread | None = None
        self._next_pass = 0.0
        self._database_down = False

    def run_once(self, now: datetime | None = None) -> int | None:
        """Take (or renew) the lease and evaluate every rule. Returns fires +
        resolutions, or None when another pumper holds the lease."""
        now = now or timezone.now()
        if not take_lease(LEASE_NAME, self.owner, now):
            return None
        started = time.monotonic()

        def still_leader() -> bool:  # on the pass's own clock, so an injected `now` stays consistent
            return take_lease(LEASE_NAME, self.owner, now + timedelta(seconds=time.monotonic() - started))

        return evaluate_rules(now, still_leader)

    def tick(self) -> bool:
        """Start a pass in the background if one is due and none is running."""
        if self._thread is not None and self._thread.is_alive():
            return False
        if time.monotonic() < self._next_pass:
            return False
        self._next_pass = time.monotonic() + self.interval_s
        self._thread = threading.Thread(target=self._pass_in_thread, name="alerts", daemon=True)
        self._thread.start()
        return True

    def run_logged(self) -> int | None:
        """run_once() for the pumper: failures are logged, never raised (a database
        outage once, not every pass); the timers must go on."""
        try:
            changes = self.run_once()
        except DatabaseError as exc:
            if not self._database_down:
                log.warning("alerts: database unavailable (%s); rules wait until it is back", exc)
            self._database_down = True
            return None
        except Exception:
            log.exception("alerts: the evaluation pass failed")
            return None
        if self._database_down:
            log.info("alerts: database is back")
        self._database_down = False
        return changes

    def _pass_in_thread(self) -> None:
        try:
            self.run_logged()
        finally:
            db_connection.close()  # this thread's own connection; none left open between passes

    def stop(self, timeout_s: float = 10.0) -> None:
        """Wait for a running pass, then give the lease up."""
        if self._thread is not None:
            self._thread.join(timeout_s)
        try:
            release_lease(LEASE_NAME, self.owner)
        except DatabaseError as exc:
            log.warning("alerts: could not release the lease (%s); it expires by itself", exc)

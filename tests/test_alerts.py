"""queues/alerts.py: each kind fires once and resolves once, honouring the
cooldown, under a controlled clock (`now` is passed in); email through Django's
locmem backend, webhooks to a real local receiver (tests/receiver.py), redis_down
against a throwaway redis-server the test kills, and the lease that makes two
evaluators notify once."""
from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta

import pytest
from django.core import mail
from django.db import connection
from django.utils import timezone

from queues import alerts, pools
from queues.engine import Engine
from queues.models import AlertEvent, AlertRule, Namespace, Schedule
from queues.notifier import Notifier
from queues.pumper import Pumper
from tests.push_helpers import deliver_ready, make_topic, wait_idle
from tests.receiver import Receiver, Reply
from tests.testutil import ScratchRedis

pytestmark = pytest.mark.django_db
HOOK = "/alerts"


@pytest.fixture(autouse=True)
def mailbox(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    mail.outbox = []
    return mail.outbox


@pytest.fixture
def channels(private_callbacks, receiver: Receiver) -> dict:
    """The channel fields of a rule: one address and the local receiver's /alerts."""
    return {"emails": ["oncall@example.com"], "webhook_url": receiver.url(HOOK)}


@pytest.fixture
def t0() -> datetime:
    return timezone.now().replace(microsecond=0)


def make_rule(kind: str, channels: dict, **fields) -> AlertRule:
    return AlertRule.objects.create(name=fields.pop("name", kind), kind=kind, cooldown_s=fields.pop("cooldown_s", 60),
                                    **channels, **fields)


def payloads(receiver: Receiver) -> list[dict]:
    return [json.loads(request.body) for request in receiver.received(HOOK)]


def statuses(receiver: Receiver) -> list[str]:
    return [payload["status"] for payload in payloads(receiver)]


def ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def later(moment: datetime, **delta) -> datetime:
    return moment + timedelta(**delta)


# -- backlog_above: the whole life of an alert ---------------------------------------------------
def test_backlog_above_fires_once_and_resolves_once_with_mail_and_webhook(channels, receiver, engine, t0):
    rule = make_rule("backlog_above", channels, namespace=Namespace.objects.create(name="ns"), queue_pattern="q",
                     threshold=2)
    engine.publish("ns", "q", [b"1", b"2", b"3"])

    assert alerts.evaluate_rules(t0) == 1
    assert alerts.evaluate_rules(later(t0, seconds=5)) == 0    # still firing: told once
    engine.destroy("ns", "q")
    assert alerts.evaluate_rules(later(t0, seconds=10)) == 1
    assert alerts.evaluate_rules(later(t0, seconds=15)) == 0

    [event] = AlertEvent.objects.all()
    assert (event.rule, event.kind, event.namespace, event.queue) == (rule, "backlog_above", "ns", "q")
    assert event.message == "ns/q has 3 ready jobs (threshold 2)"
    assert (event.fired_at, event.resolved_at) == (t0, later(t0, seconds=10))
    assert event.details["ready"] == 3 and event.details["pool"] == "default"

    assert statuses(receiver) == ["firing", "resolved"]
    firing, resolved = payloads(receiver)
    assert set(firing) >= {"rule", "kind", "status", "message", "fired_at", "resolved_at", "details"}
    assert firing["rule"] == "backlog_above" and firing["kind"] == "backlog_above"
    assert firing["message"] == event.message and firing["resolved_at"] is None
    assert firing["fired_at"] == t0.isoformat().replace("+00:00", "Z")
    assert firing["details"]["ready"] == 3
    assert resolved["resolved_at"] == later(t0, seconds=10).isoformat().replace("+00:00", "Z")
    assert "resolved after 0 min" in resolved["message"] and event.message in resolved["message"]
    assert receiver.received(HOOK)[0].header("Content-Type") == "application/json"

    fired_mail, resolved_mail = mail.outbox
    assert fired_mail.to == ["oncall@example.com"]
    assert fired_mail.subject == "[lmstfy] FIRING backlog_above: ns/q has 3 ready jobs (threshold 2)"
    assert "Rule:      backlog_above (backlog_above)" in fired_mail.body
    assert "Scope:     ns, queues q" in fired_mail.body
    assert '"ready": 3' in fired_mail.body
    assert resolved_mail.subject.startswith("[lmstfy] RESOLVED backlog_above: resolved after 0 min")

    rule.refresh_from_db()
    assert rule.firing is False and rule.last_notified_at == later(t0, seconds=10)


def test_a_condition_back_within_the_cooldown_is_told_again_only_after_it(channels, receiver, engine, t0):
    make_rule("backlog_above", channels, threshold=0, cooldown_s=60)
    engine.publish("ns", "q", [b"1"])
    assert alerts.evaluate_rules(t0) == 1
    engine.destroy("ns", "q")
    assert alerts.evaluate_rules(later(t0, seconds=10)) == 1      # resolved
    engine.publish("ns", "q", [b"again"])

    assert alerts.evaluate_rules(later(t0, seconds=20)) == 0      # back, but 20 s < cooldown
    assert alerts.evaluate_rules(later(t0, seconds=59)) == 0
    assert alerts.evaluate_rules(later(t0, seconds=61)) == 1      # cooldown over, still true: fires

    assert statuses(receiver) == ["firing", "resolved", "firing"]
    assert len(mail.outbox) == 3
    assert AlertEvent.objects.filter(resolved_at__isnull=True).count() == 1


def test_each_queue_in_scope_fires_and_resolves_on_its_own(channels, receiver, engine, t0):
    ns = Namespace.objects.create(name="shop")
    make_rule("backlog_above", channels, namespace=ns, queue_pattern="orders-*", threshold=0)
    engine.publish("shop", "orders-eu", [b"1"])
    engine.publish("shop", "orders-us", [b"1"])
    engine.publish("shop", "invoices", [b"1"])        # pattern does not match
    engine.publish("other", "orders-eu", [b"1"])      # namespace does not match

    assert alerts.evaluate_rules(t0) == 2
    engine.destroy("shop", "orders-eu")
    assert alerts.evaluate_rules(later(t0, seconds=5)) == 1

    firing = AlertEvent.objects.get(resolved_at__isnull=True)
    assert (firing.namespace, firing.queue) == ("shop", "orders-us")
    assert sorted((p["queue"], p["status"]) for p in payloads(receiver)) == [
        ("orders-eu", "firing"), ("orders-eu", "resolved"), ("orders-us", "firing")]


# -- deadletter_above -----------------------------------------------------------------------------
def test_deadletter_above_fires_when_jobs_are_dead_lettered_and_resolves_when_they_are_respawned(
        channels, receiver, engine, t0):
    make_rule("deadletter_above", channels, threshold=1)
    for _ in range(2):
        job_id = engine.publish("ns", "q", [b"x"]).job_ids[0]
        engine.consume("ns", ["q"], ttr_s=30)
        engine.bury("ns", "q", job_id)

    assert alerts.evaluate_rules(t0) == 1
    assert AlertEvent.objects.get().message == "ns/q has 2 dead-lettered jobs (threshold 1)"
    engine.respawn("ns", "q", limit=2, ttl_s=60)
    assert alerts.evaluate_rules(later(t0, seconds=5)) == 1
    assert statuses(receiver) == ["firing", "resolved"]


# -- delivery_exhausted -----------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_delivery_exhausted_from_the_notifier_reaches_a_matching_rules_channels(channels, receiver, engine):
    ns = Namespace.objects.create(name="ns")
    make_topic(ns, receiver, queue="payments", path="/callback", max_attempts=1)
    receiver.always(Reply(status=500), path="/callback")
    make_rule("delivery_exhausted", channels, name="payments exhausted", queue_pattern="pay*", window_s=300)
    make_rule("delivery_exhausted", {"emails": ["other-team@example.com"]}, name="elsewhere",
              queue_pattern="invoices")
    job_id = engine.publish("ns", "payments", [b"{}"]).job_ids[0]
    notifier = Notifier(threads=2)
    try:
        assert deliver_ready(notifier)
        wait_idle(notifier)
    finally:
        notifier.shutdown(5)
    # (Filtered by queue: notifier threads of non-transactional tests elsewhere commit their records.)
    [record] = AlertEvent.objects.filter(rule__isnull=True, queue="payments")
    assert record.kind == "delivery_exhausted"
    now = timezone.now()

    assert alerts.evaluate_rules(now) == 1

    [firing] = payloads(receiver)
    assert firing["rule"] == "payments exhausted" and firing["kind"] == "delivery_exhausted"
    assert firing["status"] == "firing" and (firing["namespace"], firing["queue"]) == ("ns", "payments")
    assert firing["details"]["count"] == 1 and firing["details"]["job_ids"] == [job_id]
    assert job_id in firing["message"]
    [message] = mail.outbox                       # the "elsewhere" rule does not match
    assert message.to == ["oncall@example.com"] and "dead-lettered" in message.subject

    assert alerts.evaluate_rules(later(now, seconds=60)) == 0       # still in the window
    assert alerts.evaluate_rules(later(now, seconds=301)) == 1      # out of it: resolved
    assert statuses(receiver) == ["firing", "resolved"]


def test_delivery_exhausted_fires_above_its_count_in_the_window(channels, receiver, t0):
    make_rule("delivery_exhausted", channels, queue_pattern="batch", threshold=2, window_s=60)

    def exhausted(at: datetime) -> None:
        AlertEvent.objects.create(kind="delivery_exhausted", namespace="ns", queue="batch", message="dead",
                                  details={"job_id": f"job-{at.timestamp()}", "topic": 1}, fired_at=at)

    exhausted(t0)
    exhausted(later(t0, seconds=1))
    assert alerts.evaluate_rules(later(t0, seconds=2)) == 0        # 2 is not above 2
    exhausted(later(t0, seconds=3))
    assert alerts.evaluate_rules(later(t0, seconds=4)) == 1
    assert AlertEvent.objects.get(rule__isnull=False).details["count"] == 3
    assert alerts.evaluate_rules(later(t0, seconds=61)) == 1       # only the last one left in the window
    assert statuses(receiver) == ["firing", "resolved"]


# -- delivery_failure_rate --------------------------------------------------------------------------
def log_attempts(engine: Engine, topic_id: int, outcomes: list[str], job_prefix: str = "job") -> None:
    for i, outcome in enumerate(outcomes):
        engine.log_attempt(topic_id, {"job_id": f"{job_prefix}{i}", "attempt": "1", "outcome": outcome}, 1000)


def test_delivery_failure_rate_fires_above_the_fraction_and_resolves_when_the_window_passes(
        channels, receiver, engine):
    ns = Namespace.objects.create(name="ns")
    topic = make_topic(ns, receiver, queue="hooks")
    quiet = make_topic(ns, receiver, queue="quiet")
    make_rule("delivery_failure_rate", channels, threshold=0.5, window_s=60)
    log_attempts(engine, topic.id, ["retry", "retry", "dead", "success"])      # 75 % failed
    log_attempts(engine, quiet.id, ["retry", "retry"], job_prefix="test_")     # test deliveries only
    now = timezone.now() + timedelta(seconds=1)

    assert alerts.evaluate_rules(now) == 1
    event = AlertEvent.objects.get()
    assert event.message == "75% of 4 delivery attempts of ns/hooks failed in the last 60 s (threshold 50%)"
    assert event.details["rate"] == 0.75 and event.details["topic"] == topic.id
    assert alerts.evaluate_rules(later(now, seconds=30)) == 0
    assert alerts.evaluate_rules(later(now, seconds=62)) == 1       # no attempt in the window any more
    assert statuses(receiver) == ["firing", "resolved"]


def test_a_failure_rate_at_the_threshold_does_not_fire(channels, receiver, engine):
    topic = make_topic(Namespace.objects.create(name="ns"), receiver, queue="hooks")
    make_rule("delivery_failure_rate", channels, threshold=0.5, window_s=60)
    log_attempts(engine, topic.id, ["retry", "success"])

    assert alerts.evaluate_rules(timezone.now() + timedelta(seconds=1)) == 0


# -- consumer_idle ------------------------------------------------------------------------------------
def test_consumer_idle_fires_for_ready_jobs_nobody_consumes_and_resolves_after_a_consume(
        channels, receiver, engine, t0):
    make_rule("consumer_idle", channels, threshold=10)                # minutes
    engine.publish("ns", "q", [b"1", b"2"], now=ms(t0))
    engine.publish("ns", "held", [b"1"], now=ms(t0))
    engine.pause("ns", "held", by="test")                            # idle on purpose

    assert alerts.evaluate_rules(later(t0, minutes=9)) == 0
    assert alerts.evaluate_rules(later(t0, minutes=11)) == 1
    event = AlertEvent.objects.get()
    assert (event.namespace, event.queue) == ("ns", "q")
    assert event.message == "ns/q has 2 ready jobs and was never consumed (created 11 min ago) (threshold 10 min)"

    engine.consume("ns", ["q"], ttr_s=30, now=ms(later(t0, minutes=12)))
    assert alerts.evaluate_rules(later(t0, minutes=12)) == 1          # consumed: resolved
    assert alerts.evaluate_rules(later(t0, minutes=21)) == 0          # 9 min since the consume
    assert alerts.evaluate_rules(later(t0, minutes=23)) == 1          # 11 min: idle again
    assert AlertEvent.objects.filter(resolved_at__isnull=True).get().message.endswith(
        "has 1 ready jobs and no consume for 11 min (threshold 10 min)")
    assert statuses(receiver) == ["firing", "resolved", "firing"]


# -- schedule_missed ----------------------------------------------------------------------------------
def test_schedule_missed_fires_when_a_tick_is_late_and_resolves_once_it_fired(channels, receiver, namespace, t0):
    make_rule("schedule_missed", channels, threshold=60)              # seconds
    schedule = Schedule.objects.create(namespace=namespace, name="nightly", queue="reports", spec="@every 1m")
    Schedule.objects.filter(pk=schedule.pk).update(next_fire_at=later(t0, seconds=-30))
    Schedule.objects.create(namespace=namespace, name="off", queue="reports", spec="@every 1m", enabled=False)

    assert alerts.evaluate_rules(t0) == 0                             # 30 s late: within the threshold
    assert alerts.evaluate_rules(later(t0, seconds=31)) == 1          # 61 s late
    event = AlertEvent.objects.get()
    assert event.message.startswith("schedule ns/nightly (→ reports) has not fired its tick of")
    assert "61 s late (threshold 60 s)" in event.message
    Schedule.objects.filter(pk=schedule.pk).update(next_fire_at=later(t0, seconds=90))   # a scheduler fired it
    assert alerts.evaluate_rules(later(t0, seconds=35)) == 1
    assert statuses(receiver) == ["firing", "resolved"]


# -- auth_failures_above ------------------------------------------------------------------------------
def test_auth_failures_above_fires_on_401s_in_the_window_and_resolves_after_it(channels, receiver, engine, t0):
    make_rule("auth_failures_above", channels, threshold=3, window_s=120)
    for _ in range(3):
        engine.count_auth_failure("unknown token", now=ms(t0))

    assert alerts.evaluate_rules(t0) == 0                             # 3 is not above 3
    engine.count_auth_failure("revoked token", now=ms(t0))
    assert alerts.evaluate_rules(t0) == 1
    assert AlertEvent.objects.get().message == "4 failed token authentications (401) in the last 2 min (threshold 3)"
    assert alerts.evaluate_rules(later(t0, minutes=1)) == 0           # still in the 2-minute window
    assert alerts.evaluate_rules(later(t0, minutes=3)) == 1
    assert statuses(receiver) == ["firing", "resolved"]


# -- redis_down -------------------------------------------------------------------------------------
@pytest.fixture
def scratch_pool(scratch_redis: ScratchRedis, settings):
    """A second pool, "scratch", on a throwaway redis-server the test may kill."""
    settings.LMSTFY_POOLS = {**pools.configured_urls(), "scratch": scratch_redis.url}
    pools.reset_clients()
    yield scratch_redis
    pools.reset_clients()


def test_redis_down_fires_when_a_pool_stops_answering_and_resolves_when_it_is_back(
        channels, receiver, scratch_pool, t0):
    make_rule("redis_down", channels)
    backlog = make_rule("backlog_above", channels, name="scratch backlog", threshold=0)
    Engine("scratch").publish("ns", "q", [b"1"])
    assert alerts.evaluate_rules(t0) == 1                             # the backlog on scratch
    scratch_pool.kill()

    assert alerts.evaluate_rules(later(t0, seconds=5)) == 1
    down = AlertEvent.objects.get(kind="redis_down")
    assert down.message.startswith("Redis pool 'scratch' is unreachable: ")
    assert down.details["pool"] == "scratch"
    # Unknown is not clear: the backlog alert of the unreachable pool stays open.
    assert AlertEvent.objects.get(rule=backlog).resolved_at is None

    scratch_pool.start()                                              # same port; AOF kept the job
    assert alerts.evaluate_rules(later(t0, seconds=10)) == 1
    down.refresh_from_db()
    assert down.resolved_at == later(t0, seconds=10)
    assert AlertEvent.objects.get(rule=backlog).resolved_at is None
    redis_down_statuses = [p["status"] for p in payloads(receiver) if p["kind"] == "redis_down"]
    assert redis_down_statuses == ["firing", "resolved"]


# -- channels -------------------------------------------------------------------------------------
def test_a_failing_channel_is_noted_and_does_not_stop_the_other_rules(private_callbacks, settings, receiver,
                                                                       engine, t0):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", 9                   # nothing listens there
    receiver.always(Reply(status=500), path="/broken")
    make_rule("backlog_above", {"emails": ["ops@example.com"], "webhook_url": receiver.url("/broken")},
              name="a broken one", threshold=0)
    make_rule("backlog_above", {"webhook_url": receiver.url(HOOK)}, name="b working one", threshold=0)
    engine.publish("ns", "q", [b"1"])

    assert alerts.evaluate_rules(t0) == 2

    broken = AlertEvent.objects.get(rule__name="a broken one")
    errors = broken.details["notify_errors"]
    assert any(error.startswith("firing email: ") for error in errors)
    assert "firing webhook: status 500" in errors
    assert [p["rule"] for p in payloads(receiver)] == ["b working one"]


def test_a_webhook_to_a_private_address_is_refused_at_send_time_too(settings, receiver, engine, t0):
    rule = make_rule("backlog_above", {"webhook_url": receiver.url(HOOK)}, threshold=0)  # saved without validation
    settings.LMSTFY_ALLOW_PRIVATE_CALLBACKS = False
    engine.publish("ns", "q", [b"1"])

    assert alerts.evaluate_rules(t0) == 1

    assert receiver.received() == []
    assert AlertEvent.objects.get(rule=rule).details["notify_errors"] == ["firing webhook: blocked_address"]


def test_disabling_a_rule_closes_its_alerts_without_a_message(channels, receiver, engine, t0):
    rule = make_rule("backlog_above", channels, threshold=0)
    engine.publish("ns", "q", [b"1"])
    assert alerts.evaluate_rules(t0) == 1
    AlertRule.objects.filter(pk=rule.pk).update(enabled=False)

    assert alerts.evaluate_rules(later(t0, seconds=5)) == 0

    assert AlertEvent.objects.get().resolved_at == later(t0, seconds=5)
    assert statuses(receiver) == ["firing"]
    rule.refresh_from_db()
    assert rule.firing is False


def test_a_deleted_rules_open_alerts_are_closed(channels, receiver, engine, t0):
    rule = make_rule("backlog_above", channels, threshold=0)
    engine.publish("ns", "q", [b"1"])
    alerts.evaluate_rules(t0)
    rule.delete()

    alerts.evaluate_rules(later(t0, seconds=5))

    assert AlertEvent.objects.get().resolved_at == later(t0, seconds=5)


def test_a_rule_without_channels_still_keeps_history(engine, t0):
    make_rule("backlog_above", {}, threshold=0)
    engine.publish("ns", "q", [b"1"])

    assert alerts.evaluate_rules(t0) == 1
    assert AlertEvent.objects.get().rule.name == "backlog_above"
    assert mail.outbox == []


# -- once per deployment --------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_two_evaluators_at_once_notify_once(channels, receiver, engine, t0):
    make_rule("backlog_above", channels, threshold=0)
    engine.publish("ns", "q", [b"1"])
    duties = [alerts.AlertDuty(owner="pumper-a"), alerts.AlertDuty(owner="pumper-b")]
    barrier = threading.Barrier(len(duties))
    results: list[int | None] = [None, None]

    def evaluate(slot: int) -> None:
        barrier.wait()
        try:
            results[slot] = duties[slot].run_once(t0)
        finally:
            connection.close()

    threads = [threading.Thread(target=evaluate, args=(slot,)) for slot in range(len(duties))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert sorted(results, key=lambda r: r is None) == [1, None]
    assert AlertEvent.objects.filter(rule__isnull=False).count() == 1
    assert len(receiver.received(HOOK)) == 1 and len(mail.outbox) == 1


def test_another_pumper_takes_over_when_the_holder_stops_renewing_the_lease(t0):
    first, second = alerts.AlertDuty(owner="pumper-a"), alerts.AlertDuty(owner="pumper-b")

    assert first.run_once(t0) == 0
    assert second.run_once(later(t0, seconds=10)) is None
    assert first.run_once(later(t0, seconds=20)) == 0                    # renewed until t0 + 50 s
    assert second.run_once(later(t0, seconds=45)) is None
    assert second.run_once(later(t0, seconds=51)) == 0                   # first stopped renewing
    assert first.run_once(later(t0, seconds=52)) is None


def test_a_stopping_pumper_gives_the_lease_up_at_once(t0):
    first, second = alerts.AlertDuty(owner="pumper-a"), alerts.AlertDuty(owner="pumper-b")
    assert first.run_once(t0) == 0

    first.stop()

    assert second.run_once(timezone.now()) == 0


@pytest.mark.django_db(transaction=True)
def test_the_pumper_evaluates_alerts_in_a_background_thread_every_few_seconds(channels, receiver, engine):
    make_rule("backlog_above", channels, threshold=0)
    engine.publish("ns", "q", [b"1"])
    pumper = Pumper(interval_s=1.0)

    assert pumper.evaluate_alerts() is True
    assert pumper.evaluate_alerts() is False                              # a pass at most every 5 s
    pumper.alerts.stop()

    assert AlertEvent.objects.filter(kind="backlog_above").count() == 1
    assert statuses(receiver) == ["firing"]


def test_recorded_requests_carry_an_id_per_event_and_status(channels, receiver, engine, t0):
    make_rule("backlog_above", channels, threshold=0)
    engine.publish("ns", "q", [b"1"])
    alerts.evaluate_rules(t0)
    engine.destroy("ns", "q")
    alerts.evaluate_rules(later(t0, seconds=5))

    event = AlertEvent.objects.get()
    ids = [request.header("X-Lmstfy-Alert-Id") for request in receiver.received(HOOK)]
    assert ids == [f"{event.id}-firing", f"{event.id}-resolved"]


"""queues/notifier.py and `manage.py notifier`: every outcome rule of SPEC §4,
driven with real Redis and a real local HTTP receiver (tests/receiver.py)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
from django.core import mail
from django.core.management import call_command

from queues import delivery, inspect, keys
from queues.engine import JobState, now_ms
from queues.models import AlertEvent, Topic
from queues.notifier import RESPONSE_LOG_BYTES, Notifier, TopicConfig, backoff_delay_s, judge
from tests.push_helpers import (
    POOL,
    NotifierLoop,
    config,
    delayed_due_ms,
    deliver_ready,
    job_state,
    make_topic,
    wait_until,
)
from tests.receiver import Reply
from tests.testutil import database_url_for_subprocesses

pytestmark = pytest.mark.django_db
REPO = Path(__file__).resolve().parent.parent
MINUTE_MS = 60_000


@pytest.fixture
def notifier():
    running = Notifier(threads=4)
    yield running
    running.shutdown(5)


def publish(engine, body: bytes = b'{"n": 1}', queue: str = "q", **kwargs) -> str:
    return engine.publish("ns", queue, [body], **kwargs).job_ids[0]


def attempts(topic: Topic, **filters) -> list[dict]:
    return inspect.attempts(topic.id, **filters)


def fail_and_measure_due(engine, redis_client, notifier, job_id: str) -> tuple[int, int, int]:
    """Deliver the ready job (the receiver fails it) and return (before, after, due) in ms."""
    before = now_ms()
    assert deliver_ready(notifier)
    after = now_ms()
    due = delayed_due_ms(redis_client, job_id)
    assert due is not None, "the failed job should wait in the delayed set"
    return before, after, due


def make_ready_again(engine, due_ms: int) -> None:
    """Move time to the job's due time instead of sleeping: the pump makes it ready."""
    engine.pump_due(now=due_ms + 1)


# -- outcomes ----------------------------------------------------------------------------------
def test_a_2xx_answer_without_an_expression_acks_the_job(private_callbacks, receiver, namespace, engine, notifier):
    topic = make_topic(namespace, receiver)
    job_id = publish(engine)
    assert deliver_ready(notifier)
    assert len(receiver.received()) == 1
    assert job_state(job_id) is None
    [record] = attempts(topic)
    assert (record["outcome"], record["status"], record["attempt"]) == ("success", "200", "1")


def test_a_2xx_answer_whose_expression_is_false_acks_the_job(
        private_callbacks, receiver, namespace, engine, notifier):
    topic = make_topic(namespace, receiver, retry_expression="{res.code} != 0 || {res. data.state} == 'failed'")
    receiver.answer(Reply.json({"code": 0, "data": {"state": "done"}}))
    job_id = publish(engine)
    assert deliver_ready(notifier)
    assert job_state(job_id) is None
    assert attempts(topic)[0]["outcome"] == "success"


def test_a_2xx_answer_whose_expression_is_true_is_retried(
        private_callbacks, receiver, redis_client, namespace, engine, notifier):
    topic = make_topic(namespace, receiver, retry_expression="{res.code} != 0", backoff="fixed", min_backoff_s=30)
    receiver.answer(Reply.json({"code": 7, "msg": "busy"}))
    job_id = publish(engine)
    before, after, due = fail_and_measure_due(engine, redis_client, notifier, job_id)
    assert before + 30_000 <= due <= after + 30_000
    [record] = attempts(topic)
    assert (record["outcome"], record["status"]) == ("retry", "200")
    assert '"busy"' in record["response"]


def test_a_non_2xx_answer_is_retried_even_when_the_expression_says_success(
        private_callbacks, receiver, namespace, engine, notifier):
    make_topic(namespace, receiver, retry_expression="{res.code} != 0", backoff="fixed", min_backoff_s=30)
    receiver.answer(Reply.json({"code": 0}, status=500))
    job_id = publish(engine)
    assert deliver_ready(notifier)
    assert job_state(job_id).state == JobState.DELAYED


def test_the_dq_backoff_waits_1_3_5_minutes(private_callbacks, receiver, redis_client, namespace, engine, notifier):
    make_topic(namespace, receiver, backoff="dq", max_attempts=10)
    receiver.always(Reply(status=500))
    job_id = publish(engine)
    for attempt, minutes in ((1, 1), (2, 3), (3, 5), (4, 7)):
        before, after, due = fail_and_measure_due(engine, redis_client, notifier, job_id)
        assert before + minutes * MINUTE_MS <= due <= after + minutes * MINUTE_MS, f"attempt {attempt}"
        make_ready_again(engine, due)
    assert [r.header("X-Lmstfy-Attempt") for r in receiver.received()] == ["1", "2", "3", "4"]


def test_the_exponential_backoff_doubles_from_min_up_to_max_with_10_percent_jitter(
        private_callbacks, receiver, redis_client, namespace, engine, notifier):
    make_topic(namespace, receiver, backoff="exponential", min_backoff_s=10, max_backoff_s=25, max_attempts=10)
    receiver.always(Reply(status=503))
    job_id = publish(engine)
    for attempt, base_s in ((1, 10), (2, 20), (3, 25), (4, 25)):
        before, after, due = fail_and_measure_due(engine, redis_client, notifier, job_id)
        assert before + base_s * 900 <= due <= after + base_s * 1100, f"attempt {attempt}"
        make_ready_again(engine, due)


def test_the_exponential_backoff_is_jittered(private_callbacks, receiver, namespace):
    topic = config(make_topic(namespace, receiver, backoff="exponential", min_backoff_s=100, max_backoff_s=10_000))
    delays = [backoff_delay_s(topic, 3) for _ in range(200)]
    assert all(360 <= d <= 440 for d in delays)
    assert max(delays) - min(delays) > 20
    assert 390 <= sum(delays) / len(delays) <= 410


def test_the_fixed_backoff_waits_min_backoff_s_every_time(
        private_callbacks, receiver, redis_client, namespace, engine, notifier):
    make_topic(namespace, receiver, backoff="fixed", min_backoff_s=7, max_backoff_s=3600)
    receiver.always(Reply(status=502))
    job_id = publish(engine)
    for attempt in (1, 2, 3):
        before, after, due = fail_and_measure_due(engine, redis_client, notifier, job_id)
        assert before + 7000 <= due <= after + 7000, f"attempt {attempt}"
        make_ready_again(engine, due)


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_on_429_and_503_is_a_minimum_delay(
        private_callbacks, receiver, redis_client, namespace, engine, notifier, status):
    make_topic(namespace, receiver, backoff="fixed", min_backoff_s=5)
    receiver.answer(status=status, headers={"Retry-After": "120"})
    job_id = publish(engine)
    before, after, due = fail_and_measure_due(engine, redis_client, notifier, job_id)
    assert before + 120_000 <= due <= after + 120_000


def test_a_retry_after_shorter_than_the_backoff_does_not_shorten_it(
        private_callbacks, receiver, redis_client, namespace, engine, notifier):
    make_topic(namespace, receiver, backoff="fixed", min_backoff_s=300)
    receiver.answer(status=429, headers={"Retry-After": "2"})
    job_id = publish(engine)
    before, after, due = fail_and_measure_due(engine, redis_client, notifier, job_id)
    assert before + 300_000 <= due <= after + 300_000


def test_retry_after_on_other_statuses_is_ignored(
        private_callbacks, receiver, redis_client, namespace, engine, notifier):
    make_topic(namespace, receiver, backoff="fixed", min_backoff_s=5)
    receiver.answer(status=500, headers={"Retry-After": "600"})
    job_id = publish(engine)
    before, after, due = fail_and_measure_due(engine, redis_client, notifier, job_id)
    assert before + 5000 <= due <= after + 5000


def test_a_timeout_is_a_failed_attempt_logged_as_timeout(
        private_callbacks, receiver, namespace, engine, notifier):
    topic = make_topic(namespace, receiver, timeout_ms=200, backoff="fixed", min_backoff_s=30)
    receiver.answer(hang_s=5)
    job_id = publish(engine)
    assert deliver_ready(notifier)
    assert job_state(job_id).state == JobState.DELAYED
    [record] = attempts(topic)
    assert (record["status"], record["error"], record["outcome"]) == ("", "timeout", "retry")
    assert 150 <= int(record["duration_ms"]) < 1000


@pytest.mark.django_db(transaction=True)
def test_410_gone_dead_letters_at_once(private_callbacks, receiver, namespace, engine, notifier):
    topic = make_topic(namespace, receiver, max_attempts=10)
    receiver.answer(status=410)
    job_id = publish(engine)
    assert deliver_ready(notifier)
    assert job_state(job_id).state == JobState.DEAD
    assert len(receiver.received()) == 1
    [record] = attempts(topic)
    assert (record["status"], record["outcome"], record["next_attempt_at"]) == ("410", "dead", "")


@pytest.mark.django_db(transaction=True)
def test_the_last_attempt_dead_letters_raises_an_alert_and_mails_the_topics_list(
        private_callbacks, settings, receiver, namespace, engine, notifier):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    mail.outbox = []
    topic = make_topic(namespace, receiver, max_attempts=2, backoff="fixed", min_backoff_s=1,
                       alert_emails=["ops@example.com", "oncall@example.com"])
    receiver.always(Reply(status=500, body=b"down"))
    job_id = publish(engine)
    assert deliver_ready(notifier)
    assert job_state(job_id).state == JobState.DELAYED
    assert not AlertEvent.objects.exists()
    make_ready_again(engine, delayed_due_ms(engine.client, job_id))
    assert deliver_ready(notifier)

    assert job_state(job_id).state == JobState.DEAD
    [event] = AlertEvent.objects.all()
    assert (event.kind, event.namespace, event.queue) == ("delivery_exhausted", "ns", "q")
    assert job_id in event.message
    assert event.details["job_id"] == job_id and event.details["attempt"] == 2
    [message] = mail.outbox
    assert sorted(message.to) == ["oncall@example.com", "ops@example.com"]
    assert "ns/q" in message.subject
    assert job_id in message.body
    assert [r["outcome"] for r in attempts(topic)] == ["dead", "retry"]


@pytest.mark.django_db(transaction=True)
def test_max_attempts_counts_attempts_whatever_the_jobs_tries(private_callbacks, receiver, namespace, api, engine,
                                                               notifier):
    topic = make_topic(namespace, receiver, max_attempts=3, backoff="fixed", min_backoff_s=1)
    receiver.always(Reply(status=500))
    response = api.put("/api/ns/q?tries=1", data=b"{}", content_type="application/json")
    assert response.status_code == 201
    job_id = response.json()["job_id"]
    for _ in range(2):
        assert deliver_ready(notifier)
        assert job_state(job_id).state == JobState.DELAYED
        make_ready_again(engine, delayed_due_ms(engine.client, job_id))
    assert deliver_ready(notifier)
    assert job_state(job_id).state == JobState.DEAD
    assert [r.header("X-Lmstfy-Attempt") for r in receiver.received()] == ["1", "2", "3"]
    assert {r.header("X-Lmstfy-Max-Attempts") for r in receiver.received()} == {"3"}
    assert [r["attempt"] for r in attempts(topic)] == ["3", "2", "1"]


@pytest.mark.django_db(transaction=True)
def test_many_tries_do_not_extend_max_attempts(private_callbacks, receiver, namespace, engine, notifier):
    make_topic(namespace, receiver, max_attempts=1)
    receiver.always(Reply(status=500))
    job_id = publish(engine, tries=50)
    assert deliver_ready(notifier)
    assert job_state(job_id).state == JobState.DEAD
    assert AlertEvent.objects.filter(kind="delivery_exhausted").count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_job_past_a_lowered_max_attempts_is_dead_lettered_without_another_call(
        private_callbacks, receiver, namespace, engine, notifier):
    topic = make_topic(namespace, receiver, max_attempts=10, backoff="fixed", min_backoff_s=1)
    receiver.always(Reply(status=500))
    job_id = publish(engine)
    for _ in range(3):
        assert deliver_ready(notifier)
        make_ready_again(engine, delayed_due_ms(engine.client, job_id))
    Topic.objects.filter(id=topic.id).update(max_attempts=2)
    fresh = Notifier(threads=2)
    try:
        assert deliver_ready(fresh)
    finally:
        fresh.shutdown(5)
    assert len(receiver.received()) == 3
    assert job_state(job_id).state == JobState.DEAD
    assert AlertEvent.objects.filter(kind="delivery_exhausted").count() == 1


def test_judge_applies_the_rules_in_order(private_callbacks, receiver, namespace):
    topic = config(make_topic(namespace, receiver, max_attempts=3, backoff="fixed", min_backoff_s=10,
                              retry_expression="{res.ok} != true"))

    def answer(status, body=b"", error=None, headers=None):
        return delivery.Response(status, body, error, 5, headers or {})

    assert judge(topic, 1, answer(200, b'{"ok": true}')).outcome == "success"
    assert judge(topic, 1, answer(204)).outcome == "retry"             # no body: res is null
    assert judge(topic, 3, answer(200, b'{"ok": true}')).outcome == "success"
    assert judge(topic, 3, answer(200, b'{"ok": false}')).outcome == "dead"
    assert judge(topic, 1, answer(None, error="timeout")) == judge(topic, 1, answer(None, error="connection"))
    assert judge(topic, 1, answer(410)).outcome == "dead"
    assert judge(topic, 1, answer(503, headers={"retry-after": "90"})).delay_s == 90
    assert judge(topic, 3, answer(503, headers={"retry-after": "90"})).outcome == "dead"
    # a 2xx whose body was cut short by the deadline is not a success
    assert judge(topic, 1, answer(200, b'{"ok": true}', error="timeout")).outcome == "retry"


# -- attempt log through the management API ------------------------------------------------------
def test_the_attempt_log_records_every_attempt_and_filters_by_job_and_outcome(
        private_callbacks, receiver, namespace, engine, notifier, admin_api):
    topic = make_topic(namespace, receiver, backoff="fixed", min_backoff_s=45)
    long_answer = b"E" * 5000
    receiver.answer(status=500, body=long_answer, path="/hook")
    failing = publish(engine, b"first")
    assert deliver_ready(notifier)
    healthy = publish(engine, b"second")
    retried_at = now_ms()
    assert deliver_ready(notifier)

    response = admin_api.get(f"/manage/v1/topics/{topic.id}/attempts/")
    assert response.status_code == 200
    records = response.json()
    records = records.get("results", records) if isinstance(records, dict) else records
    assert [r["job_id"] for r in records] == [healthy, failing]          # newest first
    ok, failed = records
    assert (ok["attempt"], ok["status"], ok["error"], ok["outcome"], ok["next_attempt_at"]) == \
        (1, 200, "", "success", "")
    assert (failed["attempt"], failed["status"], failed["outcome"]) == (1, 500, "retry")
    assert failed["response"] == "E" * RESPONSE_LOG_BYTES
    next_at = failed["next_attempt_at"]
    due = delayed_due_ms(engine.client, failing)
    assert abs(datetime.fromisoformat(next_at).timestamp() * 1000 - due) < 50
    assert due >= retried_at + 45_000 - 5_000
    assert isinstance(failed["duration_ms"], int) and failed["at"]

    only_job = admin_api.get(f"/manage/v1/topics/{topic.id}/attempts/?job_id={failing}").json()
    assert [r["job_id"] for r in only_job] == [failing]
    only_success = admin_api.get(f"/manage/v1/topics/{topic.id}/attempts/?outcome=success").json()
    assert [r["job_id"] for r in only_success] == [healthy]
    assert admin_api.get(f"/manage/v1/topics/{topic.id}/attempts/?outcome=dead").json() == []
    assert len(admin_api.get(f"/manage/v1/topics/{topic.id}/attempts/?limit=1").json()) == 1


def test_the_attempt_log_is_capped(private_callbacks, settings, receiver, namespace, engine, notifier):
    settings.LMSTFY_ATTEMPT_LOG_MAX = 100
    topic = make_topic(namespace, receiver)
    engine.publish("ns", "q", [b"x"] * 400)
    while deliver_ready(notifier):
        pass
    assert len(receiver.received()) == 400
    assert 100 <= engine.client.xlen(keys.attempt_log(topic.id)) <= 200   # trimmed near the cap (XADD MAXLEN ~)


# -- pause -------------------------------------------------------------------------------------
def test_a_paused_topic_sends_nothing(private_callbacks, receiver, namespace, engine, notifier):
    make_topic(namespace, receiver, paused=True)
    job_id = publish(engine)
    assert not deliver_ready(notifier)
    assert receiver.received() == []
    assert job_state(job_id).state == JobState.READY


def test_a_paused_queue_sends_nothing_until_resumed(private_callbacks, receiver, namespace, engine, notifier):
    make_topic(namespace, receiver)
    engine.pause("ns", "q", by="test")
    job_id = publish(engine)
    assert not deliver_ready(notifier)
    assert receiver.received() == []
    assert job_state(job_id).state == JobState.READY
    engine.resume("ns", "q")
    assert deliver_ready(notifier)
    assert [r.header("X-Lmstfy-Job-Id") for r in receiver.received()] == [job_id]


def test_only_queues_with_a_topic_are_delivered(private_callbacks, receiver, namespace, engine, notifier):
    make_topic(namespace, receiver, queue="pushed")
    other = publish(engine, queue="pulled")
    pushed = publish(engine, queue="pushed")
    assert deliver_ready(notifier)
    assert [r.header("X-Lmstfy-Job-Id") for r in receiver.received()] == [pushed]
    assert job_state(other, queue="pulled").state == JobState.READY


def test_a_topic_that_skipped_validation_does_not_stop_the_others(
        private_callbacks, receiver, namespace, engine, notifier):
    # Rows written past the validators (ORM, an older parser, a pool since removed).
    Topic.objects.create(namespace=namespace, queue="broken", callback_url=receiver.url(),
                         retry_expression="{res.code} ==")
    Topic.objects.create(namespace=namespace, queue="gone", callback_url=receiver.url(), pool="removed")
    make_topic(namespace, receiver, queue="fine")
    for queue in ("broken", "gone", "fine"):
        publish(engine, queue=queue)
    assert deliver_ready(notifier)
    assert [r.header("X-Lmstfy-Queue") for r in receiver.received()] == ["fine"]
    assert [t.queue for t in notifier.topics.active()] == ["fine"]


# -- a running notifier -------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_ready_job_is_sent_within_a_second_of_its_publish(private_callbacks, receiver, namespace, engine):
    make_topic(namespace, receiver)
    loop = NotifierLoop(threads=4, idle_wait_s=5).start()   # long idle wait: only the wake-up can be this fast
    try:
        wait_until(lambda: loop.notifier.topics.active(), 2)
        time.sleep(0.3)                                     # let it settle into wait_for_work
        published = time.monotonic()
        publish(engine)
        [got] = receiver.wait_for(1, timeout_s=3)
        assert got.at_monotonic - published < 1.0
    finally:
        loop.stop()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_delayed_job_is_sent_within_a_second_of_becoming_due(private_callbacks, receiver, namespace, engine):
    make_topic(namespace, receiver)
    loop = NotifierLoop(threads=4, idle_wait_s=5).start()
    try:
        publish(engine, delay_s=1)
        due = time.monotonic() + 1
        deadline = due + 2
        while not receiver.received() and time.monotonic() < deadline:
            engine.pump_due()                                # the pumper's duty, done here
            time.sleep(0.05)
        [got] = receiver.received()
        assert due - 0.05 <= got.at_monotonic < due + 1.0
    finally:
        loop.stop()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_topic_changes_reach_a_running_notifier_within_2_seconds(private_callbacks, receiver, namespace, engine):
    topic = make_topic(namespace, receiver, path="/old", paused=True)
    loop = NotifierLoop(threads=4, idle_wait_s=0.5).start()
    try:
        job_id = publish(engine)
        assert receiver.wait_for(1, timeout_s=1.2) == []
        topic.paused = False
        topic.callback_url = receiver.url("/new")
        topic.save()
        changed = time.monotonic()
        [got] = receiver.wait_for(1, timeout_s=3)
        assert got.path == "/new"
        assert got.header("X-Lmstfy-Job-Id") == job_id
        assert got.at_monotonic - changed < 2.0
    finally:
        loop.stop()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_two_notifiers_never_exceed_the_topics_concurrency(private_callbacks, receiver, namespace, engine):
    make_topic(namespace, receiver, concurrency=3, timeout_ms=5000)
    receiver.always(Reply(hang_s=0.25))
    engine.publish("ns", "q", [b"%d" % i for i in range(15)])
    loops = [NotifierLoop(threads=8, idle_wait_s=0.2).start() for _ in range(2)]
    try:
        got = receiver.wait_for(15, timeout_s=10)
        assert len(got) == 15
        assert wait_until(lambda: inspect.queue_stats(POOL, "ns", "q").as_dict()["inflight"] == 0, 3)
    finally:
        for loop in loops:
            loop.stop()
    assert receiver.max_concurrent == 3      # used, never exceeded
    assert len({r.body for r in got}) == 15  # each job once


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_rate_per_s_is_respected_approximately(private_callbacks, receiver, namespace, engine):
    make_topic(namespace, receiver, rate_per_s=10)
    engine.publish("ns", "q", [b"%d" % i for i in range(30)])
    loop = NotifierLoop(threads=8, idle_wait_s=1.0).start()
    try:
        got = receiver.wait_for(30, timeout_s=8)
    finally:
        loop.stop()
    assert len(got) == 30
    span = got[-1].at_monotonic - got[0].at_monotonic
    # 10 at once (the bucket's burst), then 10/s: about 2 s for the other 20.
    assert 1.6 <= span <= 4.5
    for first in got:
        in_a_second = [r for r in got if first.at_monotonic <= r.at_monotonic < first.at_monotonic + 1.0]
        assert len(in_a_second) <= 21


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_hanging_topic_does_not_starve_a_healthy_one(private_callbacks, receiver, namespace, engine):
    make_topic(namespace, receiver, queue="stuck", path="/stuck", timeout_ms=10_000, concurrency=50)
    make_topic(namespace, receiver, queue="healthy", path="/healthy")
    receiver.always(Reply(hang_s=10), path="/stuck")
    engine.publish("ns", "stuck", [b"s%d" % i for i in range(20)])
    loop = NotifierLoop(threads=4, idle_wait_s=0.2).start()
    try:
        assert receiver.wait_for(1, timeout_s=2, path="/stuck")
        started = time.monotonic()
        engine.publish("ns", "healthy", [b"h%d" % i for i in range(20)])
        got = receiver.wait_for(20, timeout_s=5, path="/healthy")
        assert len(got) == 20
        assert got[-1].at_monotonic - started < 2.0
        assert len(receiver.received("/stuck")) < 4     # the stuck topic keeps no more than its share
    finally:
        receiver.unblock()
        loop.stop()


# -- the command --------------------------------------------------------------------------------
def command_env(**extra: str) -> dict[str, str]:
    """The environment of this test run, pointed at the test database."""
    env = dict(os.environ)
    env["DATABASE_URL"] = database_url_for_subprocesses()
    env["LMSTFY_ALLOW_PRIVATE_CALLBACKS"] = "1"
    env.update(extra)
    return env


def start_notifier(tmp_path: Path, name: str, **env: str) -> subprocess.Popen:
    with open(tmp_path / f"{name}.log", "wb") as log:   # the child keeps its own copy of the descriptor
        return subprocess.Popen([sys.executable, "manage.py", "notifier", "--threads", "4"], cwd=REPO,
                                env=command_env(**env), stdout=log, stderr=subprocess.STDOUT)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
    process.wait(10)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_job_survives_kill_9_of_its_notifier_mid_delivery(
        private_callbacks, receiver, namespace, engine, tmp_path):
    make_topic(namespace, receiver, timeout_ms=500)
    receiver.answer(hang_s=30)                 # the first delivery never answers
    job_id = publish(engine)
    first = start_notifier(tmp_path, "first")
    try:
        [sent] = receiver.wait_for(1, timeout_s=15)
        first.send_signal(signal.SIGKILL)
        first.wait(5)
    finally:
        stop(first)
    assert job_state(job_id).state == JobState.INFLIGHT
    lease_end = sent.at_monotonic + 0.5 + 5.0           # timeout_ms + the lease margin

    readied_at = None
    while time.monotonic() < lease_end + 3:
        engine.pump_due()                               # the pumper's duty
        if job_state(job_id).state == JobState.READY:
            readied_at = time.monotonic()
            break
        time.sleep(0.1)
    assert readied_at is not None and readied_at >= lease_end - 0.3

    second = start_notifier(tmp_path, "second")
    try:
        got = receiver.wait_for(2, timeout_s=15)
        acked = wait_until(lambda: job_state(job_id) is None, 3)
    finally:
        stop(second)
    assert len(got) == 2
    assert got[1].header("webhook-id") == job_id
    assert got[1].header("X-Lmstfy-Attempt") == "2"
    assert acked, "the redelivered job should be acked"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_sigterm_finishes_in_flight_deliveries_and_exits_0(private_callbacks, receiver, namespace, engine, tmp_path):
    topic = make_topic(namespace, receiver, timeout_ms=5000)
    receiver.answer(hang_s=1.5)
    job_id = publish(engine)
    process = start_notifier(tmp_path, "term", LMSTFY_NOTIFIER_GRACE_S="10")
    try:
        assert receiver.wait_for(1, timeout_s=15)
        process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        assert process.wait(10) == 0
        took = time.monotonic() - signalled
    finally:
        stop(process)
    assert 0.8 <= took < 4.0, took                  # it waited for the delivery, then left
    assert len(receiver.received()) == 1
    assert job_state(job_id) is None                # acked: delivered once, not left to its lease
    assert attempts(topic)[0]["outcome"] == "success"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_sigterm_leaves_deliveries_past_the_grace_period_to_their_lease(
        private_callbacks, receiver, namespace, engine, tmp_path):
    make_topic(namespace, receiver, timeout_ms=10_000)
    receiver.answer(hang_s=20)
    job_id = publish(engine)
    process = start_notifier(tmp_path, "grace", LMSTFY_NOTIFIER_GRACE_S="0.5")
    try:
        assert receiver.wait_for(1, timeout_s=15)
        process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        assert process.wait(10) == 0
        took = time.monotonic() - signalled
    finally:
        stop(process)
    assert took < 3.0, took
    assert job_state(job_id).state == JobState.INFLIGHT   # its lease brings it back


def test_once_delivers_everything_ready_then_exits(private_callbacks, receiver, namespace, engine):
    # More jobs than delivery threads: one pass is not one batch of seats.
    make_topic(namespace, receiver)
    ids = engine.publish("ns", "q", [b"a", b"b", b"c", b"d", b"e"]).job_ids
    call_command("notifier", "--once", "--threads", "2")
    assert sorted(r.header("X-Lmstfy-Job-Id") for r in receiver.received()) == sorted(ids)
    assert all(job_state(job_id) is None for job_id in ids)


def test_topic_config_parses_the_expression_once(private_callbacks, receiver, namespace):
    topic = make_topic(namespace, receiver, retry_expression="{status} >= 300", timeout_ms=1500)
    parsed = TopicConfig.from_model(topic)
    assert parsed.expression is not None and parsed.expression.evaluate(500, b"") is True
    assert parsed.lease_s == pytest.approx(6.5)

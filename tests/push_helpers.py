"""Helpers shared by the push-delivery tests (test_delivery.py, test_notifier.py,
test_manage_api.py): topics pointing at the local receiver, an independent
Standard Webhooks verifier, and running the notifier's real dispatch path."""
from __future__ import annotations

import base64
import hashlib
import hmac
import threading
import time

from django.db import connection

from queues import inspect, keys, pools
from queues.engine import Job
from queues.models import Namespace, Topic
from queues.notifier import Notifier, TopicConfig
from tests.receiver import Receiver, Recorded

POOL = pools.DEFAULT_POOL


def make_topic(namespace: Namespace, receiver: Receiver, queue: str = "q", path: str = "/hook",
               **fields) -> Topic:
    return Topic.objects.create(namespace=namespace, queue=queue, callback_url=receiver.url(path), **fields)


def config(topic: Topic) -> TopicConfig:
    topic.refresh_from_db()
    return TopicConfig.from_model(topic)


def standard_webhooks_valid(secret: str, recorded: Recorded) -> bool:
    """Verify `recorded` as a Standard Webhooks receiver would, written from the
    spec (not with queues.delivery): HMAC-SHA256 keyed with the base64-decoded
    secret after "whsec_", over "{webhook-id}.{webhook-timestamp}.{raw body}",
    compared in constant time with each "v1,<base64>" of webhook-signature."""
    assert secret.startswith("whsec_")
    key = base64.b64decode(secret[len("whsec_"):])
    message_id, timestamp = recorded.header("webhook-id"), recorded.header("webhook-timestamp")
    if not message_id or not timestamp or "." in message_id:
        return False
    signed = message_id.encode() + b"." + timestamp.encode() + b"." + recorded.body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest())
    for token in (recorded.header("webhook-signature") or "").split(" "):
        version, _, signature = token.partition(",")
        if version == "v1" and hmac.compare_digest(signature.encode(), expected):
            return True
    return False


def wait_idle(notifier: Notifier, timeout_s: float = 10.0) -> None:
    """Wait until the notifier's running deliveries finished."""
    deadline = time.monotonic() + timeout_s
    while notifier.busy():
        assert time.monotonic() < deadline, f"{notifier.busy()} deliveries still running after {timeout_s}s"
        time.sleep(0.005)


def deliver_ready(notifier: Notifier, timeout_s: float = 10.0) -> bool:
    """One pass of the notifier's real path: dispatch_ready() leases what is
    ready and hands it to the executor; wait until those deliveries finished."""
    found = notifier.dispatch_ready()
    wait_idle(notifier, timeout_s)
    return found


def wait_until(condition, timeout_s: float = 5.0, step_s: float = 0.01):
    """Poll `condition` until it returns something truthy; return it (or the last falsy value)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(step_s)


def job_state(job_id: str, queue: str = "q", namespace: str = "ns") -> Job | None:
    return inspect.peek_job(POOL, namespace, queue, job_id)


def delayed_due_ms(redis_client, job_id: str, queue: str = "q", namespace: str = "ns") -> int | None:
    """The due time (ms) of a delayed job, or None if it is not delayed."""
    score = redis_client.zscore(keys.delayed(namespace, queue), job_id)
    return None if score is None else int(score)


class NotifierLoop:
    """The notifier command's loop (dispatch, else wait for work) in a thread,
    for tests that need a running notifier in this process."""

    def __init__(self, threads: int = 8, idle_wait_s: float = 1.0) -> None:
        self.notifier = Notifier(threads)
        self.idle_wait_s = idle_wait_s
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="test-notifier-loop", daemon=True)

    def start(self) -> NotifierLoop:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                if not self.notifier.dispatch_ready():
                    self.notifier.wait_for_work(self.idle_wait_s)
        except Exception as exc:  # noqa: BLE001 - re-raised in the test thread by stop()
            self.error = exc
        finally:
            connection.close()

    def stop(self, grace_s: float = 10.0) -> int:
        self._stop.set()
        self._thread.join(timeout=self.idle_wait_s + 5)
        left = self.notifier.shutdown(grace_s)
        if self.error is not None:
            raise self.error
        return left

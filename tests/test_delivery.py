"""queues/delivery.py (the one outbound HTTP function) and what the notifier
puts on the wire, against a real local HTTP receiver (tests/receiver.py)."""
from __future__ import annotations

import json
import socket
import time
from email.utils import formatdate

import pytest

from queues import delivery
from queues.engine import now_ms
from queues.notifier import Notifier
from tests.push_helpers import deliver_ready, job_state, make_topic, standard_webhooks_valid
from tests.receiver import Reply

pytestmark = pytest.mark.django_db


def send(url: str, method: str = "POST", body: bytes = b'{"a":1}', timeout_ms: int = 300,
         headers: dict | None = None) -> delivery.Response:
    return delivery.send(delivery.Request(url, method, body, headers or {}, timeout_ms))


def publish_and_deliver(engine, body: bytes = b'{"hello":"world"}', content_type: str = "", **publish) -> str:
    job_id = engine.publish("ns", "q", [body], content_type=content_type, **publish).job_ids[0]
    notifier = Notifier(threads=2)
    try:
        assert deliver_ready(notifier)
    finally:
        notifier.shutdown(5)
    return job_id


# -- signing -----------------------------------------------------------------------------------
def test_sign_matches_the_standard_webhooks_reference_vector():
    # The example of the Standard Webhooks / Svix documentation.
    signature = delivery.sign("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek",
                              1614265330, b'{"test": 2432232314}')
    assert signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_a_delivery_carries_a_signature_an_independent_verifier_accepts(
        private_callbacks, receiver, namespace, engine):
    topic = make_topic(namespace, receiver)
    job_id = publish_and_deliver(engine, b'{"amount": 12.50, "note": "caf\xc3\xa9"}')
    [got] = receiver.received()
    assert got.header("webhook-id") == job_id
    assert abs(int(got.header("webhook-timestamp")) - time.time()) <= 5
    assert got.header("webhook-signature").startswith("v1,")
    assert standard_webhooks_valid(topic.signing_secret, got)


def test_a_signature_does_not_verify_with_another_secret_or_a_changed_body(
        private_callbacks, receiver, namespace, engine):
    topic = make_topic(namespace, receiver)
    other = make_topic(namespace, receiver, queue="other")
    publish_and_deliver(engine, b"payload")
    [got] = receiver.received()
    assert standard_webhooks_valid(topic.signing_secret, got)
    assert not standard_webhooks_valid(other.signing_secret, got)
    tampered = type(got)(got.method, got.path, got.headers, b"payload!", got.at, got.at_monotonic)
    assert not standard_webhooks_valid(topic.signing_secret, tampered)


# -- headers and body --------------------------------------------------------------------------
def test_it_sends_the_lmstfy_headers(private_callbacks, receiver, namespace, engine):
    make_topic(namespace, receiver, max_attempts=7)
    job_id = publish_and_deliver(engine)
    [got] = receiver.received()
    assert got.method == "POST"
    assert got.path == "/hook"
    assert got.header("X-Lmstfy-Namespace") == "ns"
    assert got.header("X-Lmstfy-Queue") == "q"
    assert got.header("X-Lmstfy-Job-Id") == job_id
    assert got.header("X-Lmstfy-Attempt") == "1"
    assert got.header("X-Lmstfy-Max-Attempts") == "7"


def test_the_body_arrives_byte_for_byte_as_published(private_callbacks, receiver, namespace, engine):
    make_topic(namespace, receiver)
    body = bytes(range(256)) * 4 + b"\r\n\x00end"
    publish_and_deliver(engine, body)
    [got] = receiver.received()
    assert got.body == body
    assert got.header("Content-Length") == str(len(body))


def test_the_content_type_is_the_one_the_publisher_sent(private_callbacks, receiver, namespace, api):
    make_topic(namespace, receiver)
    response = api.put("/api/ns/q", data=b"<order id='1'/>", content_type="application/xml; charset=utf-8")
    assert response.status_code == 201, response.content
    notifier = Notifier(threads=2)
    try:
        assert deliver_ready(notifier)
    finally:
        notifier.shutdown(5)
    [got] = receiver.received()
    assert got.header("Content-Type") == "application/xml; charset=utf-8"
    assert got.body == b"<order id='1'/>"
    assert got.header("webhook-id") == response.json()["job_id"]


def test_a_json_body_published_without_a_content_type_is_sent_as_json(
        private_callbacks, receiver, namespace, engine):
    make_topic(namespace, receiver)
    publish_and_deliver(engine, b'[1, 2, {"x": null}]')
    assert receiver.received()[0].header("Content-Type") == "application/json"


def test_a_non_json_body_published_without_a_content_type_is_sent_as_octet_stream(
        private_callbacks, receiver, namespace, engine):
    make_topic(namespace, receiver)
    publish_and_deliver(engine, b"{not json")
    assert receiver.received()[0].header("Content-Type") == "application/octet-stream"


def test_get_sends_no_body_but_still_signs(private_callbacks, receiver, namespace, engine):
    topic = make_topic(namespace, receiver, method="GET")
    job_id = publish_and_deliver(engine, b'{"ignored": true}')
    [got] = receiver.received()
    assert got.method == "GET"
    assert got.body == b""
    assert got.header("Content-Length") in (None, "0")
    assert got.header("Content-Type") is None
    assert got.header("X-Lmstfy-Job-Id") == job_id
    assert standard_webhooks_valid(topic.signing_secret, got)


def test_put_topics_send_a_put(private_callbacks, receiver, namespace, engine):
    make_topic(namespace, receiver, method="PUT")
    publish_and_deliver(engine, b"x")
    [got] = receiver.received()
    assert (got.method, got.body) == ("PUT", b"x")


def test_the_topics_custom_headers_are_sent(private_callbacks, receiver, namespace, engine):
    make_topic(namespace, receiver, headers={"Authorization": "Bearer s3cret", "X-Tenant": "acme"})
    publish_and_deliver(engine)
    [got] = receiver.received()
    assert got.header("Authorization") == "Bearer s3cret"
    assert got.header("X-Tenant") == "acme"


def test_webhook_id_is_stable_across_retries_while_the_attempt_counts_up(
        private_callbacks, receiver, namespace, engine):
    topic = make_topic(namespace, receiver, backoff="fixed", min_backoff_s=1)
    receiver.fail(1, status=500)
    job_id = engine.publish("ns", "q", [b"{}"]).job_ids[0]
    notifier = Notifier(threads=2)
    try:
        assert deliver_ready(notifier)
        engine.pump_due(now=now_ms() + 1500)      # the 1 s backoff has passed
        assert deliver_ready(notifier)
    finally:
        notifier.shutdown(5)
    first, second = receiver.received()
    assert first.header("webhook-id") == second.header("webhook-id") == job_id
    assert (first.header("X-Lmstfy-Attempt"), second.header("X-Lmstfy-Attempt")) == ("1", "2")
    assert standard_webhooks_valid(topic.signing_secret, first)
    assert standard_webhooks_valid(topic.signing_secret, second)
    assert job_state(job_id) is None  # acked after the second attempt


# -- the HTTP exchange -------------------------------------------------------------------------
def test_a_2xx_answer_comes_back_with_status_body_and_headers(private_callbacks, receiver):
    receiver.answer(Reply.json({"ok": True}, status=201, headers={"X-Trace": "abc"}))
    response = send(receiver.url())
    assert (response.status, response.error) == (201, None)
    assert json.loads(response.body) == {"ok": True}
    assert response.headers["x-trace"] == "abc"
    assert response.duration_ms < 1000


def test_redirects_are_not_followed(private_callbacks, receiver):
    receiver.answer(status=302, headers={"Location": "/elsewhere"})
    response = send(receiver.url("/hook"))
    assert response.status == 302
    assert response.error is None
    assert [r.path for r in receiver.received()] == ["/hook"]


def test_a_redirect_is_a_failed_attempt_for_the_notifier(private_callbacks, receiver, namespace, engine):
    make_topic(namespace, receiver, backoff="fixed", min_backoff_s=60)
    receiver.answer(status=307, headers={"Location": receiver.url("/elsewhere")})
    job_id = publish_and_deliver(engine)
    assert [r.path for r in receiver.received()] == ["/hook"]
    assert job_state(job_id).state.name == "DELAYED"


def test_a_hanging_receiver_times_out_within_the_timeout(private_callbacks, receiver):
    receiver.answer(hang_s=10)
    started = time.monotonic()
    response = send(receiver.url(), timeout_ms=300)
    assert response.error == "timeout"
    assert response.status is None
    assert time.monotonic() - started < 1.0


def test_a_body_dripped_slowly_times_out_within_the_timeout(private_callbacks, receiver):
    # Each piece arrives well within the read timeout; the whole answer does not.
    receiver.answer(drip=tuple([b"x" * 100] * 100), drip_gap_s=0.05)
    started = time.monotonic()
    response = send(receiver.url(), timeout_ms=300)
    assert response.error == "timeout"
    assert time.monotonic() - started < 1.0


def test_headers_dripped_slowly_time_out_within_the_timeout(private_callbacks, receiver):
    receiver.answer(body=b"late", header_drip_gap_s=0.05)
    started = time.monotonic()
    response = send(receiver.url(), timeout_ms=300)
    assert response.error == "timeout"
    assert time.monotonic() - started < 1.0


def test_a_timed_out_connection_is_not_reused_for_the_next_request(private_callbacks, receiver):
    receiver.answer(drip=tuple([b"x" * 10] * 100), drip_gap_s=0.05)
    assert send(receiver.url(), timeout_ms=300).error == "timeout"
    receiver.answer(Reply.json({"second": True}))
    response = send(receiver.url(), timeout_ms=1000)
    assert (response.status, response.error) == (200, None)
    assert json.loads(response.body) == {"second": True}


def test_the_response_body_is_read_only_up_to_the_cap(private_callbacks, receiver):
    receiver.answer(body=b"y" * (delivery.MAX_RESPONSE_BYTES * 4))
    response = send(receiver.url(), timeout_ms=2000)
    assert response.status == 200
    assert len(response.body) == delivery.MAX_RESPONSE_BYTES


def test_an_endless_body_does_not_hold_the_sender_past_the_cap(private_callbacks, receiver):
    # 10 MB announced, sent in 64 KiB pieces 50 ms apart: reading stops at the cap.
    receiver.answer(drip=tuple([b"z" * 65536] * 160), drip_gap_s=0.05)
    started = time.monotonic()
    response = send(receiver.url(), timeout_ms=5000)
    assert response.status == 200
    assert len(response.body) == delivery.MAX_RESPONSE_BYTES
    assert time.monotonic() - started < 1.0


def test_connections_are_kept_alive_between_deliveries(private_callbacks, receiver):
    for _ in range(5):
        assert send(receiver.url()).status == 200
    assert len(receiver.received()) == 5
    assert receiver.connections == 1


def test_a_closed_port_is_a_connection_error(private_callbacks):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    response = send(f"http://127.0.0.1:{port}/hook")
    assert (response.status, response.error) == (None, "connection")


@pytest.mark.parametrize("url", ["ftp://example.com/hook", "file:///etc/passwd", "gopher://example.com/",
                                 "javascript:alert(1)", "http:///no-host", "//example.com/hook"])
def test_schemes_other_than_http_and_https_are_refused(private_callbacks, receiver, url):
    assert send(url).error == "invalid_url"
    with pytest.raises(delivery.CallbackRefused):
        delivery.check_callback_url(url)
    assert receiver.received() == []


@pytest.mark.parametrize("value, expected", [("120", 120.0), ("0", 0.0), ("soon", None), ("-5", None), ("", None)])
def test_retry_after_seconds_are_read(value, expected):
    response = delivery.Response(429, b"", None, 1, {"retry-after": value} if value else {})
    assert response.retry_after_s == expected


def test_retry_after_as_an_http_date_is_read():
    in_two_minutes = formatdate(time.time() + 120, usegmt=True)
    response = delivery.Response(503, b"", None, 1, {"retry-after": in_two_minutes})
    assert 110 <= response.retry_after_s <= 121


# -- SSRF guard --------------------------------------------------------------------------------
def test_proxy_environment_variables_do_not_route_callbacks_around_the_guard(private_callbacks, receiver,
                                                                              monkeypatch):
    """A proxy would be the connected peer: the guard could not see the real target."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, receiver.url(""))
    response = send(f"http://127.0.0.1:{closed_port}/hook")
    assert (response.status, response.error) == (None, "connection")
    assert receiver.received() == []


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "10.1.2.3", "192.168.0.10", "172.16.5.5",
                                  "169.254.169.254", "[::1]", "0.0.0.0", "[::ffff:127.0.0.1]", "100.64.0.1"])
def test_private_loopback_and_link_local_callbacks_are_refused_at_save(settings, host):
    settings.LMSTFY_ALLOW_PRIVATE_CALLBACKS = False
    with pytest.raises(delivery.CallbackRefused):
        delivery.check_callback_url(f"http://{host}:8080/hook")


def test_a_public_address_is_accepted_at_save(settings):
    settings.LMSTFY_ALLOW_PRIVATE_CALLBACKS = False
    delivery.check_callback_url("https://93.184.216.34/hook")  # a literal: no DNS needed


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_loopback_callback_is_refused_at_send_and_nothing_reaches_the_receiver(settings, receiver, host):
    settings.LMSTFY_ALLOW_PRIVATE_CALLBACKS = False
    response = send(f"http://{host}:{receiver.port}/hook")
    assert (response.status, response.error) == (None, "blocked_address")
    assert receiver.received() == []


def test_a_topic_saved_while_private_callbacks_were_allowed_is_refused_at_send_later(
        settings, receiver, namespace, engine):
    """The guard at send checks the connected address, whatever was accepted at save."""
    settings.LMSTFY_ALLOW_PRIVATE_CALLBACKS = True
    make_topic(namespace, receiver, backoff="fixed", min_backoff_s=60)
    settings.LMSTFY_ALLOW_PRIVATE_CALLBACKS = False
    job_id = publish_and_deliver(engine)
    assert receiver.received() == []
    assert job_state(job_id).state.name == "DELAYED"  # a failed attempt, retried later

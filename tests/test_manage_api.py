"""The management API (/manage/v1/): auth, namespaces and topics CRUD with
validation, the attempt log, test deliveries, the expression checker and the
OpenAPI schema. Test deliveries go to a real local HTTP receiver."""
from __future__ import annotations

import base64

import pytest
from rest_framework.test import APIClient

from queues import inspect, keys
from queues.models import Namespace, Topic
from tests.push_helpers import POOL, standard_webhooks_valid

pytestmark = pytest.mark.django_db
TOPICS = "/manage/v1/topics/"


def results(response) -> list:
    body = response.json()
    return body["results"] if isinstance(body, dict) and "results" in body else body


def topic_payload(receiver, **fields) -> dict:
    return {"namespace": "ns", "queue": "q", "callback_url": receiver.url(), **fields}


@pytest.fixture
def plain_user(db):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user("plain", password="plain-password", is_staff=False)


def basic(username: str, password: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Basic " + base64.b64encode(f"{username}:{password}".encode()).decode())
    return client


# -- auth --------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/manage/v1/namespaces/", TOPICS, "/manage/v1/schema/"])
def test_no_credentials_get_401_with_www_authenticate(path):
    response = APIClient().get(path)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Basic")


def test_a_wrong_password_gets_401(staff_user):
    response = basic("staff", "wrong").get(TOPICS)
    assert response.status_code == 401
    assert "WWW-Authenticate" in response.headers


def test_the_expression_checker_needs_credentials_too():
    response = APIClient().post("/manage/v1/expressions/check/", {"expression": "true"}, format="json")
    assert response.status_code == 401


@pytest.mark.parametrize("path", ["/manage/v1/namespaces/", TOPICS, "/manage/v1/schema/"])
def test_a_valid_non_staff_user_gets_403(plain_user, path):
    assert basic("plain", "plain-password").get(path).status_code == 403


def test_a_non_staff_user_cannot_create_topics(plain_user, namespace, receiver, private_callbacks):
    response = basic("plain", "plain-password").post(TOPICS, topic_payload(receiver), format="json")
    assert response.status_code == 403
    assert not Topic.objects.exists()


def test_staff_with_basic_auth_is_allowed(admin_api, namespace):
    response = admin_api.get("/manage/v1/namespaces/")
    assert response.status_code == 200
    assert [n["name"] for n in results(response)] == ["ns"]


def test_staff_with_a_session_is_allowed(staff_user, namespace):
    client = APIClient()
    assert client.login(username="staff", password="staff-password")
    assert client.get("/manage/v1/namespaces/").status_code == 200


def test_a_non_staff_session_gets_403(plain_user):
    client = APIClient()
    assert client.login(username="plain", password="plain-password")
    assert client.get(TOPICS).status_code == 403


# -- namespaces --------------------------------------------------------------------------------
def test_namespaces_are_created_read_updated_and_deleted_by_name(admin_api):
    created = admin_api.post("/manage/v1/namespaces/", {"name": "billing", "description": "money"}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["name"] == "billing"
    assert admin_api.get("/manage/v1/namespaces/billing/").json()["description"] == "money"
    patched = admin_api.patch("/manage/v1/namespaces/billing/", {"description": "invoices"}, format="json")
    assert patched.status_code == 200
    assert Namespace.objects.get(name="billing").description == "invoices"
    assert admin_api.delete("/manage/v1/namespaces/billing/").status_code == 204
    assert admin_api.get("/manage/v1/namespaces/billing/").status_code == 404


def test_a_namespace_name_must_be_valid_and_unique(admin_api, namespace):
    bad = admin_api.post("/manage/v1/namespaces/", {"name": "has space"}, format="json")
    assert bad.status_code == 400
    assert "name" in bad.json()
    duplicate = admin_api.post("/manage/v1/namespaces/", {"name": "ns"}, format="json")
    assert duplicate.status_code == 400
    assert "name" in duplicate.json()


# -- topics ------------------------------------------------------------------------------------
def test_a_topic_is_created_with_the_documented_defaults(admin_api, namespace, receiver, private_callbacks):
    response = admin_api.post(TOPICS, topic_payload(receiver), format="json")
    assert response.status_code == 201, response.content
    topic = response.json()
    assert topic["namespace"] == "ns" and topic["queue"] == "q" and topic["callback_url"] == receiver.url()
    assert (topic["method"], topic["timeout_ms"], topic["max_attempts"], topic["backoff"]) == ("POST", 3000, 10, "dq")
    assert (topic["concurrency"], topic["rate_per_s"], topic["paused"]) == (10, 0, False)
    assert (topic["headers"], topic["alert_emails"], topic["retry_expression"]) == ({}, [], "")
    assert isinstance(topic["id"], int) and topic["created_at"]


def test_the_signing_secret_is_whsec_and_24_random_bytes(admin_api, namespace, receiver, private_callbacks):
    first = admin_api.post(TOPICS, topic_payload(receiver), format="json").json()["signing_secret"]
    second = admin_api.post(TOPICS, topic_payload(receiver, queue="q2"), format="json").json()["signing_secret"]
    for secret in (first, second):
        assert secret.startswith("whsec_")
        assert len(base64.b64decode(secret[len("whsec_"):], validate=True)) == 24
    assert first != second


def test_id_signing_secret_and_created_at_are_read_only(admin_api, namespace, receiver, private_callbacks):
    response = admin_api.post(TOPICS, topic_payload(receiver, id=999, signing_secret="whsec_AAAA",
                                                    created_at="2000-01-01T00:00:00Z"), format="json")
    assert response.status_code == 201
    topic = response.json()
    assert topic["id"] != 999 and topic["signing_secret"] != "whsec_AAAA"
    assert not topic["created_at"].startswith("2000")
    patched = admin_api.patch(f"{TOPICS}{topic['id']}/", {"signing_secret": "whsec_BBBB"}, format="json")
    assert patched.status_code == 200
    assert Topic.objects.get(id=topic["id"]).signing_secret == topic["signing_secret"]


def test_a_topic_can_be_read_updated_listed_and_deleted(admin_api, namespace, receiver, private_callbacks):
    topic_id = admin_api.post(TOPICS, topic_payload(receiver), format="json").json()["id"]
    patched = admin_api.patch(f"{TOPICS}{topic_id}/", {"paused": True, "backoff": "exponential", "min_backoff_s": 5,
                                                       "max_backoff_s": 600, "headers": {"X-Env": "prod"},
                                                       "alert_emails": ["ops@example.com"]}, format="json")
    assert patched.status_code == 200, patched.content
    stored = Topic.objects.get(id=topic_id)
    assert (stored.paused, stored.backoff, stored.headers, stored.alert_emails) == \
        (True, "exponential", {"X-Env": "prod"}, ["ops@example.com"])
    assert [t["id"] for t in results(admin_api.get(TOPICS))] == [topic_id]
    assert admin_api.get(f"{TOPICS}{topic_id}/").json()["paused"] is True
    assert admin_api.delete(f"{TOPICS}{topic_id}/").status_code == 204
    assert not Topic.objects.exists()


@pytest.mark.parametrize("field, value", [
    ("callback_url", "ftp://example.com/hook"),
    ("callback_url", "not a url"),
    ("timeout_ms", 99),
    ("timeout_ms", 60_001),
    ("max_attempts", 0),
    ("max_attempts", 101),
    ("method", "DELETE"),
    ("backoff", "linear"),
    ("concurrency", 0),
    ("rate_per_s", -1),
    ("headers", ["X-Env", "prod"]),
    ("headers", {"X-Lmstfy-Attempt": "1"}),
    ("headers", {"webhook-signature": "v1,forged"}),
    ("headers", {"Content-Type": "text/plain"}),
    ("headers", {"Host": "evil.example"}),
    ("headers", {"X-Bad": "a\r\nInjected: 1"}),
    ("headers", {"X-Number": 5}),
    ("alert_emails", ["not-an-email"]),
    ("alert_emails", "ops@example.com"),
    ("namespace", "missing"),
    ("queue", "bad queue name"),
])
def test_invalid_topic_fields_are_400_field_errors(admin_api, namespace, receiver, private_callbacks, field, value):
    response = admin_api.post(TOPICS, topic_payload(receiver, **{field: value}), format="json")
    assert response.status_code == 400, response.content
    errors = response.json()
    assert list(errors) == [field]
    assert isinstance(errors[field], list) and errors[field] and all(isinstance(m, str) for m in errors[field])
    assert not Topic.objects.exists()


@pytest.mark.parametrize("field, value", [("timeout_ms", 100), ("timeout_ms", 60_000), ("max_attempts", 1),
                                          ("max_attempts", 100), ("method", "GET"), ("backoff", "fixed")])
def test_boundary_values_are_accepted(admin_api, namespace, receiver, private_callbacks, field, value):
    response = admin_api.post(TOPICS, topic_payload(receiver, **{field: value}), format="json")
    assert response.status_code == 201, response.content
    assert response.json()[field] == value


def test_a_bad_retry_expression_is_refused_with_its_position(admin_api, namespace, receiver, private_callbacks):
    response = admin_api.post(TOPICS, topic_payload(receiver, retry_expression="{res.code} == 200 &&"),
                              format="json")
    assert response.status_code == 400
    [message] = response.json()["retry_expression"]
    assert "position 20" in message


def test_php_style_code_is_not_a_retry_expression(admin_api, namespace, receiver, private_callbacks):
    response = admin_api.post(TOPICS, topic_payload(receiver, retry_expression="system('id') || true"),
                              format="json")
    assert response.status_code == 400
    assert "position" in response.json()["retry_expression"][0]


def test_a_valid_retry_expression_is_stored(admin_api, namespace, receiver, private_callbacks):
    expression = "{res.code} != 200 && {res. data.status} != 2"
    response = admin_api.post(TOPICS, topic_payload(receiver, retry_expression=expression), format="json")
    assert response.status_code == 201
    assert Topic.objects.get().retry_expression == expression


def test_max_backoff_below_min_backoff_is_refused(admin_api, namespace, receiver, private_callbacks):
    response = admin_api.post(TOPICS, topic_payload(receiver, min_backoff_s=100, max_backoff_s=10), format="json")
    assert response.status_code == 400
    assert "max_backoff_s" in response.json()


def test_a_second_topic_for_the_same_queue_is_a_400(admin_api, namespace, receiver, private_callbacks):
    assert admin_api.post(TOPICS, topic_payload(receiver), format="json").status_code == 201
    response = admin_api.post(TOPICS, topic_payload(receiver, callback_url=receiver.url("/other")), format="json")
    assert response.status_code == 400
    assert "non_field_errors" in response.json() or "queue" in response.json()
    assert Topic.objects.count() == 1


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "10.0.0.8", "169.254.169.254", "[::1]"])
def test_a_private_callback_is_refused_at_save_unless_allowed(admin_api, namespace, settings, host):
    settings.LMSTFY_ALLOW_PRIVATE_CALLBACKS = False
    response = admin_api.post(TOPICS, {"namespace": "ns", "queue": "q", "callback_url": f"http://{host}:8080/hook"},
                              format="json")
    assert response.status_code == 400
    [message] = response.json()["callback_url"]
    assert "private" in message and "LMSTFY_ALLOW_PRIVATE_CALLBACKS" in message
    settings.LMSTFY_ALLOW_PRIVATE_CALLBACKS = True
    response = admin_api.post(TOPICS, {"namespace": "ns", "queue": "q", "callback_url": f"http://{host}:8080/hook"},
                              format="json")
    assert response.status_code == 201


def test_changing_a_callback_to_a_private_address_is_refused(admin_api, namespace, settings):
    settings.LMSTFY_ALLOW_PRIVATE_CALLBACKS = False
    topic = Topic.objects.create(namespace=namespace, queue="q", callback_url="https://93.184.216.34/hook")
    response = admin_api.patch(f"{TOPICS}{topic.id}/", {"callback_url": "http://127.0.0.1/hook"}, format="json")
    assert response.status_code == 400
    assert "callback_url" in response.json()
    topic.refresh_from_db()
    assert topic.callback_url == "https://93.184.216.34/hook"


# -- attempts and test deliveries --------------------------------------------------------------
def test_a_test_delivery_sends_one_signed_request_and_publishes_nothing(
        admin_api, namespace, receiver, private_callbacks, redis_client):
    topic = Topic.objects.create(namespace=namespace, queue="q", callback_url=receiver.url(),
                                 headers={"X-Env": "staging"}, max_attempts=4)
    response = admin_api.post(f"{TOPICS}{topic.id}/test/")
    assert response.status_code == 200, response.content
    record = response.json()
    [got] = receiver.received()
    assert got.method == "POST"
    assert got.header("X-Lmstfy-Namespace") == "ns" and got.header("X-Lmstfy-Queue") == "q"
    assert got.header("X-Lmstfy-Attempt") == "1" and got.header("X-Lmstfy-Max-Attempts") == "4"
    assert got.header("X-Env") == "staging"
    assert got.header("Content-Type") == "application/json"
    assert got.header("webhook-id") == got.header("X-Lmstfy-Job-Id") == record["job_id"]
    assert standard_webhooks_valid(topic.signing_secret, got)
    assert (record["attempt"], record["status"], record["error"], record["outcome"]) == (1, 200, "", "success")
    assert isinstance(record["duration_ms"], int) and record["at"]
    stats = inspect.queue_stats(POOL, "ns", "q").as_dict()
    assert (stats["ready"], stats["delayed"], stats["inflight"], stats["deadletter"]) == (0, 0, 0, 0)
    assert not redis_client.exists(keys.jobs("ns", "q"))
    logged = admin_api.get(f"{TOPICS}{topic.id}/attempts/").json()
    assert [r["job_id"] for r in results_or_list(logged)] == [record["job_id"]]


def results_or_list(body) -> list:
    return body["results"] if isinstance(body, dict) else body


def test_a_failing_test_delivery_reports_the_failure_without_dead_lettering(
        admin_api, namespace, receiver, private_callbacks):
    topic = Topic.objects.create(namespace=namespace, queue="q", callback_url=receiver.url())
    receiver.answer(status=410, body=b"gone for good")
    record = admin_api.post(f"{TOPICS}{topic.id}/test/").json()
    assert (record["status"], record["outcome"], record["response"]) == (410, "retry", "gone for good")
    assert inspect.dead_size(POOL, "ns", "q") == 0


def test_a_test_delivery_to_an_unreachable_callback_reports_the_error(admin_api, namespace, private_callbacks):
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    topic = Topic.objects.create(namespace=namespace, queue="q", callback_url=f"http://127.0.0.1:{port}/hook")
    record = admin_api.post(f"{TOPICS}{topic.id}/test/").json()
    assert (record["status"], record["error"], record["outcome"]) == (None, "connection", "retry")


def test_a_test_delivery_of_an_unknown_topic_is_404(admin_api):
    assert admin_api.post(f"{TOPICS}12345/test/").status_code == 404


def test_attempts_of_an_unknown_topic_are_404(admin_api):
    assert admin_api.get(f"{TOPICS}12345/attempts/").status_code == 404


# -- expression checker ------------------------------------------------------------------------
def test_the_expression_checker_gives_the_verdict(admin_api):
    check = "/manage/v1/expressions/check/"
    retry = admin_api.post(check, {"expression": "{res.code} != 200", "status": 200, "body": '{"code": 500}'},
                           format="json")
    assert retry.status_code == 200
    assert retry.json() == {"valid": True, "error": None, "retry": True}
    success = admin_api.post(check, {"expression": "{res.code} != 200 || {status} >= 300", "status": 200,
                                     "body": '{"code": "200"}'}, format="json")
    assert success.json() == {"valid": True, "error": None, "retry": False}


def test_the_expression_checker_names_the_position_of_an_error(admin_api):
    response = admin_api.post("/manage/v1/expressions/check/", {"expression": "{res.code} === 1"}, format="json")
    assert response.status_code == 200
    answer = response.json()
    assert answer["valid"] is False and answer["retry"] is None
    assert "position" in answer["error"]


def test_the_expression_checker_defaults_to_status_200_and_an_empty_body(admin_api):
    response = admin_api.post("/manage/v1/expressions/check/", {"expression": "{status} == 200 && {res} == null"},
                              format="json")
    assert response.json() == {"valid": True, "error": None, "retry": True}


def test_the_expression_checker_validates_its_input(admin_api):
    response = admin_api.post("/manage/v1/expressions/check/", {"status": "abc"}, format="json")
    assert response.status_code == 400
    assert {"expression", "status"} <= set(response.json())


# -- schema ------------------------------------------------------------------------------------
def test_the_openapi_schema_describes_the_management_api(admin_api):
    response = admin_api.get("/manage/v1/schema/?format=json")
    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    paths = schema["paths"]
    for path in ("/manage/v1/namespaces/", "/manage/v1/namespaces/{name}/", "/manage/v1/topics/",
                 "/manage/v1/topics/{id}/", "/manage/v1/topics/{id}/attempts/", "/manage/v1/topics/{id}/test/",
                 "/manage/v1/expressions/check/"):
        assert path in paths, path
    topic = schema["components"]["schemas"]["Topic"]
    assert {"id", "signing_secret", "created_at"} <= {
        name for name, field in topic["properties"].items() if field.get("readOnly")}

"""The management API's alert rules (/manage/v1/alert-rules/) and alert history
(/manage/v1/alert-events/): staff only, validation in DRF's field-error shape,
the topics' SSRF rule on webhook URLs, read-only events newest first."""
from __future__ import annotations

import base64
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from queues.models import AlertEvent, AlertRule, Namespace

pytestmark = pytest.mark.django_db
RULES = "/manage/v1/alert-rules/"
EVENTS = "/manage/v1/alert-events/"


def results(response) -> list:
    body = response.json()
    return body["results"] if isinstance(body, dict) and "results" in body else body


def payload(**fields) -> dict:
    return {"name": "orders backlog", "kind": "backlog_above", "threshold": 1000, **fields}


def create(admin_api, **fields) -> dict:
    response = admin_api.post(RULES, payload(**fields), format="json")
    assert response.status_code == 201, response.content
    return response.json()


# -- auth --------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", [RULES, EVENTS])
def test_no_credentials_get_401_with_www_authenticate(path):
    response = APIClient().get(path)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Basic")


@pytest.mark.parametrize("path", [RULES, EVENTS])
def test_a_valid_non_staff_user_gets_403(path):
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_user("plain", password="plain-password")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Basic " + base64.b64encode(b"plain:plain-password").decode())
    assert client.get(path).status_code == 403
    assert client.post(RULES, payload(), format="json").status_code == 403
    assert not AlertRule.objects.exists()


# -- rules ---------------------------------------------------------------------------------------
def test_a_rule_is_created_with_the_documented_defaults(admin_api):
    body = create(admin_api)

    assert body["namespace"] is None and body["queue_pattern"] == "*"
    assert (body["threshold"], body["window_s"], body["cooldown_s"]) == (1000, 300, 900)
    assert body["emails"] == [] and body["webhook_url"] == "" and body["enabled"] is True
    assert body["firing"] is False and body["last_notified_at"] is None
    assert set(body) == {"id", "name", "kind", "namespace", "queue_pattern", "threshold", "window_s", "cooldown_s",
                         "emails", "webhook_url", "enabled", "firing", "last_notified_at", "created_at"}


def test_a_namespace_is_referred_to_by_name(admin_api, namespace):
    body = create(admin_api, namespace="ns", queue_pattern="orders-*")

    assert body["namespace"] == "ns"
    assert AlertRule.objects.get(id=body["id"]).namespace == namespace
    response = admin_api.post(RULES, payload(name="other", namespace="missing"), format="json")
    assert response.status_code == 400 and "namespace" in response.json()


@pytest.mark.parametrize("kind, expected", [("backlog_above", 1000), ("delivery_failure_rate", 0.5),
                                            ("consumer_idle", 10), ("schedule_missed", 60),
                                            ("delivery_exhausted", 0)])
def test_a_rule_without_a_threshold_gets_its_kinds_default(admin_api, kind, expected):
    response = admin_api.post(RULES, {"name": kind, "kind": kind}, format="json")

    assert response.status_code == 201, response.content
    assert response.json()["threshold"] == expected


@pytest.mark.parametrize("field, value", [
    ("kind", "disk_full"),
    ("threshold", -1),
    ("window_s", 0),
    ("cooldown_s", -5),
    ("emails", ["not an address"]),
    ("emails", "ops@example.com"),
    ("webhook_url", "ftp://example.com/hook"),
    ("name", ""),
])
def test_invalid_rule_fields_are_400_field_errors(admin_api, field, value):
    response = admin_api.post(RULES, payload(**{field: value}), format="json")

    assert response.status_code == 400
    assert field in response.json()


def test_a_failure_rate_is_a_fraction_not_a_percent(admin_api):
    response = admin_api.post(RULES, payload(kind="delivery_failure_rate", threshold=20), format="json")

    assert response.status_code == 400
    assert "fraction" in response.json()["threshold"][0]
    assert create(admin_api, kind="delivery_failure_rate", threshold=0.2)["threshold"] == 0.2


def test_a_webhook_url_to_a_private_address_is_refused_like_a_topics_callback(admin_api, settings):
    settings.LMSTFY_ALLOW_PRIVATE_CALLBACKS = False

    response = admin_api.post(RULES, payload(webhook_url="http://127.0.0.1:8080/hook"), format="json")

    assert response.status_code == 400
    assert "private" in response.json()["webhook_url"][0]


def test_a_private_webhook_url_is_accepted_when_private_callbacks_are_allowed(admin_api, private_callbacks):
    body = create(admin_api, webhook_url="http://127.0.0.1:8080/hook", emails=["ops@example.com"])

    assert body["webhook_url"] == "http://127.0.0.1:8080/hook" and body["emails"] == ["ops@example.com"]


def test_rule_names_are_unique(admin_api):
    create(admin_api)

    response = admin_api.post(RULES, payload(), format="json")

    assert response.status_code == 400 and "name" in response.json()


def test_rules_are_listed_updated_and_deleted(admin_api):
    rule = create(admin_api)
    assert [r["name"] for r in results(admin_api.get(RULES))] == ["orders backlog"]

    response = admin_api.patch(f"{RULES}{rule['id']}/", {"threshold": 50, "enabled": False}, format="json")
    assert response.status_code == 200, response.content
    assert (response.json()["threshold"], response.json()["enabled"]) == (50, False)

    assert admin_api.delete(f"{RULES}{rule['id']}/").status_code == 204
    assert not AlertRule.objects.exists()


def test_changing_the_kind_checks_the_threshold_again(admin_api):
    rule = create(admin_api, threshold=500)

    response = admin_api.patch(f"{RULES}{rule['id']}/", {"kind": "delivery_failure_rate"}, format="json")

    assert response.status_code == 400 and "threshold" in response.json()


def test_firing_and_last_notified_at_are_read_only(admin_api):
    rule = create(admin_api)

    admin_api.patch(f"{RULES}{rule['id']}/", {"firing": True, "last_notified_at": "2030-01-01T00:00:00Z"},
                    format="json")

    stored = AlertRule.objects.get(id=rule["id"])
    assert stored.firing is False and stored.last_notified_at is None


# -- events ----------------------------------------------------------------------------------------
def test_alert_events_are_listed_newest_first_with_their_rule(admin_api):
    rule = AlertRule.objects.create(name="backlog", kind="backlog_above")
    now = timezone.now()
    old = AlertEvent.objects.create(rule=rule, kind="backlog_above", namespace="ns", queue="q", message="old",
                                    details={"subject": "queue:default:ns/q"}, fired_at=now - timedelta(hours=1),
                                    resolved_at=now - timedelta(minutes=30))
    new = AlertEvent.objects.create(rule=rule, kind="backlog_above", namespace="ns", queue="q", message="new",
                                    details={"subject": "queue:default:ns/q"}, fired_at=now)
    record = AlertEvent.objects.create(kind="delivery_exhausted", namespace="ns", queue="q", message="dead",
                                       fired_at=now - timedelta(minutes=5))

    listed = results(admin_api.get(EVENTS))

    assert [e["id"] for e in listed] == [new.id, record.id, old.id]
    first = listed[0]
    assert (first["rule"], first["rule_name"], first["message"], first["firing"]) == (rule.id, "backlog", "new", True)
    assert first["resolved_at"] is None and first["fired_at"]
    assert {"rule", "fired_at", "resolved_at", "message", "kind", "namespace", "queue", "details"} <= set(first)
    assert listed[1]["rule"] is None and listed[1]["firing"] is False
    assert listed[2]["resolved_at"] is not None


def test_alert_events_filter_by_rule_kind_and_state(admin_api):
    one = AlertRule.objects.create(name="one", kind="backlog_above")
    two = AlertRule.objects.create(name="two", kind="redis_down")
    firing = AlertEvent.objects.create(rule=one, kind="backlog_above", message="firing")
    AlertEvent.objects.create(rule=one, kind="backlog_above", message="done", resolved_at=timezone.now())
    down = AlertEvent.objects.create(rule=two, kind="redis_down", message="down")

    assert {e["message"] for e in results(admin_api.get(EVENTS, {"rule": one.id}))} == {"firing", "done"}
    assert [e["id"] for e in results(admin_api.get(EVENTS, {"kind": "redis_down"}))] == [down.id]
    assert {e["id"] for e in results(admin_api.get(EVENTS, {"firing": "true"}))} == {firing.id, down.id}
    assert [e["message"] for e in results(admin_api.get(EVENTS, {"firing": "false"}))] == ["done"]


def test_alert_events_are_read_only(admin_api):
    event = AlertEvent.objects.create(kind="delivery_exhausted", message="dead")

    assert admin_api.post(EVENTS, {"kind": "x", "message": "y"}, format="json").status_code == 405
    assert admin_api.patch(f"{EVENTS}{event.id}/", {"message": "changed"}, format="json").status_code == 405
    assert admin_api.delete(f"{EVENTS}{event.id}/").status_code == 405
    assert admin_api.get(f"{EVENTS}{event.id}/").json()["message"] == "dead"


def test_the_openapi_schema_describes_alert_rules_and_events(admin_api):
    schema = admin_api.get("/manage/v1/schema/", {"format": "json"}).json()

    assert "/manage/v1/alert-rules/" in schema["paths"] and "/manage/v1/alert-events/" in schema["paths"]
    assert "post" not in schema["paths"]["/manage/v1/alert-events/"]


def test_a_namespace_deleted_takes_its_rules_with_it(admin_api):
    ns = Namespace.objects.create(name="gone")
    create(admin_api, namespace="gone")

    ns.delete()

    assert not AlertRule.objects.exists()

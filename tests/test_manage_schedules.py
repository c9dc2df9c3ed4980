"""The management API's schedules (/manage/v1/schedules/): staff only, CRUD with
validation in DRF's field-error shape, read-only fields, next_fire_times, and
edits that reschedule (or not)."""
from __future__ import annotations

import base64
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from rest_framework.test import APIClient

from queues import scheduler
from queues.models import Schedule

pytestmark = pytest.mark.django_db
SCHEDULES = "/manage/v1/schedules/"
UTC = timezone.utc


def results(response) -> list:
    body = response.json()
    return body["results"] if isinstance(body, dict) and "results" in body else body


def payload(**fields) -> dict:
    return {"namespace": "ns", "queue": "reports", "name": "nightly", "spec": "30 2 * * *", **fields}


def parse_times(values: list[str]) -> list[datetime]:
    return [datetime.fromisoformat(value.replace("Z", "+00:00")) for value in values]


def create(admin_api, **fields) -> dict:
    response = admin_api.post(SCHEDULES, payload(**fields), format="json")
    assert response.status_code == 201, response.content
    return response.json()


# -- auth --------------------------------------------------------------------------------------
def test_no_credentials_get_401_with_www_authenticate():
    response = APIClient().get(SCHEDULES)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Basic")


def test_a_valid_non_staff_user_gets_403_and_creates_nothing(namespace):
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_user("plain", password="plain-password")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Basic " + base64.b64encode(b"plain:plain-password").decode())
    assert client.get(SCHEDULES).status_code == 403
    assert client.post(SCHEDULES, payload(), format="json").status_code == 403
    assert not Schedule.objects.exists()


# -- create and read -----------------------------------------------------------------------------------
def test_a_schedule_is_created_with_the_documented_defaults(admin_api, namespace):
    schedule = create(admin_api)

    assert schedule["namespace"] == "ns" and schedule["queue"] == "reports" and schedule["name"] == "nightly"
    assert (schedule["timezone"], schedule["body"], schedule["tries"], schedule["ttl"], schedule["priority"]) == \
        ("UTC", "", 1, 86400, 0)
    assert (schedule["enabled"], schedule["catch_up"], schedule["pool"]) == (True, "skip", "default")
    assert schedule["last_fired_at"] is None and schedule["recent_fires"] == []
    assert isinstance(schedule["id"], int)


def test_next_fire_times_are_the_next_five_ticks_in_iso_8601(admin_api, namespace):
    before = datetime.now(UTC)
    schedule = create(admin_api, spec="30 2 * * *", timezone="Europe/Berlin")

    times = parse_times(schedule["next_fire_times"])

    assert len(times) == 5 and all(value.endswith("Z") for value in schedule["next_fire_times"])
    assert before < times[0] <= before + timedelta(days=1, hours=1)
    assert times == sorted(times) and len(set(times)) == 5
    assert {t.astimezone(ZoneInfo("Europe/Berlin")).strftime("%H:%M") for t in times} <= {"02:30", "03:00"}
    assert times[0] == Schedule.objects.get(id=schedule["id"]).next_fire_at


def test_next_fire_times_of_an_every_spec_are_one_period_apart(admin_api, namespace):
    schedule = create(admin_api, spec="@every 30s")

    times = parse_times(schedule["next_fire_times"])

    assert [b - a for a, b in zip(times, times[1:])] == [timedelta(seconds=30)] * 4
    assert times[0] - datetime.now(UTC) <= timedelta(seconds=30)


def test_next_fire_times_follow_the_fires(admin_api, namespace):
    schedule_id = create(admin_api, spec="0 * * * *")["id"]
    Schedule.objects.filter(id=schedule_id).update(next_fire_at=datetime.now(UTC) - timedelta(seconds=1))
    assert scheduler.fire_due_schedules() == 1

    shown = admin_api.get(f"{SCHEDULES}{schedule_id}/").json()

    times = parse_times(shown["next_fire_times"])
    assert times[0] > datetime.now(UTC) and (times[0].minute, times[0].second) == (0, 0)
    assert shown["last_fired_at"] is not None
    assert shown["recent_fires"][0]["job_id"]


def test_a_disabled_schedule_shows_no_next_fire_times(admin_api, namespace):
    schedule = create(admin_api, enabled=False)

    assert schedule["next_fire_times"] == []
    assert Schedule.objects.get(id=schedule["id"]).next_fire_at is None


def test_body_keeps_its_whitespace(admin_api, namespace):
    assert create(admin_api, body='  {"a": 1}\n')["body"] == '  {"a": 1}\n'


def test_id_last_fired_at_and_recent_fires_are_read_only(admin_api, namespace):
    schedule = create(admin_api, id=999, last_fired_at="2000-01-01T00:00:00Z",
                      recent_fires=[{"tick": "forged"}], next_fire_times=["2000-01-01T00:00:00Z"])

    assert schedule["id"] != 999 and schedule["last_fired_at"] is None and schedule["recent_fires"] == []
    assert parse_times(schedule["next_fire_times"])[0] > datetime.now(UTC)


# -- validation --------------------------------------------------------------------------------------
@pytest.mark.parametrize("field, value", [
    ("spec", "not cron"),
    ("spec", "61 * * * *"),
    ("spec", "* * * *"),
    ("spec", "0 0 * * * *"),
    ("spec", "0 0 31 2 *"),
    ("spec", "@daily"),
    ("spec", "@every 0s"),
    ("spec", "@every 5d"),
    ("spec", "@every s"),
    ("timezone", "Mars/Olympus_Mons"),
    ("timezone", ""),
    ("tries", 0),
    ("tries", 65536),
    ("priority", -1),
    ("priority", 256),
    ("ttl", -1),
    ("catch_up", "always"),
    ("namespace", "missing"),
    ("queue", "bad queue name"),
    ("pool", "no-such-pool"),
    ("name", ""),
])
def test_invalid_schedule_fields_are_400_field_errors(admin_api, namespace, field, value):
    response = admin_api.post(SCHEDULES, payload(**{field: value}), format="json")

    assert response.status_code == 400, response.content
    errors = response.json()
    assert list(errors) == [field]
    assert isinstance(errors[field], list) and errors[field] and all(isinstance(m, str) for m in errors[field])
    assert not Schedule.objects.exists()


@pytest.mark.parametrize("field, value", [("spec", "@every 1s"), ("spec", "@every 90m"), ("spec", "@every 24h"),
                                          ("spec", "*/5 9-17 * * 1-5"), ("spec", "0 0 29 2 *"),
                                          ("timezone", "America/Argentina/Buenos_Aires"), ("tries", 1),
                                          ("tries", 65535), ("priority", 255), ("ttl", 0), ("catch_up", "once")])
def test_boundary_values_are_accepted(admin_api, namespace, field, value):
    response = admin_api.post(SCHEDULES, payload(**{field: value}), format="json")
    assert response.status_code == 201, response.content


def test_a_schedule_name_is_unique_per_namespace(admin_api, namespace):
    create(admin_api)

    duplicate = admin_api.post(SCHEDULES, payload(queue="other"), format="json")

    assert duplicate.status_code == 400
    assert "non_field_errors" in duplicate.json()
    assert Schedule.objects.count() == 1


def test_a_spec_error_names_the_problem(admin_api, namespace):
    every = admin_api.post(SCHEDULES, payload(spec="@every 0s"), format="json").json()
    never = admin_api.post(SCHEDULES, payload(spec="0 0 31 2 *"), format="json").json()
    zone = admin_api.post(SCHEDULES, payload(timezone="Europe/Atlantis"), format="json").json()

    assert "@every <n>s" in every["spec"][0]
    assert "never fires" in never["spec"][0]
    assert "Europe/Atlantis" in zone["timezone"][0]


# -- update, list, delete ---------------------------------------------------------------------------------
def test_changing_the_spec_reschedules_and_other_edits_do_not(admin_api, namespace):
    schedule_id = create(admin_api, spec="0 * * * *")["id"]
    pinned = datetime.now(UTC) + timedelta(minutes=7)
    Schedule.objects.filter(id=schedule_id).update(next_fire_at=pinned)

    body_only = admin_api.patch(f"{SCHEDULES}{schedule_id}/", {"body": "new", "priority": 3}, format="json")
    assert body_only.status_code == 200, body_only.content
    assert Schedule.objects.get(id=schedule_id).next_fire_at == pinned

    respec = admin_api.patch(f"{SCHEDULES}{schedule_id}/", {"spec": "@every 10s"}, format="json")
    assert respec.status_code == 200, respec.content
    times = parse_times(respec.json()["next_fire_times"])
    assert times[0] <= datetime.now(UTC) + timedelta(seconds=10)
    assert Schedule.objects.get(id=schedule_id).next_fire_at == times[0]


def test_disabling_and_enabling_through_the_api(admin_api, namespace):
    schedule_id = create(admin_api)["id"]

    off = admin_api.patch(f"{SCHEDULES}{schedule_id}/", {"enabled": False}, format="json").json()
    on = admin_api.patch(f"{SCHEDULES}{schedule_id}/", {"enabled": True}, format="json").json()

    assert off["next_fire_times"] == []
    assert len(on["next_fire_times"]) == 5


def test_schedules_are_listed_and_deleted(admin_api, namespace):
    first = create(admin_api, name="a")["id"]
    second = create(admin_api, name="b", spec="@every 5m")["id"]

    assert [s["id"] for s in results(admin_api.get(SCHEDULES))] == [first, second]
    assert admin_api.delete(f"{SCHEDULES}{first}/").status_code == 204
    assert [s["id"] for s in results(admin_api.get(SCHEDULES))] == [second]


def test_the_openapi_schema_describes_schedules(admin_api):
    response = admin_api.get("/manage/v1/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    schema = response.json()
    assert "/manage/v1/schedules/" in schema["paths"]
    properties = schema["components"]["schemas"]["Schedule"]["properties"]
    assert properties["next_fire_times"]["type"] == "array"
    assert properties["next_fire_times"]["readOnly"] is True

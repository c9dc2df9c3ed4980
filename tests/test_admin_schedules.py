"""The web admin's schedules page (/admin/queues/schedules/) and the Django admin
registration of Schedule."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from django.test import Client

from queues import scheduler
from queues.models import Schedule

pytestmark = pytest.mark.django_db
PAGE = "/admin/queues/schedules/"
UTC = timezone.utc


def test_the_page_needs_a_staff_login(db):
    response = Client().get(PAGE)
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_it_lists_schedules_with_their_next_five_fire_times_and_an_edit_link(staff_client, namespace):
    schedule = Schedule.objects.create(namespace=namespace, name="nightly", queue="reports", spec="30 2 * * *",
                                       timezone="Europe/Berlin")

    response = staff_client.get(PAGE)

    assert response.status_code == 200
    html = response.content.decode()
    assert "ns/nightly" in html and "30 2 * * *" in html and "Europe/Berlin" in html
    upcoming = scheduler.upcoming_fire_times(schedule, datetime.now(UTC))
    assert len(upcoming) == 5
    for tick in upcoming:
        assert tick.strftime("%Y-%m-%d %H:%M:%S") in html
    assert f'href="/admin/queues/schedule/{schedule.id}/change/"' in html
    assert "never fired" in html


def test_it_shows_the_last_fires_and_skipped_ticks(staff_client, namespace):
    now = datetime.now(UTC).replace(microsecond=0)
    schedule = Schedule.objects.create(namespace=namespace, name="hourly", queue="q", spec="0 * * * *",
                                       next_fire_at=now - timedelta(hours=3))
    scheduler.fire_due_schedules(now)  # three hours late: skipped
    Schedule.objects.filter(id=schedule.id).update(next_fire_at=now - timedelta(seconds=1))
    scheduler.fire_due_schedules(now)  # on time: fired
    job_id = Schedule.objects.get(id=schedule.id).recent_fires[0]["job_id"]

    html = staff_client.get(PAGE).content.decode()

    assert job_id in html
    assert "skipped" in html
    assert (now - timedelta(hours=3)).strftime("%Y-%m-%d %H:%M:%S") in html


def test_an_overdue_schedule_is_flagged(staff_client, namespace):
    Schedule.objects.create(namespace=namespace, name="stuck", queue="q", spec="0 * * * *",
                            next_fire_at=datetime.now(UTC) - timedelta(minutes=5))

    assert "overdue since" in staff_client.get(PAGE).content.decode()


def test_the_namespace_filter(staff_client, namespace):
    from queues.models import Namespace

    other = Namespace.objects.create(name="other")
    Schedule.objects.create(namespace=namespace, name="mine", queue="q", spec="@every 1m")
    Schedule.objects.create(namespace=other, name="theirs", queue="q", spec="@every 1m")

    html = staff_client.get(PAGE + "?ns=other").content.decode()

    assert "other/theirs" in html and "ns/mine" not in html


def test_the_django_admin_edits_a_schedule_and_reschedules_it(superuser_client, namespace):
    schedule = Schedule.objects.create(namespace=namespace, name="n", queue="q", spec="0 * * * *")
    assert superuser_client.get(f"/admin/queues/schedule/{schedule.id}/change/").status_code == 200
    assert superuser_client.get("/admin/queues/schedule/").status_code == 200

    response = superuser_client.post(f"/admin/queues/schedule/{schedule.id}/change/", {
        "namespace": namespace.id, "queue": "q", "pool": "default", "name": "n", "spec": "@every 10s",
        "timezone": "UTC", "body": "", "tries": 1, "ttl": 60, "priority": 0, "enabled": "on", "catch_up": "skip"})

    assert response.status_code == 302, response.content.decode()[:2000]
    schedule.refresh_from_db()
    assert schedule.spec == "@every 10s"
    assert schedule.next_fire_at <= datetime.now(UTC) + timedelta(seconds=10)


def test_the_django_admin_shows_a_bad_spec_as_a_form_error(superuser_client, namespace):
    response = superuser_client.post("/admin/queues/schedule/add/", {
        "namespace": namespace.id, "queue": "q", "pool": "default", "name": "n", "spec": "0 0 31 2 *",
        "timezone": "UTC", "body": "", "tries": 1, "ttl": 60, "priority": 0, "catch_up": "skip"})

    assert response.status_code == 200
    assert "never fires" in response.content.decode()
    assert not Schedule.objects.exists()

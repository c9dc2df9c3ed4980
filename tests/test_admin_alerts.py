"""The web admin's alerts pages (/admin/queues/alerts/ and .../history/) and the
Django admin registration of AlertRule."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from queues import alerts
from queues.models import AlertEvent, AlertRule, Namespace

pytestmark = pytest.mark.django_db
RULES_PAGE = "/admin/queues/alerts/"
HISTORY_PAGE = "/admin/queues/alerts/history/"


def fire(rule: AlertRule, message: str, minutes_ago: int = 0, resolved: bool = False) -> AlertEvent:
    at = timezone.now() - timedelta(minutes=minutes_ago)
    return AlertEvent.objects.create(rule=rule, kind=rule.kind, namespace="ns", queue="q", message=message,
                                     details={"subject": "queue:default:ns/q"}, fired_at=at,
                                     resolved_at=at + timedelta(seconds=30) if resolved else None)


@pytest.mark.parametrize("page", [RULES_PAGE, HISTORY_PAGE])
def test_the_pages_need_a_staff_login(db, page):
    response = Client().get(page)
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_the_rules_page_lists_rules_with_their_state_an_edit_link_and_an_add_link(staff_client):
    ns = Namespace.objects.create(name="shop")
    backlog = AlertRule.objects.create(name="orders backlog", kind="backlog_above", namespace=ns,
                                       queue_pattern="orders-*", threshold=500, emails=["ops@example.com"])
    rate = AlertRule.objects.create(name="hooks failing", kind="delivery_failure_rate", threshold=0.25, window_s=600,
                                    webhook_url="https://hooks.example.com/alerts", enabled=False)
    fire(backlog, "shop/orders-eu has 900 ready jobs (threshold 500)")

    response = staff_client.get(RULES_PAGE)

    assert response.status_code == 200
    html = response.content.decode()
    assert "orders backlog" in html and "shop, queues orders-*" in html and "&gt; 500 ready jobs" in html
    assert "ops@example.com" in html and "firing (1)" in html
    assert "&gt; 25% of attempts in 600 s" in html and "disabled" in html
    assert "webhook https://hooks.example.com/alerts" in html
    assert f'href="/admin/queues/alertrule/{backlog.id}/change/"' in html
    assert f'href="/admin/queues/alertrule/{rate.id}/change/"' in html
    assert 'href="/admin/queues/alertrule/add/"' in html
    assert "No pumper has evaluated the rules yet" in html


def test_the_rules_page_tells_who_evaluates_and_when_nobody_does(staff_client):
    now = timezone.now()
    alerts.take_lease(alerts.LEASE_NAME, "host:42:abc", now)
    assert "by pumper <code>host:42:abc</code>" in staff_client.get(RULES_PAGE).content.decode()

    alerts.release_lease(alerts.LEASE_NAME, "host:42:abc", now - timedelta(minutes=1))
    assert "No pumper holds the evaluation lease" in staff_client.get(RULES_PAGE).content.decode()


def test_the_history_shows_events_newest_first_with_firing_ones_highlighted(staff_client):
    rule = AlertRule.objects.create(name="orders backlog", kind="backlog_above")
    old = fire(rule, "the old one", minutes_ago=60, resolved=True)
    new = fire(rule, "the new one", minutes_ago=1)
    record = AlertEvent.objects.create(kind="delivery_exhausted", namespace="ns", queue="pay", message="job x dead",
                                       fired_at=timezone.now() - timedelta(minutes=30))

    html = staff_client.get(HISTORY_PAGE).content.decode()

    assert html.index("the new one") < html.index("job x dead") < html.index("the old one")
    assert f'<tr id="event-{new.id}" class="firing">' in html
    assert f'<tr id="event-{old.id}">' in html and f'<tr id="event-{record.id}">' in html
    assert ">resolved<" in html and ">record<" in html


def test_the_history_filters_by_rule_and_state(staff_client):
    one = AlertRule.objects.create(name="one", kind="backlog_above")
    two = AlertRule.objects.create(name="two", kind="deadletter_above")
    fire(one, "one firing")
    fire(one, "one resolved", minutes_ago=5, resolved=True)
    fire(two, "two firing")

    by_rule = staff_client.get(HISTORY_PAGE, {"rule": one.id}).content.decode()
    assert "one firing" in by_rule and "one resolved" in by_rule and "two firing" not in by_rule
    firing = staff_client.get(HISTORY_PAGE, {"state": "firing"}).content.decode()
    assert "one firing" in firing and "two firing" in firing and "one resolved" not in firing


def test_the_history_shows_channels_that_failed(staff_client):
    rule = AlertRule.objects.create(name="r", kind="backlog_above")
    AlertEvent.objects.create(rule=rule, kind="backlog_above", message="m",
                              details={"notify_errors": ["firing webhook: status 500"]})

    assert "not told: firing webhook: status 500" in staff_client.get(HISTORY_PAGE).content.decode()


def test_the_django_admin_edits_a_rule_and_refuses_a_private_webhook(superuser_client, settings):
    settings.LMSTFY_ALLOW_PRIVATE_CALLBACKS = False
    rule = AlertRule.objects.create(name="r", kind="backlog_above", threshold=10)
    url = f"/admin/queues/alertrule/{rule.id}/change/"
    form = {"name": "r", "kind": "backlog_above", "queue_pattern": "*", "threshold": "20", "window_s": "300",
            "cooldown_s": "900", "emails": "[]", "webhook_url": "http://10.0.0.1/hook", "enabled": "on"}

    assert superuser_client.get(url).status_code == 200
    refused = superuser_client.post(url, form)
    assert refused.status_code == 200 and "private" in refused.content.decode()
    assert superuser_client.post(url, {**form, "webhook_url": ""}).status_code == 302
    rule.refresh_from_db()
    assert rule.threshold == 20


def test_the_django_admin_refuses_a_failure_rate_in_percent(superuser_client):
    form = {"name": "rate", "kind": "delivery_failure_rate", "queue_pattern": "*", "threshold": "20",
            "window_s": "300", "cooldown_s": "900", "emails": "[]", "webhook_url": "", "enabled": "on"}

    response = superuser_client.post("/admin/queues/alertrule/add/", form)

    assert response.status_code == 200 and "fraction" in response.content.decode()
    assert not AlertRule.objects.exists()

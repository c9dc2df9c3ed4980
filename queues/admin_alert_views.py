"""The alerts pages of the web admin (SPEC §7.6):

    /admin/queues/alerts/                 rules: scope, threshold, channels, state; edit / add links
    /admin/queues/alerts/history/         events, newest first, firing ones highlighted
                                          (?rule=<id>, ?state=firing|resolved)

Rules are edited in their Django admin change form. Read-only and database-only:
they never talk to Redis, so they render while a pool is down — when they matter
most. Routes: queues/admin_urls.py ("alerts/", "alerts/history/").
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.contrib import admin
from django.contrib.admin.views.decorators import staff_member_required
from django.core.paginator import Paginator
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from queues import alerts
from queues.models import AlertEvent, AlertRule, Lease

HISTORY_PAGE_SIZE = 100


@dataclass(frozen=True)
class RuleLine:
    rule: AlertRule
    scope: str
    threshold: str
    open_alerts: int
    change_url: str
    history_url: str


@dataclass(frozen=True)
class EvaluatorState:
    """Who holds the evaluation lease; `stale` when nobody has renewed it for a while."""

    owner: str
    expires_at: datetime | None
    stale: bool


def rule_scope(rule: AlertRule) -> str:
    if rule.kind in (AlertRule.Kind.REDIS_DOWN, AlertRule.Kind.AUTH_FAILURES_ABOVE):
        return "the whole deployment"
    namespace = rule.namespace.name if rule.namespace_id is not None else "every namespace"
    return f"{namespace}, queues {rule.queue_pattern or '*'}"


def rule_threshold(rule: AlertRule) -> str:
    if rule.kind == AlertRule.Kind.REDIS_DOWN:
        return "—"
    if rule.kind == AlertRule.Kind.DELIVERY_FAILURE_RATE:
        return f"> {rule.threshold:.0%} of attempts in {rule.window_s} s"
    text = f"> {alerts.figure(rule.threshold)} {alerts.THRESHOLD_UNITS.get(rule.kind, '')}"
    windowed = (AlertRule.Kind.DELIVERY_EXHAUSTED, AlertRule.Kind.AUTH_FAILURES_ABOVE)
    return text.replace(" in the window", f" in {rule.window_s} s") if rule.kind in windowed else text


def rule_line(rule: AlertRule) -> RuleLine:
    return RuleLine(rule=rule, scope=rule_scope(rule), threshold=rule_threshold(rule),
                    open_alerts=rule.open_alerts,
                    change_url=reverse("admin:queues_alertrule_change", args=[rule.id]),
                    history_url=reverse("queues_admin:alert_history") + f"?rule={rule.id}")


def evaluator_state(now: datetime) -> EvaluatorState | None:
    lease = Lease.objects.filter(name=alerts.LEASE_NAME).first()
    if lease is None:
        return None
    return EvaluatorState(owner=lease.owner, expires_at=lease.expires_at,
                          stale=not lease.owner or lease.expires_at < now)


@staff_member_required
@never_cache
@require_GET
def alert_rules(request: HttpRequest) -> HttpResponse:
    """Every rule with its scope, threshold, channels and how many of its alerts are firing."""
    rules = (AlertRule.objects.select_related("namespace")
             .annotate(open_alerts=Count("events", filter=Q(events__resolved_at__isnull=True))))
    now = timezone.now()
    context = {
        **admin.site.each_context(request),
        "title": "Alert rules",
        "nav": "alerts",
        "breadcrumbs": [("Alerts", None)],
        "lines": [rule_line(rule) for rule in rules],
        "firing_count": AlertEvent.objects.filter(resolved_at__isnull=True, rule__isnull=False).count(),
        "evaluator": evaluator_state(now),
        "interval_s": alerts.EVALUATION_INTERVAL_S,
        "add_url": reverse("admin:queues_alertrule_add"),
        "history_url": reverse("queues_admin:alert_history"),
    }
    return render(request, "queues/alerts.html", context)


def filtered_events(request: HttpRequest) -> tuple[QuerySet[AlertEvent], AlertRule | None, str]:
    events = AlertEvent.objects.select_related("rule")
    rule = None
    rule_id = request.GET.get("rule", "")
    if rule_id.isdigit():
        rule = AlertRule.objects.filter(id=int(rule_id)).first()
        events = events.filter(rule_id=int(rule_id))
    state = request.GET.get("state", "")
    if state == "firing":
        events = events.filter(resolved_at__isnull=True, rule__isnull=False)
    elif state == "resolved":
        events = events.exclude(resolved_at__isnull=True, rule__isnull=False)
    else:
        state = ""
    return events.order_by("-fired_at", "-id"), rule, state


@staff_member_required
@never_cache
@require_GET
def alert_history(request: HttpRequest) -> HttpResponse:
    """Alert events, newest first. Events without a rule are the notifier's own
    delivery_exhausted records (a rule of that kind turns them into alerts)."""
    events, rule, state = filtered_events(request)
    page = Paginator(events, HISTORY_PAGE_SIZE).get_page(request.GET.get("page"))
    query = "".join(f"&{name}={value}" for name, value in (("rule", rule.id if rule else ""), ("state", state))
                    if value)
    context = {
        **admin.site.each_context(request),
        "title": "Alert history" + (f": {rule.name}" if rule else ""),
        "nav": "alerts",
        "breadcrumbs": [("Alerts", reverse("queues_admin:alerts")), ("History", None)],
        "page": page,
        "events": list(page.object_list),
        "rule": rule,
        "state": state,
        "query": query,
        "rules_url": reverse("queues_admin:alerts"),
        "rule_query": f"rule={rule.id}&" if rule else "",
    }
    return render(request, "queues/alerts_history.html", context)

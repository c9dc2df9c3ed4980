"""The schedules page of the web admin (/admin/queues/schedules/, SPEC §7.5):
every schedule with its next fire times, its last fires and skipped (missed)
ticks, and a link to its Django admin change form, where it is edited.

Read-only and database-only: it never talks to Redis, so it renders while a
pool is down. Route: queues/admin_urls.py ("schedules/", name "schedules").
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django.contrib import admin
from django.contrib.admin.views.decorators import staff_member_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from queues import pools, scheduler
from queues.models import Schedule

PAGE_SIZE = 100
# next_fire_at further in the past than this means no pumper is firing schedules.
OVERDUE_AFTER = timedelta(seconds=scheduler.ON_TIME_FLOOR_S)


@dataclass(frozen=True)
class FireTime:
    utc: datetime
    local: datetime | None  # in the schedule's time zone, when that is not UTC


@dataclass(frozen=True)
class PastFire:
    """One entry of Schedule.recent_fires, ready to show."""

    at: datetime | None
    tick: FireTime | None   # None: a pass that skipped missed ticks without firing
    job_id: str | None
    job_url: str
    missed_since: FireTime | None
    catch_up: bool


@dataclass(frozen=True)
class ScheduleLine:
    schedule: Schedule
    next_fires: list[FireTime]
    overdue_since: datetime | None
    past_fires: list[PastFire]
    change_url: str
    queue_url: str


def fire_time(moment: datetime, zone_name: str) -> FireTime:
    if zone_name == "UTC":
        return FireTime(utc=moment, local=None)
    return FireTime(utc=moment, local=moment.astimezone(ZoneInfo(zone_name)))


def optional_fire_time(text: str | None, zone_name: str) -> FireTime | None:
    moment = parse_datetime(text) if text else None
    return fire_time(moment, zone_name) if moment else None


def dashboard_url(view: str, schedule: Schedule, *args: str) -> str:
    """A link into the dashboard's queue pages (queues/admin_urls.py), kept in the
    schedule's pool; empty if that page is not there."""
    try:
        path = reverse(f"queues_admin:{view}", args=[schedule.namespace.name, schedule.queue, *args])
    except NoReverseMatch:
        return ""
    return path if schedule.pool == pools.DEFAULT_POOL else f"{path}?pool={schedule.pool}"


def past_fire(schedule: Schedule, entry: dict) -> PastFire:
    job_id = entry.get("job_id")
    return PastFire(at=parse_datetime(entry["at"]) if entry.get("at") else None,
                    tick=optional_fire_time(entry.get("tick"), schedule.timezone), job_id=job_id,
                    job_url=dashboard_url("job", schedule, job_id) if job_id else "",
                    missed_since=optional_fire_time(entry.get("missed_since"), schedule.timezone),
                    catch_up=bool(entry.get("catch_up")))


def schedule_line(schedule: Schedule, now: datetime) -> ScheduleLine:
    overdue = (schedule.enabled and schedule.next_fire_at is not None
               and now - schedule.next_fire_at > OVERDUE_AFTER)
    return ScheduleLine(
        schedule=schedule,
        next_fires=[fire_time(tick, schedule.timezone) for tick in scheduler.upcoming_fire_times(schedule, now)],
        overdue_since=schedule.next_fire_at if overdue else None,
        past_fires=[past_fire(schedule, entry) for entry in schedule.recent_fires or []],
        change_url=reverse("admin:queues_schedule_change", args=[schedule.id]),
        queue_url=dashboard_url("queue", schedule))


@staff_member_required
@never_cache
@require_GET
def schedule_list(request: HttpRequest) -> HttpResponse:
    """Schedules, optionally of one namespace (`?ns=`), by namespace and name."""
    schedules = Schedule.objects.select_related("namespace")
    ns_filter = request.GET.get("ns", "").strip()
    if ns_filter:
        schedules = schedules.filter(namespace__name=ns_filter)
    page = Paginator(schedules, PAGE_SIZE).get_page(request.GET.get("page"))
    now = timezone.now()
    context = {
        **admin.site.each_context(request),
        "title": "Schedules",
        "nav": "schedules",
        "now": now,
        "page": page,
        "lines": [schedule_line(schedule, now) for schedule in page.object_list],
        "ns_filter": ns_filter,
        "add_url": reverse("admin:queues_schedule_add"),
        "upcoming_shown": scheduler.UPCOMING_SHOWN,
        "grace_s": scheduler.MISFIRE_GRACE_S,
        "floor_s": scheduler.ON_TIME_FLOOR_S,
    }
    return render(request, "queues/schedules.html", context)

"""Recurring jobs: when a schedule's ticks fall, and the pumper's duty that
fires the due ones, each tick exactly once.

Ticks
-----
A spec is a 5-field cron expression, read by croniter in the schedule's IANA
time zone, or `@every <n>s|m|h`, a fixed period anchored at the previous tick
(no drift: tick k+1 = tick k + period, whenever the pass that fired tick k ran).

DST (croniter 7 semantics, plus one rule of ours, as Vixie cron does it):
- spring forward: a wall time inside the gap (02:30 in Europe/Berlin on the last
  Sunday of March) fires at the first instant after the gap (03:00 CEST = 01:00 UTC);
- fall back: croniter yields both occurrences of a repeated wall time (02:30 CEST
  and 02:30 CET). A job at fixed hours fires at the first one only; a job whose
  hour field is `*` (hourly or finer) fires at both, since they are distinct hours.

Catch-up
--------
A tick is *on time* while less than min(its period, MISFIRE_GRACE_S) has passed
since it, and never less than ON_TIME_FLOOR_S (so a pumper pass every second, the
command loop's 5 s back-off or a quick restart never make a tick late). Older
due ticks were *missed* (the pumper was down or stalled):
- `skip`: each on-time tick fires; missed ticks are skipped (and recorded);
- `once`: as skip, but when a pass finds missed ticks and no on-time tick, it
  fires one job for all of them.
Either way the schedule then continues from its first tick after now, so a
restart after an outage fires at most ceil(ON_TIME_FLOOR_S / period) jobs per
schedule (one for any period of 10 s or more): no storm.

Exactly once
------------
Each fire is one database transaction:
1. claim: `UPDATE ... SET next_fire_at = <the next one> WHERE id = X AND
   next_fire_at = <the value read>`; 0 rows means another scheduler got there
   first, and we stop. The row lock is held until commit, so a competing claim
   waits (as long as our publish: bounded by the Redis socket timeout) and then
   matches 0 rows (PostgreSQL re-checks the WHERE on the new row version).
2. publish the job to Redis with the idempotency key `schedule:<id>:<tick>`;
3. record the fire (last_fired_at, recent_fires) and commit.
If the publish fails (Redis down), the transaction rolls back: the tick stays
due and the next pass retries it (or, once it is no longer on time, counts it missed).
If the publish succeeded but the commit did not (crash, lost database), the
tick is claimed again later and the idempotency key turns the second publish
into a no-op. The race we accept: that key lives 24 h in Redis, so a duplicate
needs a succeeded publish, a failed commit and no scheduler able to commit that
claim for 24 h (only `once` would then fire the catch-up again).
"""
from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from itertools import islice
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

import redis
from croniter import croniter
from django.db import DatabaseError, transaction
from django.utils import timezone as django_timezone

if TYPE_CHECKING:
    from queues.engine import Engine
    from queues.models import Schedule

log = logging.getLogger(__name__)

MISFIRE_GRACE_S = 60      # a tick seen later than this (or than its period) was missed...
ON_TIME_FLOOR_S = 10      # ...but a tick is always on time for this long
UPCOMING_SHOWN = 5        # next_fire_times in the API and the admin page
RECENT_FIRES_KEPT = 10
SCHEDULES_PER_PASS = 1000  # due schedules handled per pass; the rest wait for the next (<= 1 s)
_MAX_ON_TIME = timedelta(seconds=max(MISFIRE_GRACE_S, ON_TIME_FLOOR_S))
_JUST_BEFORE = timedelta(microseconds=1)

_EVERY = re.compile(r"^@every\s+(\d+)\s*([smh])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600}


def parse_every(spec: str) -> int | None:
    """Seconds of an `@every <n>s|m|h` spec, or None if it is not one."""
    match = _EVERY.match(spec.strip())
    if not match or int(match.group(1)) < 1:
        return None
    return int(match.group(1)) * _UNIT_S[match.group(2)]


# -- ticks -------------------------------------------------------------------------

def next_fire_times(schedule: Schedule, after: datetime, n: int) -> list[datetime]:
    """The first `n` ticks strictly after `after`, as aware UTC datetimes."""
    return list(islice(ticks_after(schedule, after), n))


def ticks_after(schedule: Schedule, after: datetime) -> Iterator[datetime]:
    """Every tick strictly after `after`, in order (an endless iterator)."""
    every = parse_every(schedule.spec)
    if every is not None:
        anchor = schedule.next_fire_at or after.replace(microsecond=0)
        return _every_ticks(timedelta(seconds=every), anchor, after)
    return _cron_ticks(schedule.spec, ZoneInfo(schedule.timezone), after)


def _every_ticks(period: timedelta, anchor: datetime, after: datetime) -> Iterator[datetime]:
    """anchor + k·period for every k with a tick after `after` (k may be negative)."""
    tick = anchor + (((after - anchor) // period) + 1) * period
    while True:
        yield tick.astimezone(timezone.utc)
        tick += period


def _cron_ticks(spec: str, zone: ZoneInfo, after: datetime) -> Iterator[datetime]:
    fires_every_hour = spec.split()[1] in ("*", "*/1")
    cron = croniter(spec, after.astimezone(zone))
    last = after
    while True:
        local = cron.get_next(datetime)
        tick = local.astimezone(timezone.utc)
        if tick <= last:
            continue  # defensive: never yield a tick twice or out of order
        if not fires_every_hour and _is_repeated_wall_time(local, zone):
            continue  # fall back: a fixed-hour job already fired at the first occurrence
        last = tick
        yield tick


def _is_repeated_wall_time(local: datetime, zone: ZoneInfo) -> bool:
    """The second occurrence of an ambiguous wall time (the hour repeated at fall back)."""
    wall = local.astimezone(zone)
    return wall.fold == 1 and wall.replace(fold=0).utcoffset() != wall.utcoffset()


def upcoming_fire_times(schedule: Schedule, now: datetime, n: int = UPCOMING_SHOWN) -> list[datetime]:
    """The next `n` ticks the scheduler will consider: next_fire_at and its successors,
    from now on (an overdue next_fire_at — the pumper is down — is not listed).
    A disabled schedule has none."""
    if not schedule.enabled or schedule.next_fire_at is None:
        return []
    if schedule.next_fire_at >= now:
        return [schedule.next_fire_at, *next_fire_times(schedule, schedule.next_fire_at, n - 1)][:n]
    return next_fire_times(schedule, now - _JUST_BEFORE, n)


def on_time_window(schedule: Schedule, tick: datetime) -> timedelta:
    """How long after `tick` firing it is still on time (see the module docstring)."""
    period = next_fire_times(schedule, tick, 1)[0] - tick
    window = min(period, timedelta(seconds=MISFIRE_GRACE_S))
    return max(window, timedelta(seconds=ON_TIME_FLOOR_S))


@dataclass(frozen=True)
class TickPlan:
    """What one pass does with a due schedule."""

    fire: list[datetime]           # ticks to publish, oldest first
    missed_since: datetime | None  # the first missed tick, when some were missed
    following: datetime            # the first tick after now: the next next_fire_at

    @property
    def catches_up(self) -> bool:
        """`once` fires the first missed tick to stand for all of them."""
        return bool(self.fire) and self.fire[0] == self.missed_since


def plan_ticks(schedule: Schedule, now: datetime) -> TickPlan:
    """Split the due ticks (next_fire_at .. now) into on-time and missed ones.

    Ticks older than the widest on-time window cannot be on time, so they are
    jumped over rather than listed (an `@every 1s` schedule down for a day has
    86 400 of them)."""
    first_due = schedule.next_fire_at
    assert first_due is not None and first_due <= now
    oldest_on_time = now - _MAX_ON_TIME
    if first_due >= oldest_on_time:
        candidates = [first_due, *until(ticks_after(schedule, first_due), now)]
    else:
        candidates = list(until(ticks_after(schedule, oldest_on_time - _JUST_BEFORE), now))
    on_time = [tick for tick in candidates if now - tick < on_time_window(schedule, tick)]
    missed_since = None if on_time and on_time[0] == first_due else first_due
    fire = on_time
    if not on_time and schedule.catch_up == schedule.CatchUp.ONCE:
        fire = [first_due]
    return TickPlan(fire=fire, missed_since=missed_since, following=next_fire_times(schedule, now, 1)[0])


def until(ticks: Iterator[datetime], end: datetime) -> Iterator[datetime]:
    """The ticks up to and including `end`."""
    for tick in ticks:
        if tick > end:
            return
        yield tick


def first_tick_from_now(schedule: Schedule, now: datetime | None = None) -> datetime:
    """The next_fire_at of a new or rescheduled schedule. Clears the old one first,
    so that `@every` anchors at now rather than at the old grid."""
    schedule.next_fire_at = None
    return next_fire_times(schedule, now or django_timezone.now(), 1)[0]


def reschedule_on_save(schedule: Schedule, now: datetime | None = None) -> bool:
    """Model save hook: set next_fire_at when the schedule is new or its timing
    changed. Returns whether it did, so that an edit writes next_fire_at back only
    then (see Schedule.SCHEDULER_FIELDS)."""
    if schedule._state.adding:
        if schedule.next_fire_at is None and schedule.enabled:
            schedule.next_fire_at = first_tick_from_now(schedule, now)
        return True
    before = type(schedule).objects.filter(pk=schedule.pk).values("spec", "timezone", "enabled").first()
    timing = {"spec": schedule.spec, "timezone": schedule.timezone, "enabled": schedule.enabled}
    if before == timing:
        return False
    # Disabled time is not "missed": re-enabling starts from the next tick after now.
    schedule.next_fire_at = first_tick_from_now(schedule, now) if schedule.enabled else None
    return True


# -- firing ------------------------------------------------------------------------

class Engines:
    """One Engine per pool, made on first use."""

    def __init__(self) -> None:
        self._by_pool: dict[str, Engine] = {}

    def __call__(self, pool: str) -> Engine:
        from queues.engine import Engine

        if pool not in self._by_pool:
            self._by_pool[pool] = Engine(pool)
        return self._by_pool[pool]


def fire_due_schedules(now: datetime | None = None, engines: Engines | None = None) -> int:
    """The pumper's scheduler duty: fire every enabled schedule due at `now`.
    Returns how many jobs it published.

    A pool whose Redis fails is left alone for the rest of the pass (its ticks
    stay due); database errors propagate (Pumper.fire_schedules logs them and
    lets the timers go on)."""
    from queues import pools
    from queues.models import Schedule

    now = now or django_timezone.now()
    engines = engines or Engines()
    due = (Schedule.objects.filter(enabled=True, next_fire_at__lte=now)
           .select_related("namespace").order_by("next_fire_at")[:SCHEDULES_PER_PASS])
    published = 0
    failing_pools: set[str] = set()
    for schedule in due:
        if schedule.pool in failing_pools:
            continue
        try:
            published += fire_schedule(schedule, now, engines(schedule.pool))
        except (redis.RedisError, pools.UnknownPool) as exc:
            failing_pools.add(schedule.pool)
            log.warning("schedule %s: pool %r unavailable (%s); its ticks stay due", label(schedule),
                        schedule.pool, exc)
        except DatabaseError:
            raise
        except Exception:  # one broken schedule must stop neither the others nor the pumper
            log.exception("schedule %s: cannot fire; its ticks stay due", label(schedule))
    return published


def fire_schedule(schedule: Schedule, now: datetime, engine: Engine) -> int:
    """Fire the ticks of one due schedule; return how many jobs it published.

    Steps: plan the ticks; if none fires, claim the skip alone; else claim and
    publish tick by tick, each claim moving next_fire_at to the next tick to fire
    (the last to the first tick after now). Stops at the first lost claim."""
    plan = plan_ticks(schedule, now)
    expected = schedule.next_fire_at
    if not plan.fire:
        with transaction.atomic():
            claimed = claim_tick(schedule.id, expected, plan.following, fired_at=None)
            if claimed:
                record(schedule, skipped_entry(plan, now))
        if claimed:
            log.warning("schedule %s: skipped the ticks missed since %s (catch_up=skip); next at %s",
                        label(schedule), plan.missed_since.isoformat(), plan.following.isoformat())
        return 0
    published = 0
    for index, tick in enumerate(plan.fire):
        after_this = plan.fire[index + 1] if index + 1 < len(plan.fire) else plan.following
        if not fire_tick(schedule, plan, tick, expected, after_this, now, engine):
            break  # another scheduler got there first; it fires the rest
        published += 1
        expected = after_this
    return published


def fire_tick(schedule: Schedule, plan: TickPlan, tick: datetime, expected: datetime, after_this: datetime,
              now: datetime, engine: Engine) -> bool:
    """Claim, publish and record one tick in one transaction (see "Exactly once").
    Returns False when the claim was lost. A Redis error rolls the claim back."""
    with transaction.atomic():
        if not claim_tick(schedule.id, expected, after_this, fired_at=now):
            return False
        job_id, duplicated = publish_tick(schedule, tick, now, engine)
        record(schedule, fire_entry(plan, tick, now, job_id))
    if duplicated:
        log.info("schedule %s: tick %s was already published as %s (an earlier attempt did not commit)",
                 label(schedule), tick.isoformat(), job_id)
    return True


def claim_tick(schedule_id: int, expected: datetime, after_this: datetime, *, fired_at: datetime | None) -> bool:
    """Move next_fire_at from the value we read to the next tick. Returns False when
    0 rows matched: another scheduler got there first (or the schedule was edited
    or disabled meanwhile)."""
    from queues.models import Schedule

    changes: dict = {"next_fire_at": after_this}
    if fired_at is not None:
        changes["last_fired_at"] = fired_at
    return Schedule.objects.filter(id=schedule_id, enabled=True, next_fire_at=expected).update(**changes) == 1


def idempotency_key(schedule_id: int, tick: datetime) -> str:
    return f"schedule:{schedule_id}:{int(tick.timestamp())}"


def publish_tick(schedule: Schedule, tick: datetime, now: datetime, engine: Engine) -> tuple[str, bool]:
    """Publish the schedule's job for `tick`; returns (job id, was already published)."""
    published = engine.publish(schedule.namespace.name, schedule.queue, [schedule.body.encode()],
                               ttl_s=schedule.ttl, tries=schedule.tries, priority=schedule.priority,
                               idempotency_key=idempotency_key(schedule.id, tick),
                               now=int(now.timestamp() * 1000))
    return published.job_ids[0], published.duplicated


# -- history -----------------------------------------------------------------------

def fire_entry(plan: TickPlan, tick: datetime, now: datetime, job_id: str) -> dict:
    entry = {"tick": tick.isoformat(), "at": now.isoformat(), "job_id": job_id}
    if plan.missed_since is not None and tick == plan.fire[0]:
        entry["missed_since"] = plan.missed_since.isoformat()
        entry["catch_up"] = plan.catches_up
    return entry


def skipped_entry(plan: TickPlan, now: datetime) -> dict:
    return {"tick": None, "at": now.isoformat(), "job_id": None, "missed_since": plan.missed_since.isoformat(),
            "catch_up": False}


def record(schedule: Schedule, entry: dict) -> None:
    """Prepend `entry` to recent_fires, in the transaction of the claim that earned it.

    No re-read: only claims write recent_fires, each with a move of next_fire_at, so
    the history we read along with the next_fire_at our claim matched is still current
    (and we hold the row lock until commit)."""
    schedule.recent_fires = [entry, *(schedule.recent_fires or [])][:RECENT_FIRES_KEPT]
    type(schedule).objects.filter(id=schedule.id).update(recent_fires=schedule.recent_fires)


def label(schedule: Schedule) -> str:
    return f"{schedule.namespace.name}/{schedule.name}"

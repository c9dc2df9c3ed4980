"""Recurring jobs (queues/scheduler.py): ticks (cron in a time zone, DST, `@every`),
catch-up after an outage (skip, once), exactly-once firing with three concurrent
schedulers, restarts, Redis and database failures around the publish, and the
pumper duty. Time is a parameter: every pass gets its `now`."""
from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
import redis
from django.core.management import call_command
from django.db import DatabaseError, connection

from queues import keys, scheduler
from queues.engine import Engine
from queues.models import Namespace, Schedule
from queues.pumper import Pumper
from tests.testutil import job, queue_state

UTC = timezone.utc
BERLIN = ZoneInfo("Europe/Berlin")
T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)  # a Monday, on the hour


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def seconds(n: float) -> timedelta:
    return timedelta(seconds=n)


def make_schedule(namespace: Namespace, name: str = "nightly", *, next_fire_at: datetime | None = T0,
                  **fields) -> Schedule:
    """A schedule whose next tick is pinned (the save hook keeps an explicit next_fire_at)."""
    fields = {"queue": "q", "spec": "0 * * * *", **fields}
    return Schedule.objects.create(namespace=namespace, name=name, next_fire_at=next_fire_at, **fields)


def fired_ticks(schedule: Schedule) -> list[datetime]:
    """The ticks that published a job, oldest first."""
    schedule.refresh_from_db()
    return [datetime.fromisoformat(entry["tick"]) for entry in reversed(schedule.recent_fires) if entry["job_id"]]


def ready_count(redis_client: redis.Redis, queue: str = "q") -> int:
    return redis_client.zcard(keys.ready("ns", queue))


def run_pumper_through(schedule: Schedule, until: datetime, lateness: timedelta = seconds(2)) -> list[datetime]:
    """A pumper that wakes `lateness` after each due tick until `until`; returns the passes' times."""
    passes = []
    while True:
        schedule.refresh_from_db()
        now = schedule.next_fire_at + lateness
        if now > until:
            return passes
        scheduler.fire_due_schedules(now)
        passes.append(now)


# -- ticks ---------------------------------------------------------------------------------------
def test_next_fire_times_of_a_cron_spec_are_in_its_time_zone(namespace):
    schedule = make_schedule(namespace, spec="0 9 * * 1-5", timezone="Europe/Berlin")

    ticks = scheduler.next_fire_times(schedule, at("2026-01-09 12:00"), 3)  # a Friday

    assert ticks == [at("2026-01-12 08:00"), at("2026-01-13 08:00"), at("2026-01-14 08:00")]  # 09:00 CET


def test_every_ticks_are_anchored_at_the_previous_tick_and_do_not_drift(namespace):
    schedule = make_schedule(namespace, spec="@every 30s", next_fire_at=T0)

    assert scheduler.fire_due_schedules(T0 + seconds(7)) == 1  # a late pass...
    schedule.refresh_from_db()

    assert schedule.next_fire_at == T0 + seconds(30)  # ...does not move the grid
    assert scheduler.next_fire_times(schedule, T0 + seconds(7), 3) == [T0 + seconds(30), T0 + seconds(60),
                                                                       T0 + seconds(90)]


def test_an_every_30s_schedule_fires_every_30_seconds(namespace, redis_client):
    schedule = make_schedule(namespace, spec="@every 30s", next_fire_at=T0)

    passes = run_pumper_through(schedule, T0 + timedelta(minutes=5), lateness=seconds(1))

    assert len(passes) == 10
    assert fired_ticks(schedule) == [T0 + seconds(30 * k) for k in range(10)]
    assert ready_count(redis_client) == 10


def test_a_new_schedule_first_fires_at_its_next_tick_after_creation(namespace):
    before = datetime.now(UTC)
    every = Schedule.objects.create(namespace=namespace, name="every", queue="q", spec="@every 1h")
    hourly = Schedule.objects.create(namespace=namespace, name="hourly", queue="q", spec="0 * * * *")

    assert before + seconds(3599) <= every.next_fire_at <= datetime.now(UTC) + seconds(3600)
    assert every.next_fire_at.microsecond == 0
    assert hourly.next_fire_at > before and (hourly.next_fire_at.minute, hourly.next_fire_at.second) == (0, 0)
    assert scheduler.fire_due_schedules(datetime.now(UTC)) == 0


# -- DST (croniter semantics, plus the fall-back rule of Vixie cron) ------------------------------
def test_spring_forward_fires_a_time_in_the_gap_once_right_after_the_gap(namespace, redis_client):
    # 2024-03-31 in Berlin: 02:00 CET jumps to 03:00 CEST, so 02:30 does not exist that day.
    schedule = make_schedule(namespace, spec="30 2 * * *", timezone="Europe/Berlin",
                             next_fire_at=at("2024-03-30 01:30"))

    run_pumper_through(schedule, at("2024-04-02 12:00"))

    assert fired_ticks(schedule) == [at("2024-03-30 01:30"),  # 02:30 CET
                                     at("2024-03-31 01:00"),  # croniter: 03:00 CEST, the end of the gap
                                     at("2024-04-01 00:30"),  # 02:30 CEST
                                     at("2024-04-02 00:30")]
    assert ready_count(redis_client) == 4


def test_fall_back_fires_a_repeated_time_once_at_its_first_occurrence(namespace, redis_client):
    # 2024-10-27 in Berlin: 03:00 CEST goes back to 02:00 CET, so 02:30 happens twice.
    schedule = make_schedule(namespace, spec="30 2 * * *", timezone="Europe/Berlin",
                             next_fire_at=at("2024-10-26 00:30"))

    run_pumper_through(schedule, at("2024-10-29 12:00"))

    assert fired_ticks(schedule) == [at("2024-10-26 00:30"),  # 02:30 CEST
                                     at("2024-10-27 00:30"),  # 02:30 CEST, first occurrence; not 01:30 UTC
                                     at("2024-10-28 01:30"),  # 02:30 CET
                                     at("2024-10-29 01:30")]
    assert ready_count(redis_client) == 4
    assert [t.astimezone(BERLIN).strftime("%H:%M") for t in fired_ticks(schedule)] == ["02:30"] * 4


def test_an_hourly_job_fires_in_both_repeated_hours_because_they_are_different_hours(namespace):
    schedule = make_schedule(namespace, spec="30 * * * *", timezone="Europe/Berlin", next_fire_at=None,
                             enabled=False)

    ticks = scheduler.next_fire_times(schedule, at("2024-10-26 23:00"), 4)

    assert ticks == [at("2024-10-26 23:30"), at("2024-10-27 00:30"), at("2024-10-27 01:30"), at("2024-10-27 02:30")]


def test_dst_rules_hold_in_other_zones_too(namespace):
    schedule = make_schedule(namespace, spec="30 1 * * *", timezone="America/New_York", next_fire_at=None,
                             enabled=False)

    # 2024-11-03: 01:30 EDT then 01:30 EST; 2024-03-10: 02:00 EST jumps to 03:00 EDT (01:30 exists).
    assert scheduler.next_fire_times(schedule, at("2024-11-02 12:00"), 3) == [
        at("2024-11-03 05:30"), at("2024-11-04 06:30"), at("2024-11-05 06:30")]
    assert scheduler.next_fire_times(schedule, at("2024-03-09 12:00"), 2) == [at("2024-03-10 06:30"),
                                                                               at("2024-03-11 05:30")]


# -- the job ---------------------------------------------------------------------------------------
def test_the_job_lands_in_the_schedules_queue_with_its_body_tries_ttl_and_priority(namespace, redis_client):
    schedule = make_schedule(namespace, queue="reports", body='{"report": "daily"}', tries=4, ttl=600,
                             priority=7)

    assert scheduler.fire_due_schedules(T0 + seconds(1)) == 1

    [job_id] = queue_state(redis_client, "ns", "reports")["ready"]
    stored = job(redis_client, "ns", "reports", job_id)
    assert stored.body == b'{"report": "daily"}'
    assert (stored.tries, stored.priority) == (4, 7)
    assert stored.expire_at == int((T0 + seconds(1)).timestamp() * 1000) + 600_000
    schedule.refresh_from_db()
    assert schedule.last_fired_at == T0 + seconds(1)
    assert schedule.recent_fires[0] == {"tick": T0.isoformat(), "at": (T0 + seconds(1)).isoformat(),
                                        "job_id": job_id}
    assert schedule.next_fire_at == T0 + timedelta(hours=1)


def test_a_fired_job_can_be_consumed_like_any_other(namespace, redis_client):
    now = datetime.now(UTC)
    make_schedule(namespace, queue="work", body="hello", next_fire_at=now - seconds(1))

    assert scheduler.fire_due_schedules(now) == 1

    consumed = Engine().consume("ns", ["work"], ttr_s=30)
    assert [j.body for j in consumed.jobs] == [b"hello"]


# -- catch-up -----------------------------------------------------------------------------------------
def test_skip_fires_nothing_for_ticks_missed_during_an_outage_and_resumes_at_the_next_tick(namespace,
                                                                                          redis_client):
    schedule = make_schedule(namespace, spec="0 * * * *", next_fire_at=at("2026-01-05 10:00"))

    assert scheduler.fire_due_schedules(at("2026-01-05 12:20")) == 0  # back after 10:00, 11:00 and 12:00

    schedule.refresh_from_db()
    assert ready_count(redis_client) == 0
    assert schedule.next_fire_at == at("2026-01-05 13:00")
    assert schedule.recent_fires[0]["job_id"] is None
    assert schedule.recent_fires[0]["missed_since"] == at("2026-01-05 10:00").isoformat()
    assert scheduler.fire_due_schedules(at("2026-01-05 13:00:01")) == 1


def test_skip_still_fires_the_latest_tick_when_it_is_recent(namespace, redis_client):
    schedule = make_schedule(namespace, spec="0 * * * *", next_fire_at=at("2026-01-05 10:00"))

    assert scheduler.fire_due_schedules(at("2026-01-05 12:00:30")) == 1  # 12:00 is 30 s late: on time

    assert fired_ticks(schedule) == [at("2026-01-05 12:00")]
    assert schedule.recent_fires[0]["missed_since"] == at("2026-01-05 10:00").isoformat()
    assert schedule.next_fire_at == at("2026-01-05 13:00")


@pytest.mark.parametrize(("late_s", "fires"), [(0, 1), (9, 1), (59, 1), (60, 0), (3599, 0)])
def test_an_hourly_tick_is_on_time_for_a_minute(namespace, late_s, fires):
    make_schedule(namespace, spec="0 * * * *", next_fire_at=T0)

    assert scheduler.fire_due_schedules(T0 + seconds(late_s)) == fires


def test_a_short_period_tick_is_on_time_for_the_floor_not_just_its_period(namespace):
    schedule = make_schedule(namespace, spec="@every 2s", next_fire_at=T0)

    # A pass 7 s late (a slow pass, a quick restart): the ticks of the last 10 s all fire, each once.
    assert scheduler.fire_due_schedules(T0 + seconds(7)) == 4

    assert fired_ticks(schedule) == [T0, T0 + seconds(2), T0 + seconds(4), T0 + seconds(6)]
    assert schedule.next_fire_at == T0 + seconds(8)


def test_a_restart_after_a_long_outage_fires_no_storm(namespace, redis_client):
    for name, spec in [("fast", "@every 1s"), ("half-minute", "@every 30s"), ("minutely", "* * * * *"),
                       ("hourly", "0 * * * *")]:
        make_schedule(namespace, name, spec=spec, queue=name, next_fire_at=T0)

    fired = scheduler.fire_due_schedules(T0 + timedelta(hours=6, minutes=5, seconds=15))

    # Only the ticks of the last 10 s (fast), or the latest one while it is younger than its
    # period (30 s, 1 min); the 6:00 tick of the hourly schedule is 5 minutes late: missed.
    counts = {q: ready_count(redis_client, q) for q in ("fast", "half-minute", "minutely", "hourly")}
    assert counts == {"fast": 10, "half-minute": 1, "minutely": 1, "hourly": 0}
    assert fired == 12


def test_once_fires_one_job_for_all_the_ticks_missed_during_an_outage(namespace, redis_client):
    schedule = make_schedule(namespace, spec="0 * * * *", catch_up="once", next_fire_at=at("2026-01-05 10:00"))

    assert scheduler.fire_due_schedules(at("2026-01-05 12:20")) == 1
    assert scheduler.fire_due_schedules(at("2026-01-05 12:20")) == 0

    schedule.refresh_from_db()
    assert ready_count(redis_client) == 1
    assert schedule.recent_fires[0]["tick"] == at("2026-01-05 10:00").isoformat()
    assert schedule.recent_fires[0]["catch_up"] is True
    assert schedule.next_fire_at == at("2026-01-05 13:00")
    assert scheduler.fire_due_schedules(at("2026-01-05 13:00:02")) == 1


def test_once_does_not_add_a_catch_up_job_when_an_on_time_tick_fires_anyway(namespace, redis_client):
    schedule = make_schedule(namespace, spec="0 * * * *", catch_up="once", next_fire_at=at("2026-01-05 10:00"))

    assert scheduler.fire_due_schedules(at("2026-01-05 12:00:05")) == 1

    assert fired_ticks(schedule) == [at("2026-01-05 12:00")]
    assert ready_count(redis_client) == 1


# -- enabled / edits ------------------------------------------------------------------------------------
def test_a_disabled_schedule_never_fires(namespace, redis_client):
    schedule = make_schedule(namespace, spec="@every 1s", enabled=False, next_fire_at=T0)

    for step in range(0, 120, 5):
        assert scheduler.fire_due_schedules(T0 + seconds(step)) == 0

    assert ready_count(redis_client) == 0
    schedule.refresh_from_db()
    assert schedule.last_fired_at is None


def test_disabling_clears_the_next_tick_and_enabling_starts_from_now_without_catching_up(namespace,
                                                                                       redis_client):
    schedule = make_schedule(namespace, spec="0 * * * *", catch_up="once", next_fire_at=T0)
    schedule.enabled = False
    schedule.save()
    assert Schedule.objects.get(id=schedule.id).next_fire_at is None

    schedule.enabled = True
    schedule.save()

    schedule.refresh_from_db()
    now = datetime.now(UTC)
    assert now < schedule.next_fire_at <= now + timedelta(hours=1)
    assert scheduler.fire_due_schedules(now) == 0
    assert ready_count(redis_client) == 0


def test_a_save_with_update_fields_still_writes_the_new_next_tick(namespace):
    schedule = make_schedule(namespace, spec="0 * * * *", next_fire_at=T0)

    schedule.enabled = False
    schedule.save(update_fields=["enabled"])

    assert Schedule.objects.get(id=schedule.id).next_fire_at is None


def test_changing_the_spec_reschedules_from_now(namespace):
    schedule = make_schedule(namespace, spec="0 * * * *", next_fire_at=T0)

    schedule.spec = "@every 10m"
    schedule.save()

    schedule.refresh_from_db()
    assert datetime.now(UTC) + timedelta(minutes=9) < schedule.next_fire_at <= datetime.now(UTC) + timedelta(
        minutes=10)


def test_a_stale_copy_saved_after_a_claim_does_not_reopen_the_fired_tick(namespace, redis_client):
    stale = make_schedule(namespace, spec="0 * * * *", next_fire_at=T0)  # loaded by an editor before the tick
    assert scheduler.fire_due_schedules(T0 + seconds(1)) == 1

    stale.priority = 9  # saved after the pumper claimed T0
    stale.save()

    fresh = Schedule.objects.get(id=stale.id)
    assert (fresh.priority, fresh.next_fire_at) == (9, T0 + timedelta(hours=1))
    assert fresh.last_fired_at == T0 + seconds(1) and len(fresh.recent_fires) == 1
    assert scheduler.fire_due_schedules(T0 + seconds(2)) == 0
    assert ready_count(redis_client) == 1


# -- exactly once -----------------------------------------------------------------------------------------
def test_a_fresh_scheduler_after_a_restart_does_not_fire_the_same_tick_again(namespace, redis_client):
    make_schedule(namespace, spec="0 * * * *", next_fire_at=T0)
    assert Pumper(interval_s=1.0).fire_schedules(T0 + seconds(1)) == 1

    restarted = Pumper(interval_s=1.0)  # a new process: nothing in memory, the claim is in the database

    assert restarted.fire_schedules(T0 + seconds(1)) == 0
    assert restarted.fire_schedules(T0 + seconds(30)) == 0
    assert ready_count(redis_client) == 1


@pytest.mark.django_db(transaction=True)
def test_three_concurrent_schedulers_fire_each_tick_exactly_once(redis_client):
    namespace = Namespace.objects.create(name="ns")
    specs = {"every-1s": "@every 1s", "every-7s": "@every 7s", "every-30s": "@every 30s", "minutely": "* * * * *",
             "quarter": "*/15 * * * *", "hourly": "0 * * * *"}
    for name, spec in specs.items():
        make_schedule(namespace, name, spec=spec, queue=name, next_fire_at=T0)
    clock = [T0 + seconds(5 * step) for step in range(1, 121)]  # 10 minutes, a pass every 5 s
    expected = {}
    for name in specs:
        schedule = Schedule.objects.get(name=name)
        expected[name] = 1 + len(list(scheduler.until(scheduler.ticks_after(schedule, T0), clock[-1])))

    published = [0, 0, 0]
    errors: list[BaseException] = []
    start_line = threading.Barrier(3)

    def scheduler_thread(slot: int) -> None:
        engines = scheduler.Engines()
        try:
            for now in clock:
                start_line.wait()  # all three run each pass at the same moment, with the same clock
                published[slot] += scheduler.fire_due_schedules(now, engines)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            start_line.abort()
        finally:
            connection.close()

    threads = [threading.Thread(target=scheduler_thread, args=(slot,)) for slot in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)

    assert not errors, errors
    counts = {name: ready_count(redis_client, name) for name in specs}
    assert counts == expected
    assert expected["every-1s"] == 601 and expected["hourly"] == 1
    # The claims themselves were exclusive: an idempotent re-publish would have counted twice here.
    assert sum(published) == sum(expected.values())
    assert sum(1 for count in published if count) > 1  # they really raced for the ticks
    for name in specs:
        history = Schedule.objects.get(name=name).recent_fires
        ticks = [entry["tick"] for entry in history]
        assert len(ticks) == len(set(ticks))


# -- failures around the publish ----------------------------------------------------------------------------
def test_a_failed_publish_leaves_the_tick_due_and_the_next_pass_fires_it(namespace, redis_client, monkeypatch):
    schedule = make_schedule(namespace, next_fire_at=T0)

    def redis_down(*args, **kwargs):
        raise redis.ConnectionError("Connection refused")

    with monkeypatch.context() as patched:
        patched.setattr(Engine, "publish", redis_down)
        assert scheduler.fire_due_schedules(T0 + seconds(1)) == 0

    schedule.refresh_from_db()
    assert (schedule.next_fire_at, schedule.last_fired_at, schedule.recent_fires) == (T0, None, [])
    assert scheduler.fire_due_schedules(T0 + seconds(3)) == 1
    assert fired_ticks(schedule) == [T0]
    assert ready_count(redis_client) == 1


def test_a_redis_outage_longer_than_the_grace_counts_as_missed(namespace, redis_client, monkeypatch):
    make_schedule(namespace, "skips", queue="skips", next_fire_at=T0)
    make_schedule(namespace, "once", queue="once", catch_up="once", next_fire_at=T0)
    def redis_down(*args, **kwargs):
        raise redis.ConnectionError("Connection refused")

    with monkeypatch.context() as patched:
        patched.setattr(Engine, "publish", redis_down)
        for step in range(1, 300, 5):
            scheduler.fire_due_schedules(T0 + seconds(step))

    scheduler.fire_due_schedules(T0 + seconds(300))

    assert (ready_count(redis_client, "skips"), ready_count(redis_client, "once")) == (0, 1)


def test_a_publish_whose_commit_failed_is_not_published_twice(namespace, redis_client, monkeypatch):
    """Claim, publish, then the database fails before the commit: the claim rolls
    back, the next pass claims the tick again, and the idempotency key turns its
    publish into a no-op."""
    schedule = make_schedule(namespace, next_fire_at=T0)
    real_record = scheduler.record

    def database_lost(schedule, entry):
        raise DatabaseError("server closed the connection unexpectedly")

    with monkeypatch.context() as patched:
        patched.setattr(scheduler, "record", database_lost)
        with pytest.raises(DatabaseError):
            scheduler.fire_due_schedules(T0 + seconds(1))

    assert ready_count(redis_client) == 1  # published...
    assert Schedule.objects.get(id=schedule.id).next_fire_at == T0  # ...but not claimed
    monkeypatch.setattr(scheduler, "record", real_record)

    assert scheduler.fire_due_schedules(T0 + seconds(2)) == 1

    assert ready_count(redis_client) == 1
    [job_id] = queue_state(redis_client, "ns", "q")["ready"]
    assert fired_ticks(schedule) == [T0]
    assert schedule.recent_fires[0]["job_id"] == job_id


def test_a_schedule_whose_pool_is_gone_does_not_stop_the_others(namespace, redis_client):
    make_schedule(namespace, "orphan", queue="orphan", pool="removed-pool", next_fire_at=T0)
    make_schedule(namespace, "fine", queue="fine", next_fire_at=T0 + seconds(1))

    assert scheduler.fire_due_schedules(T0 + seconds(2)) == 1

    assert ready_count(redis_client, "fine") == 1
    assert Schedule.objects.get(name="orphan").next_fire_at == T0  # still due, retried next pass


# -- the pumper duty -----------------------------------------------------------------------------------------
def test_the_pumper_keeps_going_when_the_database_is_down(namespace, monkeypatch, caplog):
    pumper = Pumper(interval_s=1.0)

    def database_down(*args, **kwargs):
        raise DatabaseError("could not connect to server")

    monkeypatch.setattr(scheduler, "fire_due_schedules", database_down)
    assert pumper.fire_schedules(T0) == 0
    assert pumper.fire_schedules(T0) == 0
    assert pumper.database_down
    assert sum("database unavailable" in record.message for record in caplog.records) == 1  # logged once


def test_the_pumper_command_fires_due_schedules_with_once(namespace, redis_client, capsys):
    make_schedule(namespace, queue="cron", body="tick", next_fire_at=datetime.now(UTC) - seconds(1))

    call_command("pumper", "--once")

    assert capsys.readouterr().out.splitlines() == ["handled 0 timers", "fired 1 schedules"]
    assert ready_count(redis_client, "cron") == 1
    call_command("pumper", "--once")  # a second process finds the tick claimed
    assert capsys.readouterr().out.splitlines() == ["handled 0 timers"]
    assert ready_count(redis_client, "cron") == 1

"""The pumper's unit of work: act on due timers (delays, leases, ttl expiry) in
every pool, and its duties beside it (recurring jobs: scheduler.py; alert rules:
alerts.py). The command (management/commands/pumper.py) only loops."""
from __future__ import annotations

import logging
from datetime import datetime

from django.db import DatabaseError, close_old_connections

from queues import alerts, pools, scheduler
from queues.engine import Engine, now_ms

log = logging.getLogger(__name__)


class Pumper:
    def __init__(self, interval_s: float, pool_names: list[str] | None = None) -> None:
        self.interval_s = interval_s
        self.engines = [Engine(pool) for pool in (pool_names or pools.pool_names())]
        self.schedule_engines = scheduler.Engines()
        self.alerts = alerts.AlertDuty()
        self.database_down = False

    def pump_once(self, now: int | None = None) -> int:
        """Handle every timer due at `now` in every pool; return how many."""
        handled = 0
        for engine in self.engines:
            more = True
            while more:
                count, more = engine.pump_due(now if now is not None else now_ms())
                handled += count
        return handled

    def fire_schedules(self, now: datetime | None = None) -> int:
        """The scheduler duty: publish the jobs of due schedules; return how many.

        A database outage is logged once and skipped, not raised: the loop must not
        back off (and delay the timers, which need only Redis) while it lasts; the
        due ticks wait in the database and fire when it is back (or count as missed)."""
        try:
            fired = scheduler.fire_due_schedules(now, self.schedule_engines)
        except DatabaseError as exc:
            if not self.database_down:
                log.warning("scheduler: database unavailable (%s); schedules wait until it is back", exc)
            self.database_down = True
            close_old_connections()
            return 0
        if self.database_down:
            log.info("scheduler: database is back")
        self.database_down = False
        return fired

    def evaluate_alerts(self) -> bool:
        """The alert duty (alerts.py): every few seconds, in a thread of its own and
        only in the pumper holding the lease. Returns True if a pass started."""
        return self.alerts.tick()

    def seconds_until_due(self) -> float:
        """How long the loop may sleep: until the earliest known timer, at most one interval."""
        wait = self.interval_s
        for engine in self.engines:
            due = engine.next_due_ms()
            if due is not None:
                wait = min(wait, max(0.0, (due - now_ms()) / 1000))
        return wait

"""The pumper's unit of work: act on due timers (delays, leases, ttl expiry) in
every pool. The command (management/commands/pumper.py) only loops."""
from __future__ import annotations

import logging

from queues import pools
from queues.engine import Engine, now_ms

log = logging.getLogger(__name__)


class Pumper:
    def __init__(self, interval_s: float, pool_names: list[str] | None = None) -> None:
        self.interval_s = interval_s
        self.engines = [Engine(pool) for pool in (pool_names or pools.pool_names())]

    def pump_once(self, now: int | None = None) -> int:
        """Handle every timer due at `now` in every pool; return how many."""
        handled = 0
        for engine in self.engines:
            more = True
            while more:
                count, more = engine.pump_due(now if now is not None else now_ms())
                handled += count
        return handled

    def seconds_until_due(self) -> float:
        """How long the loop may sleep: until the earliest known timer, at most one interval."""
        wait = self.interval_s
        for engine in self.engines:
            due = engine.next_due_ms()
            if due is not None:
                wait = min(wait, max(0.0, (due - now_ms()) / 1000))
        return wait

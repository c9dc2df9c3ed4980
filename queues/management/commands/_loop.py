"""The shared shape of long-running commands: a unit of work, a SIGTERM
handler that only sets a flag, sleeps in short slices, and back-off while
Redis or the database is unreachable."""
from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable

import redis
from django.db import DatabaseError, close_old_connections

log = logging.getLogger(__name__)
MAX_BACKOFF_S = 5.0


class Loop:
    def __init__(self, name: str) -> None:
        self.name = name
        self.shutdown = False
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)

    def _stop(self, signum, frame) -> None:
        log.info("%s: signal %s received, stopping after this pass", self.name, signum)
        self.shutdown = True

    def sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self.shutdown:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 1.0))

    def run(self, work: Callable[[], float]) -> None:
        """Call `work` until shutdown; it returns how long to sleep before the next call."""
        backoff = 0.5
        while not self.shutdown:
            try:
                pause = work()
                backoff = 0.5
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError) as exc:
                log.warning("%s: Redis unavailable (%s); retrying in %.1fs", self.name, exc, backoff)
                pause, backoff = backoff, min(backoff * 2, MAX_BACKOFF_S)
            except DatabaseError as exc:
                log.warning("%s: database unavailable (%s); retrying in %.1fs", self.name, exc, backoff)
                close_old_connections()
                pause, backoff = backoff, min(backoff * 2, MAX_BACKOFF_S)
            self.sleep(pause)

"""lmstfy's per-token throttle: fixed-window counters in the default pool's
Redis, limits from the database (TokenLimit), cached per process for
RELOAD_S seconds (upstream reloads every 10 s)."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from queues import pools
from queues.engine import Engine
from queues.models import TokenLimit

RELOAD_S = 2.0
CONSUME, PRODUCE = "consume", "produce"
_COUNTER = {CONSUME: "r", PRODUCE: "w"}


@dataclass(frozen=True)
class Limit:
    read: int
    write: int
    interval: int

    def allowed(self, direction: str) -> int:
        return self.read if direction == CONSUME else self.write


class RateLimited(Exception):
    def __init__(self, direction: str) -> None:
        super().__init__(direction)
        self.direction = direction


class LimitCache:
    def __init__(self) -> None:
        self._limits: dict[int, Limit] = {}
        self._loaded_at = float("-inf")
        self._lock = threading.Lock()

    def get(self, token_id: int) -> Limit | None:
        if time.monotonic() - self._loaded_at > RELOAD_S:
            self.reload()
        return self._limits.get(token_id)

    def clear(self) -> None:
        """Forget the cached limits: the next request reloads them."""
        with self._lock:
            self._limits, self._loaded_at = {}, float("-inf")

    def reload(self) -> None:
        rows = TokenLimit.objects.filter(token__revoked_at__isnull=True).values_list(
            "token_id", "read", "write", "interval")
        limits = {token_id: Limit(read, write, interval) for token_id, read, write, interval in rows}
        with self._lock:
            self._limits, self._loaded_at = limits, time.monotonic()


limits = LimitCache()


def take(token_id: int, direction: str) -> bool:
    """Count this request against the token's limit. Returns True when it was
    counted (so it can be given back); raises RateLimited past the limit."""
    limit = limits.get(token_id)
    if limit is None or limit.allowed(direction) <= 0:
        return False
    engine = Engine(pools.DEFAULT_POOL)
    count = engine.take_request(token_id, _COUNTER[direction], limit.interval)
    if count > limit.allowed(direction):
        raise RateLimited(direction)
    return True


def give_back(token_id: int, direction: str) -> None:
    Engine(pools.DEFAULT_POOL).give_request_back(token_id, _COUNTER[direction])

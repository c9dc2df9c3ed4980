"""Settings -> Redis clients, one per pool and process; token -> pool.

A pool URL is a plain Redis (``redis://``, ``rediss://``, ``unix://``), a
Sentinel set (``redis+sentinel://[:password@]host:port[,host:port]/master[/db]``)
or a Redis Cluster (``redis+cluster://host:port``). With no pools configured the
embedded Redis is used as the ``default`` pool.
"""
from __future__ import annotations

import logging
import threading
from urllib.parse import unquote, urlsplit

import redis
from django.conf import settings
from redis.cluster import RedisCluster
from redis.sentinel import Sentinel

from queues import embedded

log = logging.getLogger(__name__)
DEFAULT_POOL = "default"
SOCKET_TIMEOUT_S = 30
EVICTING_POLICIES_OK = ("noeviction",)


class UnknownPool(Exception):
    pass


_clients: dict[str, redis.Redis] = {}
_lock = threading.Lock()


def configured_urls() -> dict[str, str]:
    pools = settings.LMSTFY_POOLS
    return dict(pools) if pools is not None else {DEFAULT_POOL: "embedded"}


def pool_names() -> list[str]:
    return list(configured_urls())


def split_token(value: str) -> tuple[str, str]:
    """lmstfy's ``[pool:]token``: split on the first ':'; no prefix is the default pool."""
    pool, sep, token = value.partition(":")
    return (pool, token) if sep else (DEFAULT_POOL, value)


def client(pool: str = DEFAULT_POOL) -> redis.Redis:
    found = _clients.get(pool)
    if found is not None:
        return found
    urls = configured_urls()
    if pool not in urls:
        raise UnknownPool(pool)
    with _lock:
        if pool not in _clients:
            _clients[pool] = _connect(urls[pool])
        return _clients[pool]


def reset_clients() -> None:
    """Forget every client, and stop the wake-up listeners using them (tests that
    change LMSTFY_POOLS)."""
    from queues import wakeup

    with _lock:
        _clients.clear()
    wakeup.reset()


def _connect(url: str) -> redis.Redis:
    if url == "embedded":
        url = embedded.ensure_running()
    parts = urlsplit(url)
    if parts.scheme == "redis+sentinel":
        return _sentinel_client(parts)
    if parts.scheme == "redis+cluster":
        return RedisCluster.from_url(url.replace("redis+cluster://", "redis://", 1),
                                     socket_timeout=SOCKET_TIMEOUT_S)
    return redis.Redis.from_url(url, socket_timeout=SOCKET_TIMEOUT_S, health_check_interval=30,
                                max_connections=1000)


def _sentinel_client(parts) -> redis.Redis:
    hosts = []
    for hostport in parts.netloc.rpartition("@")[2].split(","):
        host, _, port = hostport.partition(":")
        hosts.append((host, int(port or 26379)))
    path = [p for p in parts.path.split("/") if p]
    if not path:
        raise ValueError("a redis+sentinel URL needs the master name as its path")
    db = int(path[1]) if len(path) > 1 else 0
    password = unquote(parts.password) if parts.password else None
    sentinel = Sentinel(hosts, socket_timeout=SOCKET_TIMEOUT_S, sentinel_kwargs={"password": password})
    return sentinel.master_for(path[0], db=db, password=password, socket_timeout=SOCKET_TIMEOUT_S)


def durability_warnings(pool: str) -> list[str]:
    """Why jobs in this pool could be lost: an evicting maxmemory-policy or no persistence."""
    info = client(pool).info()
    warnings = []
    policy = info.get("maxmemory_policy", "noeviction")
    if policy not in EVICTING_POLICIES_OK:
        warnings.append(f"pool {pool}: maxmemory-policy is {policy!r}; Redis may evict jobs "
                        "(set it to 'noeviction')")
    if not info.get("aof_enabled") and not _rdb_enabled(pool):
        warnings.append(f"pool {pool}: persistence is off (no AOF, no RDB snapshots); "
                        "jobs are lost if Redis restarts (set 'appendonly yes')")
    return warnings


def _rdb_enabled(pool: str) -> bool:
    save = client(pool).config_get("save").get("save", "")
    return bool(save and save.strip())


def log_durability_warnings() -> list[str]:
    found = []
    for pool in pool_names():
        try:
            found.extend(durability_warnings(pool))
        except redis.RedisError as exc:
            found.append(f"pool {pool}: cannot be inspected: {exc}")
    for warning in found:
        log.warning("DURABILITY WARNING: %s", warning)
    return found

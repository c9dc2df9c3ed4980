"""The read path: counts, peeks, listings and histograms, for the API's read
routes, the stats extensions and the admin pages. Nothing here changes a job."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from queues import keys, pools
from queues.engine import Job, now_ms, parse_jobs
from queues.scripts import script


def _client(pool: str):
    return pools.client(pool)


def _peek(pool: str, ns: str, q: str, args: list) -> list[Job]:
    flat = script("peek")(keys=keys.queue_keys(ns, q), args=[now_ms(), *args], client=_client(pool))
    return parse_jobs(ns, q, flat)


def peek_job(pool: str, ns: str, q: str, job_id: str) -> Job | None:
    found = _peek(pool, ns, q, ["ids", job_id])
    return found[0] if found else None


def peek_jobs(pool: str, ns: str, q: str, job_ids: list[str]) -> list[Job]:
    return _peek(pool, ns, q, ["ids", *job_ids]) if job_ids else []


def peek_head(pool: str, ns: str, q: str) -> Job | None:
    """The next ready job (priority, then FIFO); state GONE if it has just expired."""
    found = _peek(pool, ns, q, ["head"])
    return found[0] if found else None


def ready_size(pool: str, ns: str, q: str) -> int:
    return _client(pool).zcard(keys.ready(ns, q))


def dead_size(pool: str, ns: str, q: str) -> int:
    return _client(pool).zcard(keys.dead(ns, q))


def dead_head(pool: str, ns: str, q: str) -> tuple[int, str | None]:
    pipe = _client(pool).pipeline(transaction=False)
    pipe.zcard(keys.dead(ns, q))
    pipe.zrange(keys.dead(ns, q), 0, 0)
    size, head = pipe.execute()
    return size, head[0].decode() if head else None


def dead_jobs(pool: str, ns: str, q: str, offset: int, limit: int) -> tuple[int, list[Job]]:
    jobs = _peek(pool, ns, q, ["dead", offset, limit])
    return dead_size(pool, ns, q), jobs


def ready_jobs(pool: str, ns: str, q: str, limit: int) -> list[Job]:
    ids = [i.decode() for i in _client(pool).zrange(keys.ready(ns, q), 0, limit - 1)]
    return peek_jobs(pool, ns, q, ids)


@dataclass(frozen=True)
class QueueStats:
    namespace: str
    queue: str
    ready: int
    delayed: int
    inflight: int
    deadletter: int
    paused: bool

    def as_dict(self) -> dict:
        return asdict(self)


def queue_stats(pool: str, ns: str, q: str) -> QueueStats:
    return many_queue_stats(pool, [(ns, q)])[0]


def many_queue_stats(pool: str, queues: list[tuple[str, str]]) -> list[QueueStats]:
    pipe = _client(pool).pipeline(transaction=False)
    for ns, q in queues:
        pipe.zcard(keys.ready(ns, q))
        pipe.zcard(keys.delayed(ns, q))
        pipe.zcard(keys.inflight(ns, q))
        pipe.zcard(keys.dead(ns, q))
        pipe.hexists(keys.meta(ns, q), "paused")
    answers = pipe.execute()
    stats = []
    for i, (ns, q) in enumerate(queues):
        ready, delayed, inflight, dead, paused = answers[i * 5:i * 5 + 5]
        stats.append(QueueStats(ns, q, ready, delayed, inflight, dead, bool(paused)))
    return stats


def due_histogram(pool: str, ns: str, q: str, bucket_s: int, buckets: int) -> tuple[int, list[int]]:
    """Delayed jobs falling due in each `bucket_s`-second bucket from now."""
    start_ms = now_ms()
    pipe = _client(pool).pipeline(transaction=False)
    for i in range(buckets):
        low = start_ms + i * bucket_s * 1000
        pipe.zcount(keys.delayed(ns, q), low if i else "-inf", f"({low + bucket_s * 1000}")
    return start_ms // 1000, pipe.execute()


def queue_members(pool: str) -> list[tuple[str, str]]:
    members = _client(pool).smembers(keys.QUEUE_REGISTRY)
    return sorted(keys.split_member(m.decode()) for m in members)


def namespaces_with_queues(pool: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for ns, q in queue_members(pool):
        found.setdefault(ns, []).append(q)
    return found

"""The read path: counts, peeks, listings and histograms, for the API's read
routes, the stats extensions and the admin pages. Nothing here changes a job."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import redis

from queues import keys, pools
from queues.engine import Job, JobState, now_ms, parse_jobs
from queues.scripts import script


def _client(pool: str):
    return pools.client(pool)


def _peek(pool: str, ns: str, q: str, args: list) -> list[Job]:
    now = now_ms()
    flat = script("peek")(keys=keys.queue_keys(ns, q), args=[now, *args], client=_client(pool))
    return parse_jobs(ns, q, flat, now)


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
    """Counts of `queues`, each an atomic snapshot (see queue_metrics)."""
    return [QueueStats(m.namespace, m.queue, m.ready, m.delayed, m.inflight, m.deadletter, m.paused)
            for m in queue_metrics(pool, queues)]


def due_histogram(pool: str, ns: str, q: str, bucket_s: int, buckets: int) -> tuple[int, list[int]]:
    """Delayed jobs falling due in each `bucket_s`-second bucket from now."""
    start_ms = now_ms()
    pipe = _client(pool).pipeline(transaction=False)
    for i in range(buckets):
        low = start_ms + i * bucket_s * 1000
        pipe.zcount(keys.delayed(ns, q), low if i else "-inf", f"({low + bucket_s * 1000}")
    return start_ms // 1000, pipe.execute()


def queue_members(pool: str) -> list[tuple[str, str]]:
    """Every (namespace, queue) of the pool's registry, sorted; undecodable bytes replaced."""
    members = _client(pool).smembers(keys.QUEUE_REGISTRY)
    return sorted(keys.split_member(m.decode("utf-8", "replace")) for m in members)


def namespaces_with_queues(pool: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for ns, q in queue_members(pool):
        found.setdefault(ns, []).append(q)
    return found


def attempts(topic_id: int, job_id: str | None = None, outcome: str | None = None, limit: int = 50,
             pool: str = pools.DEFAULT_POOL) -> list[dict]:
    """A topic's delivery attempts, newest first, optionally filtered."""
    found: list[dict] = []
    last = "+"
    client = _client(pool)
    while len(found) < limit:
        page = client.xrevrange(keys.attempt_log(topic_id), max=last, count=500)
        for entry_id, fields in page:
            record = {k.decode(): v.decode("utf-8", "replace") for k, v in fields.items()}
            if (job_id and record.get("job_id") != job_id) or (outcome and record.get("outcome") != outcome):
                continue
            found.append(record)
            if len(found) >= limit:
                break
        if len(page) < 500:
            break
        last = "(" + page[-1][0].decode()
    return found


def _last_full_minute(minute: int, at: int | None, current: int | None, previous: int | None) -> int:
    if at == minute:
        return previous or 0
    if at == minute - 1:
        return current or 0
    return 0


# -- admin pages: reads that survive corrupt entries ------------------------------------
# The web admin must render whatever Redis holds: a key of the wrong type, a
# packed job with garbage bytes or a registry member without keys shows as
# "unreadable" (None / an error text) instead of failing the whole page.
UNREADABLE_ERRORS = (redis.ResponseError, ValueError, UnicodeDecodeError, TypeError, IndexError)


@dataclass(frozen=True)
class QueueRow:
    """One line of the admin overview; None marks a figure that could not be read."""

    pool: str
    namespace: str
    queue: str
    ready: int | None
    delayed: int | None
    inflight: int | None
    deadletter: int | None
    paused: bool | None
    published_per_min: int | None
    consumed_per_min: int | None

    @property
    def unreadable(self) -> bool:
        return None in (self.ready, self.delayed, self.inflight, self.deadletter, self.paused,
                        self.published_per_min, self.consumed_per_min)


def queue_rows(pool: str, queues: list[tuple[str, str]], now: int | None = None) -> list[QueueRow]:
    """Counts, pause flag and last-minute rates of `queues` in one pipeline (the
    overview asks for one page of queues, never all of them)."""
    minute = (now_ms() if now is None else now) // 60000
    pipe = _client(pool).pipeline(transaction=False)
    for ns, q in queues:
        for key in (keys.ready(ns, q), keys.delayed(ns, q), keys.inflight(ns, q), keys.dead(ns, q)):
            pipe.zcard(key)
        pipe.hexists(keys.meta(ns, q), "paused")
        pipe.hmget(keys.meta(ns, q), "pub_m", "pub_c", "pub_p", "con_m", "con_c", "con_p")
    answers = pipe.execute(raise_on_error=False)
    rows = []
    for i, (ns, q) in enumerate(queues):
        ready, delayed, inflight, dead, paused, counters = answers[i * 6:i * 6 + 6]
        published, consumed = _rates_or_none(minute, counters)
        rows.append(QueueRow(pool, ns, q, _int_or_none(ready), _int_or_none(delayed), _int_or_none(inflight),
                             _int_or_none(dead), None if isinstance(paused, Exception) else bool(paused),
                             published, consumed))
    return rows


def _int_or_none(answer) -> int | None:
    return answer if isinstance(answer, int) and not isinstance(answer, bool) else None


def _rates_or_none(minute: int, counters) -> tuple[int | None, int | None]:
    if isinstance(counters, Exception):
        return None, None
    try:
        values = [int(v) if v is not None else None for v in counters]
    except ValueError:
        return None, None
    return _last_full_minute(minute, *values[:3]), _last_full_minute(minute, *values[3:])


@dataclass(frozen=True)
class PauseState:
    paused: bool
    at_ms: int | None
    by: str


def pause_state(pool: str, ns: str, q: str) -> PauseState:
    """Whether the queue is paused, since when and by whom (engine.pause's audit fields)."""
    paused, at_ms, by = _client(pool).hmget(keys.meta(ns, q), "paused", "paused_at_ms", "paused_by")
    try:
        at = int(at_ms) if at_ms is not None else None
    except ValueError:
        at = None
    return PauseState(paused is not None, at, (by or b"").decode("utf-8", "replace"))


@dataclass(frozen=True)
class JobRow:
    """A job as an admin page lists it; `job` is None when its entry cannot be read."""

    id: str
    job: Job | None
    error: str = ""


def readable_jobs(pool: str, ns: str, q: str, job_ids: list[str], missing: str | None = None) -> list[JobRow]:
    """Peek `job_ids` in order. One script call; if an entry is corrupt, each id
    is peeked alone so only the bad ones show as unreadable. An id whose job is
    gone is left out, or listed with the error `missing` when that is given."""
    try:
        found = {job.id: _job_row(job) for job in peek_jobs(pool, ns, q, job_ids)}
    except UNREADABLE_ERRORS:
        found = {}
        for job_id in job_ids:
            try:
                job = peek_job(pool, ns, q, job_id)
            except UNREADABLE_ERRORS as exc:
                found[job_id] = JobRow(job_id, None, f"unreadable: {exc}")
                continue
            if job is not None:
                found[job_id] = _job_row(job)
    rows = []
    for job_id in job_ids:
        if job_id in found:
            rows.append(found[job_id])
        elif missing is not None:
            rows.append(JobRow(job_id, None, missing))
    return rows


def _job_row(job: Job) -> JobRow:
    if job.state == JobState.UNREADABLE:
        return JobRow(job.id, None, f"unreadable: {len(job.body)} stored bytes do not decode as a job")
    return JobRow(job.id, job)


def ready_rows(pool: str, ns: str, q: str, limit: int) -> list[JobRow]:
    """The next `limit` ready jobs in consume order (priority, then FIFO)."""
    ids = [i.decode("utf-8", "replace") for i in _client(pool).zrange(keys.ready(ns, q), 0, limit - 1)]
    # A ready entry whose job does not decode (or has just expired) is listed, not hidden.
    return readable_jobs(pool, ns, q, ids, missing="unreadable: no readable job data")


def dead_rows(pool: str, ns: str, q: str, offset: int, limit: int) -> tuple[int, list[JobRow]]:
    """A page of the dead letter, oldest first, with its total size. A dead
    entry without job data is listed (as unreadable) so it can be deleted."""
    pipe = _client(pool).pipeline(transaction=False)
    pipe.zcard(keys.dead(ns, q))
    pipe.zrange(keys.dead(ns, q), offset, offset + limit - 1)
    size, ids = pipe.execute()
    job_ids = [i.decode("utf-8", "replace") for i in ids]
    return size, readable_jobs(pool, ns, q, job_ids, missing="unreadable: no job data")


def job_row(pool: str, ns: str, q: str, job_id: str) -> JobRow | None:
    rows = readable_jobs(pool, ns, q, [job_id])
    return rows[0] if rows else None


@dataclass(frozen=True)
class PoolHealth:
    pool: str
    reachable: bool
    error: str = ""
    version: str = ""
    used_memory: int = 0
    used_memory_human: str = ""
    maxmemory: int = 0
    maxmemory_human: str = ""
    policy: str = ""
    aof_enabled: bool = False
    rdb_save: str = ""
    warnings: tuple[str, ...] = ()


def pool_health(pool: str) -> PoolHealth:
    """What the overview shows per pool: version, memory, persistence, eviction
    policy and the durability warnings (pools.durability_warnings)."""
    client = _client(pool)
    try:
        info = client.info()
    except redis.RedisError as exc:
        return PoolHealth(pool, reachable=False, error=str(exc) or type(exc).__name__)
    try:
        rdb_save = str(client.config_get("save").get("save", "")).strip() or "off"
        warnings = tuple(pools.durability_warnings(pool))
    except redis.RedisError as exc:  # managed Redis often disables CONFIG
        rdb_save, warnings = "unknown", (f"pool {pool}: persistence cannot be inspected: {exc}",)
    return PoolHealth(pool, reachable=True, version=str(info.get("redis_version", "")),
                      used_memory=int(info.get("used_memory", 0)),
                      used_memory_human=str(info.get("used_memory_human", "")),
                      maxmemory=int(info.get("maxmemory", 0)), maxmemory_human=str(info.get("maxmemory_human", "")),
                      policy=str(info.get("maxmemory_policy", "")), aof_enabled=bool(info.get("aof_enabled")),
                      rdb_save=rdb_save, warnings=warnings)


# -- /metrics: what the exporter reads at scrape time (queues/metrics.py) ---------------
# Cumulative totals the scripts keep in each queue's meta hash (lua/_job.lua count_total).
TOTAL_FIELDS = ("pub_t", "con_t", "ack_t", "rel_t", "exp_t", "dead_t", "resp_t")


@dataclass(frozen=True, slots=True)
class QueueMetrics:
    """One queue's depths and totals; slots keep 10 000 of them small."""

    namespace: str
    queue: str
    ready: int
    delayed: int
    inflight: int
    deadletter: int
    paused: bool
    totals: tuple[int, ...]  # in TOTAL_FIELDS order


def queue_metrics(pool: str, queues: list[tuple[str, str]]) -> list[QueueMetrics]:
    """Depths, pause flag and totals of `queues`: one lua/counts.lua call per
    queue, so each queue's figures are one atomic snapshot (a job moving from
    ready to in flight is never counted twice or missed), all in one pipeline
    (callers pass bounded batches, so the answer stays small)."""
    pipe = _client(pool).pipeline(transaction=False)
    for ns, q in queues:
        script("counts")(keys=keys.queue_keys(ns, q), args=TOTAL_FIELDS, client=pipe)
    found = []
    for (ns, q), (ready, delayed, inflight, dead, paused, *totals) in zip(queues, pipe.execute(), strict=True):
        found.append(QueueMetrics(ns, q, ready, delayed, inflight, dead, paused == 1,
                                  tuple(int(value or 0) for value in totals)))
    return found


def redis_memory(pool: str) -> tuple[int, int]:
    """(used_memory, maxmemory) in bytes; maxmemory 0 means no limit."""
    info = _client(pool).info("memory")
    return int(info.get("used_memory", 0)), int(info.get("maxmemory", 0))


def _split_counts(hash_key: str, parts: int, pool: str) -> list[tuple[list[str], int]]:
    """A metrics hash whose fields are `parts` values joined by "|" (names never hold "|")."""
    found = []
    for field, value in _client(pool).hgetall(hash_key).items():
        labels = field.decode("utf-8", "replace").split("|")
        if len(labels) == parts:
            found.append((labels, int(value)))
    return found


def delivery_outcomes(pool: str = pools.DEFAULT_POOL) -> list[tuple[str, str, str, str, int]]:
    """(topic id, namespace, queue, outcome, attempts) of every delivery so far."""
    return [(*labels, count) for labels, count in _split_counts(keys.DELIVERY_OUTCOMES, 4, pool)]


def delivery_latency(pool: str = pools.DEFAULT_POOL) -> dict[str, tuple[dict[str, int], int]]:
    """Per namespace: attempts per duration bucket (its upper bound in ms, or "+Inf";
    not cumulative) and the sum of durations in ms."""
    found: dict[str, tuple[dict[str, int], int]] = {}
    for (ns, bucket), count in _split_counts(keys.DELIVERY_LATENCY, 2, pool):
        buckets, total_ms = found.get(ns, ({}, 0))
        if bucket == "sum":
            total_ms = count
        else:
            buckets[bucket] = count
        found[ns] = (buckets, total_ms)
    return found


def rate_limited(pool: str = pools.DEFAULT_POOL) -> list[tuple[str, str, int]]:
    """(namespace, direction, requests refused with 429) per namespace and direction."""
    return [(*labels, count) for labels, count in _split_counts(keys.RATE_LIMITED, 2, pool)]


def auth_failures_by_reason(pool: str = pools.DEFAULT_POOL) -> dict[str, int]:
    """401s of the token authentication since Redis was new, by reason."""
    return {reason.decode(): int(count) for reason, count in _client(pool).hgetall(keys.AUTH_FAILURES).items()}


def auth_failures_total(pool: str = pools.DEFAULT_POOL) -> int:
    return sum(auth_failures_by_reason(pool).values())


def auth_failures_per_minute(minutes: int, now: int | None = None,
                             pool: str = pools.DEFAULT_POOL) -> list[tuple[int, int]]:
    """(minute, 401s) for the last `minutes` minutes, the current one last
    (minute = ms // 60000; at most engine.AUTH_FAILURE_MINUTES_KEPT are kept)."""
    current = (now_ms() if now is None else now) // 60_000
    wanted = list(range(current - minutes + 1, current + 1))
    pipe = _client(pool).pipeline(transaction=False)  # not MGET: the keys may sit on several cluster slots
    for minute in wanted:
        pipe.get(keys.auth_failures_minute(minute))
    counts = pipe.execute() if wanted else []
    return [(minute, int(count or 0)) for minute, count in zip(wanted, counts, strict=True)]


def auth_failures_in_last(minutes: int, now: int | None = None, pool: str = pools.DEFAULT_POOL) -> int:
    """401s of the token authentication in the current minute and the `minutes` - 1 before it."""
    return sum(count for _, count in auth_failures_per_minute(minutes, now, pool))


# -- alert rules (queues/alerts.py): what the evaluator reads -------------------------------
def pool_error(pool: str) -> str | None:
    """Why the pool cannot be reached (a failed PING), or None when it answers."""
    try:
        _client(pool).ping()
    except (redis.RedisError, OSError) as exc:
        return str(exc) or type(exc).__name__
    return None


@dataclass(frozen=True, slots=True)
class ConsumerActivity:
    namespace: str
    queue: str
    ready: int
    last_consume_ms: int | None   # None: never consumed
    created_ms: int | None        # first publish (lua/publish.lua)
    paused: bool


def consumer_activity(pool: str, queues: list[tuple[str, str]]) -> list[ConsumerActivity]:
    """Ready count, last consume and pause flag of `queues` in one pipeline
    (consume.lua stamps last_consume_ms whenever it leases a job)."""
    pipe = _client(pool).pipeline(transaction=False)
    for ns, q in queues:
        pipe.zcard(keys.ready(ns, q))
        pipe.hmget(keys.meta(ns, q), "last_consume_ms", "created_ms", "paused")
    answers = pipe.execute()
    found = []
    for i, (ns, q) in enumerate(queues):
        ready, (last_consume, created, paused) = answers[i * 2:i * 2 + 2]
        found.append(ConsumerActivity(ns, q, ready, _optional_int(last_consume), _optional_int(created),
                                      paused is not None))
    return found


def _optional_int(value: bytes | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


ATTEMPT_PAGE = 1000


def attempts_between(topic_id: int, start_ms: int, end_ms: int, pool: str = pools.DEFAULT_POOL) -> list[dict]:
    """A topic's attempts logged from `start_ms` to `end_ms` inclusive, oldest first.
    The log's entry ids are Redis timestamps, so a window is an XRANGE; the log is
    capped (LMSTFY_ATTEMPT_LOG_MAX), which bounds this read."""
    found: list[dict] = []
    low: str = str(start_ms)
    client = _client(pool)
    while True:
        page = client.xrange(keys.attempt_log(topic_id), min=low, max=str(end_ms), count=ATTEMPT_PAGE)
        found += [{k.decode(): v.decode("utf-8", "replace") for k, v in fields.items()} for _, fields in page]
        if len(page) < ATTEMPT_PAGE:
            return found
        low = "(" + page[-1][0].decode()

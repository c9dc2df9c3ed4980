"""The write path: one method per Lua script (see lua/). `now_ms` is injectable
everywhere so tests move time instead of sleeping.

Script return codes become exceptions here and nowhere else.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from enum import IntEnum

import redis

from queues import keys, pools, ulid
from queues.scripts import script

IDEMPOTENCY_WINDOW_S = 24 * 3600
PUMP_JOB_LIMIT = 1000        # timers handled per pump.lua call
PUMP_QUEUE_LIMIT = 100       # queues claimed per pumper pass
PUMP_LEASE_MS = 10_000       # a claimed queue returns to the pool of work after this
DESTROY_BATCH = 1000
DEAD_BATCH = 100
AUTH_FAILURE_MINUTES_KEPT = 120  # per-minute auth failure counts, for alert windows


def now_ms() -> int:
    return int(time.time() * 1000)


class EngineError(Exception):
    """Base of the engine's typed failures."""


class JobNotFound(EngineError):
    pass


class DuplicateJobId(EngineError):
    pass


class PublishCode(IntEnum):
    PUBLISHED = 0
    DUPLICATE_KEY = 1
    ID_EXISTS = 2


class ReleaseCode(IntEnum):
    RELEASED = 0
    NOT_IN_FLIGHT = 1


class JobState(IntEnum):
    UNREADABLE = -2  # peek of a job whose stored bytes do not decode (body = the raw bytes)
    GONE = -1     # peek of a ready entry whose job has expired
    DELAYED = 0
    READY = 1
    INFLIGHT = 2
    DEAD = 3


@dataclass(frozen=True)
class Job:
    namespace: str
    queue: str
    id: str
    body: bytes
    tries_left: int
    ttl: int              # seconds of life left; 0 = never expires
    attributes: dict | None
    content_type: str
    deliveries: int
    state: JobState
    elapsed_ms: int       # since publish (the id's timestamp), when the job was read


JOB_FIELDS = 8  # per job in script answers (lua/_job.lua job_fields)


def parse_jobs(namespace: str, queue: str, flat: list, now: int) -> list[Job]:
    return [_job(namespace, queue, flat[i:i + JOB_FIELDS], now) for i in range(0, len(flat), JOB_FIELDS)]


def _job(namespace: str, queue: str, fields: list, now: int) -> Job:
    job_id, body, tries, ttl, attrs, ctype, deliveries, state = fields
    job_id = job_id.decode()
    published = ulid.timestamp_ms(job_id)
    return Job(namespace=namespace, queue=queue, id=job_id, body=body, tries_left=int(tries),
               ttl=int(ttl), attributes=json.loads(attrs) if attrs else None, content_type=ctype.decode(),
               deliveries=int(deliveries), state=JobState(int(state)),
               elapsed_ms=max(0, now - published) if published is not None else 0)


@dataclass(frozen=True)
class Published:
    job_ids: list[str]
    duplicated: bool = False


@dataclass(frozen=True)
class Consumed:
    jobs: list[Job]
    paused: bool  # one of the listed queues is paused


class Engine:
    """Job transitions of one pool."""

    def __init__(self, pool: str = pools.DEFAULT_POOL, client: redis.Redis | None = None) -> None:
        self.pool = pool
        self.client = client if client is not None else pools.client(pool)
        connection_kwargs = getattr(getattr(self.client, "connection_pool", None), "connection_kwargs", {})
        self.db = int(connection_kwargs.get("db", 0))

    def ready_channel(self, ns: str, q: str) -> str:
        return keys.ready_channel(self.db, ns, q)

    # -- helpers ---------------------------------------------------------------
    def _run(self, name: str, ns: str, q: str, args: list, extra_keys: tuple = ()):
        return script(name)(keys=keys.queue_keys(ns, q) + list(extra_keys), args=args, client=self.client)

    def _lower_index(self, ns: str, q: str, due: int) -> None:
        """A script made the queue's earliest timer earlier: tell the pumpers.

        Runs after the script, never before, so a pumper that sees the new score
        also sees the timer (see docs/design.md, "timer index")."""
        if due >= 0:
            self.client.zadd(keys.TIMER_INDEX, {keys.queue_member(ns, q): due}, lt=True)

    # -- publish -----------------------------------------------------------------
    def publish(self, ns: str, q: str, bodies: list[bytes], *, delay_s: int = 0, ttl_s: int = 86400,
                tries: int = 1, priority: int = 0, content_type: str = "", attributes: dict | None = None,
                idempotency_key: str | None = None, versioned: bool = False,
                now: int | None = None) -> Published:
        """1. Give each body a job id carrying its delay (lmstfy's format).
        2. Run publish.lua: store, make ready or delayed, record the idempotency key.
        3. Register a new queue and lower the timer index when needed."""
        now = now_ms() if now is None else now
        ids = ulid.new_job_ids(len(bodies), delay_s, versioned, now)
        args: list = [now, delay_s * 1000, ttl_s, tries, priority, content_type,
                      json.dumps(attributes, separators=(",", ":")) if attributes else "",
                      self.ready_channel(ns, q), IDEMPOTENCY_WINDOW_S]
        for job_id, body in zip(ids, bodies):
            args += [job_id, body]
        extra = (keys.idempotency(ns, q, idempotency_key),) if idempotency_key else ()
        code, *rest = self._run("publish", ns, q, args, extra)
        if code == PublishCode.DUPLICATE_KEY:
            return Published(job_ids=rest[0].decode().split(","), duplicated=True)
        if code == PublishCode.ID_EXISTS:
            raise DuplicateJobId(rest[0].decode())
        created, due = rest
        if created:
            self.client.sadd(keys.QUEUE_REGISTRY, keys.queue_member(ns, q))
        self._lower_index(ns, q, due)
        return Published(job_ids=ids)

    # -- consume -------------------------------------------------------------------
    def consume(self, ns: str, queues: list[str], *, ttr_s: float, count: int = 1, max_inflight: int = 0,
                rate_per_s: float = 0, keep_tries: bool = False, now: int | None = None) -> Consumed:
        """Pop and lease up to `count` jobs from `queues`, in the listed order.

        Push delivery passes `max_inflight` and `rate_per_s` (a topic's concurrency
        and rate, enforced in the script across all notifiers) and `keep_tries`."""
        now = now_ms() if now is None else now
        all_keys: list[str] = []
        for q in queues:
            all_keys += keys.queue_keys(ns, q)
        answer = script("consume")(keys=all_keys, args=[now, int(ttr_s * 1000), count, max_inflight, rate_per_s,
                                                        "1" if keep_tries else ""], client=self.client)
        paused_mask, dues, flat = int(answer[0]), answer[1].decode().split(","), answer[2:]
        for q, due in zip(queues, dues):
            self._lower_index(ns, q, int(due))
        jobs = []
        for i in range(0, len(flat), JOB_FIELDS + 1):
            jobs.append(_job(ns, queues[int(flat[i]) - 1], flat[i + 1:i + 1 + JOB_FIELDS], now))
        return Consumed(jobs=jobs, paused=bool(paused_mask))

    def consume_wait(self, ns: str, queues: list[str], *, ttr_s: int, count: int, timeout_s: float) -> Consumed:
        """Consume, waiting up to `timeout_s` for a job to become ready (long poll).

        Wakes within milliseconds through the queues' ready channels (wakeup.py);
        waiters of one queue race through consume.lua, so each gets distinct jobs."""
        from queues import wakeup

        result = self.consume(ns, queues, ttr_s=ttr_s, count=count)
        if result.jobs or timeout_s <= 0:
            return result
        deadline = time.monotonic() + timeout_s
        channels = [self.ready_channel(ns, q) for q in queues]
        with wakeup.listener(self.pool, self.client).waiting(channels) as event:
            while True:
                result = self.consume(ns, queues, ttr_s=ttr_s, count=count)
                remaining = deadline - time.monotonic()
                if result.jobs or remaining <= 0:
                    return result
                event.wait(min(remaining, wakeup.SAFETY_POLL_S))
                event.clear()

    # -- per-job transitions -----------------------------------------------------------
    def ack(self, ns: str, q: str, job_id: str) -> bool:
        return bool(self._run("ack", ns, q, [job_id]))

    def release(self, ns: str, q: str, job_id: str, *, delay_s: float = 0, give_try_back: bool = True,
                now: int | None = None) -> None:
        now = now_ms() if now is None else now
        code, due = self._run("release", ns, q, [now, job_id, int(delay_s * 1000), self.ready_channel(ns, q),
                                                 1 if give_try_back else 0])
        if code == ReleaseCode.NOT_IN_FLIGHT:
            raise JobNotFound(job_id)
        self._lower_index(ns, q, due)

    def bury(self, ns: str, q: str, job_id: str) -> None:
        if not self._run("bury", ns, q, [job_id]):
            raise JobNotFound(job_id)

    def republish(self, ns: str, q: str, old_id: str, body: bytes, **publish_kwargs) -> Published:
        """lmstfy's re-publish: the old job is replaced by a new one (new id).

        The caller validates every parameter first; the old job is deleted only
        once the new one is stored."""
        published = self.publish(ns, q, [body], **publish_kwargs)
        self.ack(ns, q, old_id)
        return published

    # -- dead letter ---------------------------------------------------------------------
    def respawn(self, ns: str, q: str, limit: int, ttl_s: int, now: int | None = None) -> int:
        """Respawn up to `limit` dead jobs, oldest first, in bounded batches."""
        total = 0
        while total < limit:
            batch = min(DEAD_BATCH, limit - total)
            count = self._respawn(ns, q, ttl_s, ["oldest", batch], now)
            total += count
            if count < batch:
                break
        return total

    def respawn_ids(self, ns: str, q: str, job_ids: list[str], ttl_s: int, now: int | None = None) -> int:
        return self._respawn(ns, q, ttl_s, ["ids", *job_ids], now)

    def _respawn(self, ns: str, q: str, ttl_s: int, selector: list, now: int | None) -> int:
        now = now_ms() if now is None else now
        count, due = self._run("respawn", ns, q, [now, ttl_s, self.ready_channel(ns, q), *selector])
        self._lower_index(ns, q, due)
        return count

    def delete_dead(self, ns: str, q: str, limit: int) -> int:
        total = 0
        while total < limit:
            batch = min(DEAD_BATCH, limit - total)
            count = self._run("delete_dead", ns, q, ["oldest", batch])
            total += count
            if count < batch:
                break
        return total

    def delete_dead_ids(self, ns: str, q: str, job_ids: list[str]) -> int:
        return self._run("delete_dead", ns, q, ["ids", *job_ids])

    # -- queues ---------------------------------------------------------------------------
    def destroy(self, ns: str, q: str) -> int:
        """Delete every live job of the queue (ready, delayed, in flight), in batches."""
        total = 0
        while True:
            deleted, remaining, gone = self._run("destroy", ns, q, [DESTROY_BATCH])
            total += deleted
            if not remaining:
                break
        if gone:
            member = keys.queue_member(ns, q)
            self.client.srem(keys.QUEUE_REGISTRY, member)
            self.client.zrem(keys.TIMER_INDEX, member)
            # A publish that ran after the last script may have re-created the
            # queue and sent its SADD / ZADD before our SREM / ZREM: put them back.
            pipe = self.client.pipeline(transaction=False)
            pipe.hexists(keys.meta(ns, q), "created_ms")
            script("due")(keys=keys.queue_keys(ns, q), args=[], client=pipe)
            recreated, due = pipe.execute()
            if recreated:
                self.client.sadd(keys.QUEUE_REGISTRY, member)
            self._lower_index(ns, q, due)
        return total

    def pause(self, ns: str, q: str, by: str, now: int | None = None) -> None:
        now = now_ms() if now is None else now
        self.client.hset(keys.meta(ns, q), mapping={"paused": 1, "paused_at_ms": now, "paused_by": by})
        self.client.sadd(keys.QUEUE_REGISTRY, keys.queue_member(ns, q))

    def resume(self, ns: str, q: str) -> None:
        self.client.hdel(keys.meta(ns, q), "paused", "paused_at_ms", "paused_by")
        # Long polls waiting on the queue retry at once.
        self.client.publish(self.ready_channel(ns, q), 0)

    # -- push delivery's attempt log ------------------------------------------------------
    def log_attempt(self, topic_id: int, record: dict[str, str], max_entries: int) -> None:
        """Append to the topic's attempt log, a Redis stream capped near `max_entries`."""
        self.client.xadd(keys.attempt_log(topic_id), record, maxlen=max_entries, approximate=True)

    # -- cluster-wide metric counters (queues/metrics.py; the default pool) ------------------
    def record_delivery(self, topic_id: int, ns: str, q: str, outcome: str, bucket: str, duration_ms: int,
                        attempt: dict[str, str], max_entries: int) -> None:
        """One delivery attempt: its attempt-log entry (a stream capped near
        `max_entries`), its outcome, and its duration in a histogram bucket."""
        pipe = self.client.pipeline(transaction=False)
        pipe.xadd(keys.attempt_log(topic_id), attempt, maxlen=max_entries, approximate=True)
        pipe.hincrby(keys.DELIVERY_OUTCOMES, f"{topic_id}|{ns}|{q}|{outcome}", 1)
        pipe.hincrby(keys.DELIVERY_LATENCY, f"{ns}|{bucket}", 1)
        pipe.hincrby(keys.DELIVERY_LATENCY, f"{ns}|sum", duration_ms)
        pipe.execute()

    def count_rate_limited(self, ns: str, direction: str) -> None:
        self.client.hincrby(keys.RATE_LIMITED, f"{ns}|{direction}", 1)

    def count_auth_failure(self, reason: str, now: int | None = None) -> None:
        """The total by reason, and a per-minute count kept AUTH_FAILURE_MINUTES_KEPT
        minutes for alert windows (inspect.auth_failures_in_last)."""
        minute_key = keys.auth_failures_minute((now_ms() if now is None else now) // 60_000)
        pipe = self.client.pipeline(transaction=False)
        pipe.hincrby(keys.AUTH_FAILURES, reason, 1)
        pipe.incr(minute_key)
        pipe.expire(minute_key, AUTH_FAILURE_MINUTES_KEPT * 60)
        pipe.execute()

    # -- rate limits (counters of lmstfy's per-token throttle) ---------------------------
    def take_request(self, token_id: int, direction: str, window_s: int) -> int:
        """Count one request in the token's current window; return the count."""
        return script("throttle")(keys=[keys.rate_counter(token_id, direction)], args=["take", window_s],
                                  client=self.client)

    def give_request_back(self, token_id: int, direction: str) -> None:
        script("throttle")(keys=[keys.rate_counter(token_id, direction)], args=["give"], client=self.client)

    # -- timers (the pumper's unit of work) ------------------------------------------------
    def pump_due(self, now: int | None = None) -> tuple[int, bool]:
        """Act on due timers of up to PUMP_QUEUE_LIMIT queues. Returns (timers handled,
        more work is due now).

        1. Claim due queues in the timer index (index_claim.lua): no other pumper
           gets them until the claim lease ends.
        2. Run pump.lua on each (one pipeline).
        3. Settle each queue's index score to its next due time (index_settle.lua),
           unless a publish lowered it meanwhile.
        4. Re-read each settled queue's earliest timer and lower its score if a
           timer was added between steps 2 and 3 (its publisher's own index update
           may have landed before the settle and been overwritten)."""
        now = now_ms() if now is None else now
        claim = now + PUMP_LEASE_MS
        members = [m.decode() for m in script("index_claim")(
            keys=[keys.TIMER_INDEX], args=[now, PUMP_LEASE_MS, PUMP_QUEUE_LIMIT], client=self.client)]
        if not members:
            return 0, False
        queues = [keys.split_member(m) for m in members]
        pipe = self.client.pipeline(transaction=False)
        for ns, q in queues:
            script("pump")(keys=keys.queue_keys(ns, q), args=[now, PUMP_JOB_LIMIT, self.ready_channel(ns, q)],
                           client=pipe)
        reports = pipe.execute()
        settled: dict[str, int] = {}
        for member, (handled, _readied, _dead, _expired, next_due) in zip(members, reports):
            settled[member] = now if handled >= PUMP_JOB_LIMIT else next_due
        args: list = [claim]
        for member, due in settled.items():
            args += [member, due]
        script("index_settle")(keys=[keys.TIMER_INDEX], args=args, client=self.client)
        self._recheck_index(settled)
        handled_total = sum(report[0] for report in reports)
        more = len(members) >= PUMP_QUEUE_LIMIT or any(due == now for due in settled.values())
        return handled_total, more

    def _recheck_index(self, settled: dict[str, int]) -> None:
        pipe = self.client.pipeline(transaction=False)
        for member in settled:
            script("due")(keys=keys.queue_keys(*keys.split_member(member)), args=[], client=pipe)
        lower = {member: fresh for (member, was), fresh in zip(settled.items(), pipe.execute())
                 if fresh >= 0 and (was < 0 or fresh < was)}
        if lower:
            self.client.zadd(keys.TIMER_INDEX, lower, lt=True)

    def next_due_ms(self) -> int | None:
        """The earliest due time in the timer index (claims included), or None."""
        first = self.client.zrange(keys.TIMER_INDEX, 0, 0, withscores=True)
        return int(first[0][1]) if first else None

"""Every Redis key the engine uses, one builder per key, with its Redis type.

All keys of one queue share the hash tag ``{ns/q}`` so that the scripts that
touch a queue run on one Redis Cluster slot. The two global keys (the timer
index and the queue registry) are only ever touched by single-key commands.
"""
from __future__ import annotations


def tag(ns: str, q: str) -> str:
    return "{%s/%s}" % (ns, q)


def jobs(ns: str, q: str) -> str:        # hash: job id -> packed job (see lua/_job.lua)
    return f"lq:{tag(ns, q)}:jobs"


def ready(ns: str, q: str) -> str:       # zset: job id, score (255 - priority) * 2^45 + seq
    return f"lq:{tag(ns, q)}:ready"


def delayed(ns: str, q: str) -> str:     # zset: job id, score = due time (ms)
    return f"lq:{tag(ns, q)}:delayed"


def inflight(ns: str, q: str) -> str:    # zset: job id, score = lease expiry (ms)
    return f"lq:{tag(ns, q)}:inflight"


def expiry(ns: str, q: str) -> str:      # zset: ready job id, score = ttl expiry (ms)
    return f"lq:{tag(ns, q)}:expiry"


def dead(ns: str, q: str) -> str:        # zset: job id, score = seq (oldest first)
    return f"lq:{tag(ns, q)}:dead"


def meta(ns: str, q: str) -> str:        # hash: seq, created_ms, pause state, last_consume_ms, minute counters + totals, rate bucket
    return f"lq:{tag(ns, q)}:meta"


def idempotency(ns: str, q: str, key: str) -> str:  # string: job id(s), EX 24 h
    return f"lq:{tag(ns, q)}:idem:{key}"


def queue_keys(ns: str, q: str) -> list[str]:
    """The KEYS of every per-queue script, in this order (see lua/_job.lua)."""
    return [jobs(ns, q), ready(ns, q), delayed(ns, q), inflight(ns, q), expiry(ns, q), dead(ns, q), meta(ns, q)]


def ready_channel(db: int, ns: str, q: str) -> str:  # pub/sub channel: "jobs became ready" (wakes long polls)
    # Pub/sub is server-wide, not per database: the DB number keeps two deployments
    # sharing one Redis server from waking each other's consumers.
    return f"lq:ready:{db}:{ns}/{q}"


TIMER_INDEX = "lmstfy:timers"     # zset: "ns/q" -> earliest due time (ms) of its delayed/inflight/expiry sets
QUEUE_REGISTRY = "lmstfy:queues"  # set: "ns/q" of every queue that exists


def queue_member(ns: str, q: str) -> str:
    return f"{ns}/{q}"


def split_member(member: str) -> tuple[str, str]:
    ns, _, q = member.partition("/")
    return ns, q


def rate_counter(token_id: int, direction: str) -> str:  # string counter, EX interval ("r" or "w")
    return f"lmstfy:limit:{token_id}:{direction}"


def attempt_log(topic_id: int) -> str:  # stream: one entry per delivery attempt, capped (MAXLEN ~)
    return f"lmstfy:attempts:{topic_id}"


# Cluster-wide metrics that no job script sees (queues/metrics.py), in the default pool.
DELIVERY_OUTCOMES = "lmstfy:metrics:deliveries"      # hash: "topic|ns|q|outcome" -> attempts
DELIVERY_LATENCY = "lmstfy:metrics:delivery_ms"      # hash: "ns|<bucket bound ms or +Inf>" -> attempts, "ns|sum" -> total ms
RATE_LIMITED = "lmstfy:metrics:rate_limited"         # hash: "ns|direction" -> requests refused with 429
AUTH_FAILURES = "lmstfy:metrics:auth_failures"       # hash: reason -> 401s of the token authentication


def auth_failures_minute(minute: int) -> str:  # string counter, expires after 2 h (minute = ms // 60000)
    return f"lmstfy:metrics:auth_failures:{minute}"

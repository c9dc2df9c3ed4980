"""ULIDs as lmstfy makes them: job ids carry their delay, tokens are plain ULIDs.

A ULID is 16 bytes (48-bit millisecond timestamp, 80 random bits) written as 26
Crockford base32 characters. lmstfy overwrites the last 4 random bytes of a job
id with the delay in seconds (uint32, little-endian) and prefixes versioned ids
(jobs with attributes) with "1".
"""
from __future__ import annotations

import os
import re
import struct
import threading
import time

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_DECODE = {char: index for index, char in enumerate(ALPHABET)}
ULID_LENGTH = 26
# Ids are made and read on every publish and consume: encode 10 bits (two
# characters) per step, decode the timestamp with int() through a translation table.
_PAIRS = [first + second for first in ALPHABET for second in ALPHABET]
_PAIR_SHIFTS = range(120, -1, -10)
_TO_INT_DIGITS = str.maketrans(ALPHABET + ALPHABET.lower(), ("0123456789abcdefghijklmnopqrstuv") * 2)
_ULID_TEXT = re.compile(r"[0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{26}\Z")


def encode(raw: bytes) -> str:
    """16 bytes -> 26 characters (128 bits, left-padded to 130)."""
    number = int.from_bytes(raw, "big")
    return "".join([_PAIRS[(number >> shift) & 1023] for shift in _PAIR_SHIFTS])


def decode(text: str) -> bytes:
    number = 0
    for char in text.upper():
        number = (number << 5) | _DECODE[char]
    return number.to_bytes(16, "big")


def new_ulid(now_ms: int | None = None, random_bytes: bytes | None = None) -> str:
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    tail = os.urandom(10) if random_bytes is None else random_bytes
    return encode(ms.to_bytes(6, "big") + tail)


class _Monotonic:
    """Random parts that increase within one millisecond (a monotonic ULID), so
    ids published in one millisecond by this process sort in publish order: a
    delayed bulk publish falls due, and becomes ready, in request order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._last_random = 0

    def take(self, ms: int, count: int) -> int:
        """The first of `count` consecutive random parts for millisecond `ms`."""
        with self._lock:
            if ms == self._last_ms and self._last_random + count < 2**48:
                first = self._last_random + 1
            else:
                first = int.from_bytes(os.urandom(6), "big") >> 1  # room to count up
            self._last_ms, self._last_random = ms, first + count - 1
            return first


_monotonic = _Monotonic()


def new_job_ids(count: int, delay_s: int, versioned: bool = False, now_ms: int | None = None) -> list[str]:
    """`count` job ids of one publish, in order."""
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    first = _monotonic.take(ms, count)
    head, tail = ms.to_bytes(6, "big"), struct.pack("<I", delay_s)
    prefix = "1" if versioned else ""
    return [prefix + encode(head + (first + i).to_bytes(6, "big") + tail) for i in range(count)]


def new_job_id(delay_s: int, versioned: bool = False, now_ms: int | None = None) -> str:
    return new_job_ids(1, delay_s, versioned, now_ms)[0]


def timestamp_ms(job_id: str) -> int | None:
    """Publish time of a job id (None for an id that is not ours)."""
    body = job_id[-ULID_LENGTH:]
    if not _ULID_TEXT.match(body):
        return None
    return int(body[:10].translate(_TO_INT_DIGITS), 32)


def delay_of(job_id: str) -> int | None:
    body = job_id[-ULID_LENGTH:]
    if len(body) != ULID_LENGTH or any(char not in _DECODE for char in body.upper()):
        return None
    return struct.unpack("<I", decode(body)[12:])[0]

"""Query parameters parsed the way lmstfy parses them (Go's strconv.ParseUint /
ParseInt): decimal digits only, within the type's range, else a 400 with
lmstfy's message for that parameter."""
from __future__ import annotations

import re

from queues.api.errors import bad_request

# \Z, not $: "$" also matches before a trailing newline, which Go's parser rejects.
_DIGITS = re.compile(r"[0-9]+\Z")
_SIGNED = re.compile(r"[-+]?[0-9]+\Z")
UINT16_MAX = 2**16 - 1
UINT32_MAX = 2**32 - 1
INT64_MAX = 2**63 - 1


def uint(query, name: str, default: int, maximum: int, message: str) -> int:
    raw = query.get(name)
    if raw is None:
        return default
    if not _DIGITS.match(raw) or int(raw) > maximum:
        raise bad_request(message)
    return int(raw)


def int64(query, name: str, default: int, message: str) -> int:
    raw = query.get(name)
    if raw is None:
        return default
    if not _SIGNED.match(raw) or not -INT64_MAX - 1 <= int(raw) <= INT64_MAX:
        raise bad_request(message)
    return int(raw)

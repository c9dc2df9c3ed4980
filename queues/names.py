"""lmstfy's rules for namespace and queue names, with its exact error strings."""
from __future__ import annotations

import re

MAX_NAME_LENGTH = 255
_NAME = re.compile(r"^[-_A-Za-z0-9]+$")
_QUEUE_LIST = re.compile(r"^[-_,A-Za-z0-9]+$")

NAME_TOO_LONG = "namespace or queue name too long"
BAD_NAMESPACE = "namespace name contains forbidden characters"
BAD_QUEUE = "queue name contains forbidden characters"


def is_valid_name(name: str) -> bool:
    return bool(_NAME.match(name))


def namespace_error(namespace: str) -> str | None:
    return None if is_valid_name(namespace) else BAD_NAMESPACE


def names_error(namespace: str, queue: str) -> str | None:
    """Validation of every route but consume (lmstfy's ValidateParams)."""
    if len(namespace) > MAX_NAME_LENGTH or len(queue) > MAX_NAME_LENGTH:
        return NAME_TOO_LONG
    if not is_valid_name(namespace):
        return BAD_NAMESPACE
    if not is_valid_name(queue) or queue.startswith("_"):
        return BAD_QUEUE
    return None


def consume_names_error(namespace: str, queues: str) -> str | None:
    """Validation of consume (lmstfy's ValidateMultiConsume): no length check, `_` allowed."""
    if not is_valid_name(namespace):
        return BAD_NAMESPACE
    if not _QUEUE_LIST.match(queues):
        return BAD_QUEUE
    return None

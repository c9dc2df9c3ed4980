"""Strict parsers for settings taken from the environment.

Each helper names the variable in its error, so a bad deployment fails at
start-up with a message an operator can act on instead of misbehaving later.
"""
from __future__ import annotations

import math
import os
import re
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _raw(name: str) -> str | None:
    value = os.environ.get(name)
    return None if value is None else value.strip()


def envstr(name: str, default: str | None = None) -> str | None:
    value = _raw(name)
    return default if value is None or value == "" else value


def envbool(name: str, default: bool = False) -> bool:
    value = _raw(name)
    if value is None:
        return default
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false, yes/no), got {value!r}")


def envint(name: str, default: int, minimum: int | None = None, maximum: int | None = None) -> int:
    value = _raw(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {value!r}") from None
    _check_range(name, number, minimum, maximum)
    return number


def envfloat(name: str, default: float, minimum: float | None = None, maximum: float | None = None) -> float:
    value = _raw(name)
    if value is None or value == "":
        return default
    try:
        number = float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(number):  # float() accepts "nan" and "inf", which pass any range check
        raise ImproperlyConfigured(f"{name} must be a finite number, got {value!r}")
    _check_range(name, number, minimum, maximum)
    return number


def _check_range(name: str, number: float, minimum: float | None, maximum: float | None) -> None:
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name} must be >= {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise ImproperlyConfigured(f"{name} must be <= {maximum}, got {number}")


def envlist(name: str, default: list[str]) -> list[str]:
    value = _raw(name)
    if value is None or value == "":
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


_POOL_NAME = re.compile(r"[-_A-Za-z0-9]+")
REDIS_SCHEMES = ("redis", "rediss", "unix", "redis+sentinel", "redis+cluster")


def check_redis_url(name: str, url: str) -> str:
    scheme = urlsplit(url).scheme
    if scheme not in REDIS_SCHEMES:
        raise ImproperlyConfigured(
            f"{name}: {url!r} is not a Redis URL (schemes: {', '.join(REDIS_SCHEMES)})")
    return url


def envpools(name: str, fallback_name: str) -> dict[str, str] | None:
    """Parse ``LMSTFY_POOLS`` (``default=redis://...,other=redis://...``).

    ``REDIS_URL`` (``fallback_name``) is shorthand for a single default pool.
    Returns None when neither is set: the embedded Redis is used then.
    """
    raw = envstr(name)
    if raw is None:
        single = envstr(fallback_name)
        return None if single is None else {"default": check_redis_url(fallback_name, single)}
    pools: dict[str, str] = {}
    for item in raw.split(","):
        pool, sep, url = item.strip().partition("=")
        pool = pool.strip()
        if not sep or not pool or not url.strip():
            raise ImproperlyConfigured(f"{name} entries must look like name=redis://host:port/db, got {item!r}")
        if pool in pools:
            raise ImproperlyConfigured(f"{name} names pool {pool!r} twice")
        if not _POOL_NAME.fullmatch(pool):  # ASCII only; ':' would break `pool:token`
            raise ImproperlyConfigured(f"{name}: pool name {pool!r} may hold only letters, digits, - and _")
        pools[pool] = check_redis_url(name, url.strip())
    if "default" not in pools:
        raise ImproperlyConfigured(f"{name} must define a pool named 'default'")
    return pools

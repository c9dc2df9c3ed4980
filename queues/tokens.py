"""Token values, digests and the cached lookup used by every API request.

Generated tokens look like lmstfy's (a 26-character ULID): the first 10
characters are the creation time, the last 16 are derived from SECRET_KEY and a
random per-token value, so the database never holds a token or anything from
which one can be computed without the secret key. User-supplied tokens (at
least 20 characters, as upstream) are stored as a digest only.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from queues import ulid
from queues.models import Namespace, Token

MIN_USER_TOKEN_LENGTH = 20
GENERATED_PREFIX_LENGTH = 12
USER_PREFIX_LENGTH = 6
# A revoked token must be refused by every instance within 1 s (SPEC §2).
CACHE_SECONDS = 0.9
CACHE_MAX_ENTRIES = 10_000
LAST_USED_RESOLUTION_S = 60


class TokenExists(Exception):
    """The namespace already has this token in this pool."""


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def derive_token(derivation: str, created_ms: int) -> str:
    mac = hmac.new(settings.SECRET_KEY.encode(), b"lmstfy-token\0" + derivation.encode(), hashlib.sha256).digest()
    secret_part = ulid.encode(mac[:16])[-16:]
    return ulid.new_ulid(created_ms)[:10] + secret_part


def _public_prefix(token: str, generated: bool) -> str:
    return token[:GENERATED_PREFIX_LENGTH if generated else USER_PREFIX_LENGTH]


def create_token(namespace_name: str, description: str, pool: str = "default",
                 user_token: str | None = None, created_by=None) -> tuple[Token, str]:
    """Create a token and return it with its plain value (shown once)."""
    derivation = ""
    if user_token is None:
        derivation = secrets.token_hex(16)
        plain = derive_token(derivation, int(time.time() * 1000))
    else:
        plain = user_token
    namespace, _ = Namespace.objects.get_or_create(name=namespace_name)
    try:
        with transaction.atomic():
            token = Token.objects.create(
                namespace=namespace, pool=pool, description=description, digest=digest(plain),
                prefix=_public_prefix(plain, user_token is None), derivation=derivation, created_by=created_by)
    except IntegrityError:
        raise TokenExists() from None
    return token, plain


def plain_value(token: Token) -> str | None:
    """The value of a token this server generated, derived again from its stored
    derivation and checked against its digest; None for a user-supplied token
    (or after a SECRET_KEY change)."""
    if not token.derivation:
        return None
    created_ms = ulid.timestamp_ms(token.prefix[:10] + "0" * 16) or 0
    plain = derive_token(token.derivation, created_ms)
    return plain if hmac.compare_digest(digest(plain), token.digest) else None


LISTED_MARK = "…"


def listed_value(token: Token) -> str:
    """What GET /token/:ns shows for a token: `<prefix>…<id>` (non-secret and
    unique: two tokens may share a prefix), or in "full" mode a generated token
    in full. Every admin route that takes a token also takes this value."""
    plain = plain_value(token) if settings.LMSTFY_TOKEN_LISTING == "full" else None
    return plain or f"{token.prefix}{LISTED_MARK}{token.id}"


def find(namespace_name: str, pool: str, plain_or_listed: str) -> Token | None:
    """The active token of the namespace and pool given by its plain value or its
    listed value."""
    active = Token.objects.active().filter(namespace__name=namespace_name, pool=pool)
    prefix, mark, token_id = plain_or_listed.rpartition(LISTED_MARK)
    if mark:
        return active.filter(prefix=prefix, id=token_id).first() if token_id.isdigit() else None
    return active.filter(digest=digest(plain_or_listed)).first()


def revoke(token_ids: list[int]) -> int:
    """Revoke tokens by id; every process refuses them within CACHE_SECONDS."""
    revoked = Token.objects.filter(id__in=token_ids, revoked_at__isnull=True).update(revoked_at=timezone.now())
    cache.clear()
    return revoked


def revoke_token(namespace_name: str, pool: str, plain_or_listed: str) -> int:
    """Revoke by plain token or listed value. Returns how many (0 or 1)."""
    found = find(namespace_name, pool, plain_or_listed)
    return revoke([found.id]) if found else 0


@dataclass(frozen=True)
class _Entry:
    token_id: int | None
    expires: float


class TokenCache:
    """Per-process cache of (pool, namespace, token) -> token id, for at most
    CACHE_SECONDS, so that a revocation reaches every process within 1 s while a
    busy worker asks the database about each token at most once a second."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str, str], _Entry] = {}
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def lookup(self, pool: str, namespace: str, token: str) -> int | None:
        key = (pool, namespace, digest(token))
        now = time.monotonic()
        entry = self._entries.get(key)
        if entry is None or entry.expires <= now:
            entry = _Entry(self._load(*key), now + CACHE_SECONDS)
            with self._lock:
                if len(self._entries) >= CACHE_MAX_ENTRIES:
                    self._entries.clear()
                self._entries[key] = entry
        return entry.token_id

    @staticmethod
    def _load(pool: str, namespace: str, token_digest: str) -> int | None:
        row = (Token.objects.active()
               .filter(pool=pool, namespace__name=namespace, digest=token_digest)
               .values_list("id", "digest", "last_used_at").first())
        if row is None or not hmac.compare_digest(row[1], token_digest):
            return None
        _touch_last_used(row[0], row[2])
        return row[0]


def _touch_last_used(token_id: int, last_used_at) -> None:
    """Record use at most once a minute: a conditional UPDATE, so concurrent
    workers write it once between them."""
    now = timezone.now()
    if last_used_at is not None and (now - last_used_at).total_seconds() < LAST_USED_RESOLUTION_S:
        return
    cutoff = now - timezone.timedelta(seconds=LAST_USED_RESOLUTION_S)
    Token.objects.filter(id=token_id).filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lt=cutoff)).update(last_used_at=now)


cache = TokenCache()

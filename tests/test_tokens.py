"""Tokens: stored as a digest only, compared in constant time, listed without
the secret, revoked everywhere within a second."""
from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from pytest_django import DjangoAssertNumQueries, Settings
from rest_framework.test import APIClient

from queues import tokens, ulid
from queues.models import Token

pytestmark = pytest.mark.django_db

USER_TOKEN = "a-user-chosen-token-0123456789"


def every_stored_value() -> list[str]:
    """Every column of every row of the token and namespace tables, as text."""
    values: list[str] = []
    with connection.cursor() as cursor:
        for table in (Token._meta.db_table, "queues_namespace"):
            cursor.execute(f"SELECT * FROM {table}")  # noqa: S608 (table names are ours)
            values.extend(str(value) for row in cursor.fetchall() for value in row)
    return values


def test_a_generated_token_is_nowhere_in_the_database() -> None:
    _, plain = tokens.create_token("ns", "generated")
    stored = every_stored_value()
    assert stored
    secret_part = plain[10:]  # the first 10 characters are only the creation time
    assert not [value for value in stored if plain in value or secret_part in value]


def test_a_user_token_is_nowhere_in_the_database() -> None:
    _, plain = tokens.create_token("ns", "user", user_token=USER_TOKEN)
    assert plain == USER_TOKEN
    assert not [value for value in every_stored_value() if USER_TOKEN[tokens.USER_PREFIX_LENGTH:] in value]


def test_the_stored_digest_is_the_sha256_of_the_token() -> None:
    token, plain = tokens.create_token("ns", "generated")
    token.refresh_from_db()
    assert token.digest == hashlib.sha256(plain.encode()).hexdigest()
    assert tokens.digest(USER_TOKEN) == hashlib.sha256(USER_TOKEN.encode()).hexdigest()


def test_the_lookup_compares_digests_with_hmac_compare_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    token, plain = tokens.create_token("ns", "generated")
    calls: list[tuple[object, object]] = []
    real_compare: Callable[[object, object], bool] = hmac.compare_digest

    def recording_compare(a, b) -> bool:
        calls.append((a, b))
        return real_compare(a, b)

    monkeypatch.setattr("queues.tokens.hmac.compare_digest", recording_compare)
    assert tokens.TokenCache().lookup("default", "ns", plain) == token.id
    assert (token.digest, tokens.digest(plain)) in calls


def test_generated_tokens_are_ulids_of_26_characters() -> None:
    before_ms = int(time.time() * 1000)
    values = {tokens.create_token("ns", f"token {i}")[1] for i in range(5)}
    after_ms = int(time.time() * 1000)
    assert len(values) == 5
    for value in values:
        assert len(value) == ulid.ULID_LENGTH
        assert set(value) <= set(ulid.ALPHABET)
        assert before_ms <= ulid.timestamp_ms(value) <= after_ms


def test_a_user_token_needs_at_least_20_characters(admin_api: APIClient) -> None:
    too_short = admin_api.post("/token/ns?description=d&token=" + "x" * 19)
    assert too_short.status_code == 400
    assert too_short.json() == {"error": "the user token was too short"}
    just_enough = admin_api.post("/token/ns?description=d&token=" + "x" * 20)
    assert just_enough.status_code == 201
    assert just_enough.json() == {"token": "x" * 20}


def test_prefix_listing_shows_prefixes_and_never_the_token(admin_api: APIClient, settings: Settings) -> None:
    settings.LMSTFY_TOKEN_LISTING = "prefix"
    _, generated = tokens.create_token("ns", "generated")
    tokens.create_token("ns", "user", user_token=USER_TOKEN)

    listed = admin_api.get("/token/ns").json()["tokens"]

    first, second = Token.objects.order_by("id")
    assert listed == {generated[:tokens.GENERATED_PREFIX_LENGTH] + f"…{first.id}": "generated",
                      USER_TOKEN[:tokens.USER_PREFIX_LENGTH] + f"…{second.id}": "user"}
    assert not [key for key in listed if generated in key or USER_TOKEN in key]


def test_full_listing_shows_generated_tokens_in_full_and_user_tokens_by_prefix(
        admin_api: APIClient, settings: Settings) -> None:
    settings.LMSTFY_TOKEN_LISTING = "full"
    _, generated = tokens.create_token("ns", "generated")
    tokens.create_token("ns", "user", user_token=USER_TOKEN)

    listed = admin_api.get("/token/ns").json()["tokens"]

    user = Token.objects.get(description="user")
    assert listed == {generated: "generated", USER_TOKEN[:tokens.USER_PREFIX_LENGTH] + f"…{user.id}": "user"}


def test_full_listing_falls_back_to_the_prefix_after_the_secret_key_changed(
        admin_api: APIClient, settings: Settings) -> None:
    settings.LMSTFY_TOKEN_LISTING = "full"
    _, generated = tokens.create_token("ns", "generated")
    settings.SECRET_KEY = "another-secret-key-" + "z" * 40

    listed = admin_api.get("/token/ns").json()["tokens"]

    assert listed == {generated[:tokens.GENERATED_PREFIX_LENGTH] + f"…{Token.objects.get().id}": "generated"}


def test_a_listed_prefix_revokes_the_token() -> None:
    _, plain = tokens.create_token("ns", "generated")
    listed = tokens.listed_value(Token.objects.get())
    assert tokens.revoke_token("ns", "default", listed) == 1
    assert tokens.cache.lookup("default", "ns", plain) is None


def test_tokens_sharing_a_prefix_are_listed_and_revoked_separately() -> None:
    one, _ = tokens.create_token("ns", "one", user_token="same-prefix-token-number-1")
    two, _ = tokens.create_token("ns", "two", user_token="same-prefix-token-number-2")
    assert tokens.listed_value(one) != tokens.listed_value(two)
    assert tokens.revoke_token("ns", "default", tokens.listed_value(one)) == 1
    assert list(Token.objects.active()) == [two]


def test_an_unknown_prefix_or_token_revokes_nothing() -> None:
    tokens.create_token("ns", "one", user_token=USER_TOKEN)
    assert tokens.revoke_token("ns", "default", "nothin…") == 0
    assert tokens.revoke_token("ns", "default", "nothin…999") == 0
    assert tokens.revoke_token("ns", "default", "not-a-granted-token-at-all") == 0
    assert tokens.revoke_token("other", "default", USER_TOKEN) == 0
    assert Token.objects.active().count() == 1


def test_a_revoked_token_value_can_be_granted_again() -> None:
    tokens.create_token("ns", "first", user_token=USER_TOKEN)
    with pytest.raises(tokens.TokenExists):
        tokens.create_token("ns", "again", user_token=USER_TOKEN)
    tokens.revoke_token("ns", "default", USER_TOKEN)
    token, _ = tokens.create_token("ns", "again", user_token=USER_TOKEN)
    assert tokens.cache.lookup("default", "ns", USER_TOKEN) == token.id


def test_a_token_grants_only_its_namespace_and_pool() -> None:
    token, plain = tokens.create_token("ns", "generated")
    cache = tokens.TokenCache()
    assert cache.lookup("default", "ns", plain) == token.id
    assert cache.lookup("default", "other", plain) is None
    assert cache.lookup("second", "ns", plain) is None
    assert cache.lookup("default", "ns", plain + "x") is None


def test_every_process_refuses_a_revoked_token_within_one_second() -> None:
    token, plain = tokens.create_token("ns", "generated")
    # Two server processes, each with its own cache, that have just seen the token.
    first, second = tokens.TokenCache(), tokens.TokenCache()
    assert first.lookup("default", "ns", plain) == token.id
    assert second.lookup("default", "ns", plain) == token.id

    revoked_at = time.monotonic()
    assert tokens.revoke_token("ns", "default", plain) == 1
    deadline = revoked_at + 1.0
    refused = {"first": False, "second": False}
    while not all(refused.values()) and time.monotonic() < deadline:
        refused["first"] = refused["first"] or first.lookup("default", "ns", plain) is None
        refused["second"] = refused["second"] or second.lookup("default", "ns", plain) is None
        time.sleep(0.02)

    assert refused == {"first": True, "second": True}
    # And they keep refusing it.
    assert first.lookup("default", "ns", plain) is None
    assert second.lookup("default", "ns", plain) is None


def test_the_process_that_revokes_refuses_the_token_at_once(api: APIClient, token: str) -> None:
    assert api.put("/api/ns/q", data=b"x", content_type="text/plain").status_code == 201
    tokens.revoke_token("ns", "default", token)
    refused = api.put("/api/ns/q", data=b"x", content_type="text/plain")
    assert refused.status_code == 401
    assert refused.json() == {"error": "invalid token"}


def test_a_cached_lookup_asks_the_database_nothing(django_assert_num_queries: DjangoAssertNumQueries) -> None:
    token, plain = tokens.create_token("ns", "generated")
    cache = tokens.TokenCache()
    assert cache.lookup("default", "ns", plain) == token.id
    with django_assert_num_queries(0):
        assert cache.lookup("default", "ns", plain) == token.id
        assert cache.lookup("default", "ns", plain) == token.id


def test_last_used_at_is_written_at_most_once_a_minute(django_assert_num_queries: DjangoAssertNumQueries) -> None:
    token, plain = tokens.create_token("ns", "generated")
    assert token.last_used_at is None

    tokens.TokenCache().lookup("default", "ns", plain)
    token.refresh_from_db()
    first_use = token.last_used_at
    assert first_use is not None
    assert timezone.now() - first_use < timedelta(seconds=5)

    # A fresh cache (another process, or after expiry) reads but does not write.
    with django_assert_num_queries(1):
        tokens.TokenCache().lookup("default", "ns", plain)
    token.refresh_from_db()
    assert token.last_used_at == first_use

    # A minute later, the next use is recorded.
    a_minute_ago = timezone.now() - timedelta(seconds=tokens.LAST_USED_RESOLUTION_S + 1)
    Token.objects.filter(id=token.id).update(last_used_at=a_minute_ago)
    tokens.TokenCache().lookup("default", "ns", plain)
    token.refresh_from_db()
    assert token.last_used_at > a_minute_ago + timedelta(seconds=tokens.LAST_USED_RESOLUTION_S)


def test_a_stale_last_used_at_is_written_once_by_concurrent_processes() -> None:
    """Two processes load the same stale row; the conditional UPDATE lets one write."""
    token, _ = tokens.create_token("ns", "generated")
    stale = timezone.now() - timedelta(minutes=5)
    Token.objects.filter(id=token.id).update(last_used_at=stale)

    tokens._touch_last_used(token.id, stale)
    token.refresh_from_db()
    written = token.last_used_at
    tokens._touch_last_used(token.id, stale)  # the second process still holds the stale value
    token.refresh_from_db()

    assert written > stale
    assert token.last_used_at == written

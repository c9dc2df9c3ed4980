"""PUT /api/:ns/:q — publish (lmstfy §1.1, our priority/idempotency extensions)."""
from __future__ import annotations

import base64

import pytest

from queues import ulid
from queues.engine import now_ms
from tests.api_helpers import OCTET, consume, decoded, peek_job, publish, queue_traces, stats, url

MIB = 1024 * 1024


def put(api, query: str = "", body: bytes = b"job", **headers):
    return api.put(url(query=query), data=body, content_type=OCTET, **headers)


# -- parameters ------------------------------------------------------------------------

BAD_PARAMETERS = [
    # (query, message) in lmstfy's order of checks
    ("delay=-1", "invalid delay"),
    ("delay=1.5", "invalid delay"),
    ("delay=%2B3", "invalid delay"),
    ("delay=+3", "invalid delay"),  # a space: "+" in a query string
    ("delay=abc", "invalid delay"),
    ("delay=", "invalid delay"),
    ("delay=4294967296", "invalid delay"),
    ("ttl=-1", "invalid ttl"),
    ("ttl=1.5", "invalid ttl"),
    ("ttl=%2B3", "invalid ttl"),
    ("ttl=+3", "invalid ttl"),  # a space: "+" in a query string
    ("ttl=", "invalid ttl"),
    ("ttl=4294967296", "invalid ttl"),
    ("delay=10&ttl=9", "ttl is shorter than delay"),
    ("tries=-1", "invalid tries"),
    ("tries=1.5", "invalid tries"),
    ("tries=%2B3", "invalid tries"),
    ("tries=+3", "invalid tries"),  # a space: "+" in a query string
    ("tries=65536", "invalid tries"),
    ("tries=x", "invalid tries"),
    ("tries=0", "tries shouldn't be zero"),
    ("tries=00", "tries shouldn't be zero"),
    ("priority=-1", "invalid priority"),
    ("priority=256", "invalid priority"),
    ("priority=1.5", "invalid priority"),
    ("priority=%2B3", "invalid priority"),
    ("priority=+3", "invalid priority"),  # a space: "+" in a query string
    ("priority=high", "invalid priority"),
]


@pytest.mark.parametrize("query, message", BAD_PARAMETERS)
def test_a_bad_parameter_is_a_400_with_lmstfys_message(api, query, message):
    response = put(api, query)

    assert response.status_code == 400
    assert response.json() == {"error": message}


@pytest.mark.parametrize("query, message", [
    ("delay=x&ttl=x&tries=x&priority=x", "invalid delay"),
    ("ttl=x&tries=x&priority=x", "invalid ttl"),
    ("delay=10&ttl=5&tries=x&priority=x", "ttl is shorter than delay"),
    ("tries=x&priority=x", "invalid tries"),
    ("tries=0&priority=x", "tries shouldn't be zero"),
])
def test_parameters_are_checked_in_lmstfys_order(api, query, message):
    assert put(api, query).json() == {"error": message}


@pytest.mark.parametrize("name", ["delay", "ttl", "tries", "priority"])
def test_a_number_followed_by_a_newline_is_rejected(api, name):
    response = put(api, f"{name}=1%0A")

    assert response.status_code == 400
    assert response.json()["error"].startswith("invalid")


@pytest.mark.parametrize("query", [
    "delay=4294967295&ttl=0",
    "ttl=4294967295",
    "tries=65535",
    "priority=255",
    "priority=0",
    "delay=10&ttl=10",
    "delay=10&ttl=0",
    "delay=007",
    "unknown=ignored",
])
def test_values_at_the_limits_are_accepted(api, query):
    response = put(api, query)

    assert response.status_code == 201
    assert response.json()["msg"] == "published"


def test_the_defaults_are_no_delay_one_day_of_life_and_one_try(api):
    job_id = publish(api)

    job = consume(api)
    assert job["job_id"] == job_id
    assert job["remain_tries"] == 0
    assert 86399 <= job["ttl"] <= 86400
    assert ulid.delay_of(job_id) == 0


def test_the_answer_is_201_with_a_26_character_job_id(api):
    response = put(api)

    assert response.status_code == 201
    body = response.json()
    assert body == {"msg": "published", "job_id": body["job_id"]}
    assert len(body["job_id"]) == 26


def test_the_job_id_carries_the_delay_and_the_publish_time(api):
    before = now_ms()
    job_id = publish(api, query="delay=90")

    assert ulid.delay_of(job_id) == 90
    assert before <= ulid.timestamp_ms(job_id) <= now_ms()


def test_leading_zeros_are_decimal_not_octal(api):
    publish(api, query="tries=010")

    assert consume(api)["remain_tries"] == 9


def test_a_delayed_job_becomes_ready_exactly_at_its_due_time(api, engine):
    job_id = publish(api, query="delay=30")
    due = ulid.timestamp_ms(job_id) + 30_000
    assert stats()["delayed"] == 1

    engine.pump_due(now=due - 1)
    assert stats()["ready"] == 0

    engine.pump_due(now=due)
    assert stats()["ready"] == 1
    assert consume(api)["job_id"] == job_id


def test_the_ttl_counts_from_publish_and_the_job_vanishes_when_it_runs_out(api, engine):
    job_id = publish(api, query="ttl=100")
    assert peek_job(job_id).ttl == 100
    published = ulid.timestamp_ms(job_id)

    # Expiry is kept in whole seconds, rounded up: never early, at most 1 s late.
    engine.pump_due(now=published + 99_999)
    assert peek_job(job_id) is not None
    engine.pump_due(now=published + 101_000)
    assert peek_job(job_id) is None
    assert stats()["ready"] == 0


def test_ttl_zero_means_the_job_never_expires(api, engine):
    job_id = publish(api, query="ttl=0")

    engine.pump_due(now=now_ms() + 365 * 86400 * 1000)

    assert peek_job(job_id).ttl == 0
    assert consume(api)["ttl"] == 0


def test_a_job_whose_ttl_equals_its_delay_expires_within_a_second_of_falling_due(api, engine):
    job_id = publish(api, query="delay=5&ttl=5")

    engine.pump_due(now=ulid.timestamp_ms(job_id) + 6_000)

    assert peek_job(job_id) is None
    assert api.get(url()).status_code == 404


# -- body ---------------------------------------------------------------------------------

def test_a_body_of_exactly_one_mebibyte_is_accepted(api):
    body = b"x" * MIB

    publish(api, body)

    assert decoded(consume(api)) == body


def test_a_body_one_byte_over_one_mebibyte_is_413(api, redis_client):
    response = put(api, body=b"x" * (MIB + 1))

    assert response.status_code == 413
    assert response.json() == {"error": "body too large"}
    assert queue_traces(redis_client) == []


def test_the_parameters_are_checked_before_the_body_size(api):
    response = put(api, "priority=300", body=b"x" * (MIB + 1))

    assert response.status_code == 400
    assert response.json() == {"error": "invalid priority"}


def test_an_empty_body_is_accepted_and_delivered_empty(api):
    publish(api, b"")

    job = consume(api)
    assert job["data"] == ""
    assert decoded(job) == b""


def test_a_binary_body_round_trips_byte_for_byte(api):
    body = bytes(range(256)) * 4 + b"\x00\xff\r\n"

    job_id = publish(api, body)

    job = consume(api)
    assert job["job_id"] == job_id
    assert job["data"] == base64.b64encode(body).decode()


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "text/plain", OCTET, ""])
def test_the_content_type_is_stored_with_the_job(api, content_type):
    response = api.generic("PUT", url(), b"{}", content_type=content_type)

    assert response.status_code == 201
    assert peek_job(response.json()["job_id"]).content_type == content_type


def test_a_content_type_longer_than_255_characters_is_rejected(api, redis_client):
    response = api.put(url(), data=b"x", content_type="text/" + "x" * 251)

    assert response.status_code == 400
    assert response.json() == {"error": "invalid content type"}
    assert queue_traces(redis_client) == []


# -- versioned ids and attributes -----------------------------------------------------------

@pytest.mark.parametrize("value", ["YES", "yes", "Yes"])
def test_enable_job_version_gives_a_27_character_id_starting_with_1(api, value):
    job_id = publish(api, HTTP_ENABLE_JOB_VERSION=value)

    assert len(job_id) == 27
    assert job_id.startswith("1")
    assert ulid.timestamp_ms(job_id) is not None


@pytest.mark.parametrize("value", ["NO", "true", "1", ""])
def test_other_enable_job_version_values_keep_legacy_ids(api, value):
    job_id = publish(api, HTTP_ENABLE_JOB_VERSION=value, HTTP_JOB_ATTR_COLOR="red")

    assert len(job_id) == 26
    assert consume(api)["attributes"] is None


def test_attributes_are_returned_by_consume_and_peek(api):
    job_id = publish(api, HTTP_ENABLE_JOB_VERSION="YES", HTTP_JOB_ATTR_COLOR="Red",
                     HTTP_JOB_ATTR_TRACE_ID="abc-123")

    peeked = api.get(url(suffix=f"/job/{job_id}")).json()
    consumed = consume(api)
    assert peeked["attributes"] == {"color": "Red", "trace-id": "abc-123"}
    assert consumed["attributes"] == {"color": "Red", "trace-id": "abc-123"}


def test_attribute_keys_are_lower_cased_and_cut_to_32_characters(api):
    publish(api, HTTP_ENABLE_JOB_VERSION="YES", **{"HTTP_JOB_ATTR_" + "K" * 40: "v"})

    assert consume(api)["attributes"] == {"k" * 32: "v"}


def test_attribute_values_are_cut_to_128_characters(api):
    publish(api, HTTP_ENABLE_JOB_VERSION="YES", HTTP_JOB_ATTR_LONG="v" * 200)

    assert consume(api)["attributes"] == {"long": "v" * 128}


def test_empty_attribute_values_are_skipped(api):
    publish(api, HTTP_ENABLE_JOB_VERSION="YES", HTTP_JOB_ATTR_EMPTY="", HTTP_JOB_ATTR_KEPT="1")

    assert consume(api)["attributes"] == {"kept": "1"}


def test_a_versioned_job_without_attributes_answers_null_attributes(api):
    publish(api, HTTP_ENABLE_JOB_VERSION="YES")

    assert consume(api)["attributes"] is None


def attribute_headers(count: int) -> dict:
    return {f"HTTP_JOB_ATTR_KEY{i}": f"value{i}" for i in range(count)}


def test_sixteen_attributes_are_accepted(api):
    publish(api, HTTP_ENABLE_JOB_VERSION="YES", **attribute_headers(16))

    assert len(consume(api)["attributes"]) == 16


def test_seventeen_attributes_are_a_400_and_publish_nothing(api, redis_client):
    response = put(api, HTTP_ENABLE_JOB_VERSION="YES", **attribute_headers(17))

    assert response.status_code == 400
    assert response.json() == {"error": "too many attributes, cannot exceed 16"}
    assert queue_traces(redis_client) == []


def test_empty_attributes_do_not_count_towards_the_limit(api):
    publish(api, HTTP_ENABLE_JOB_VERSION="YES", HTTP_JOB_ATTR_BLANK="", **attribute_headers(16))

    assert len(consume(api)["attributes"]) == 16


def test_keys_that_collide_after_truncation_count_once(api):
    colliding = {"HTTP_JOB_ATTR_" + "A" * 32 + "X": "1", "HTTP_JOB_ATTR_" + "A" * 32 + "Y": "2"}

    publish(api, HTTP_ENABLE_JOB_VERSION="YES", **attribute_headers(15), **colliding)

    attributes = consume(api)["attributes"]
    assert len(attributes) == 16
    assert attributes["a" * 32] in {"1", "2"}


def test_attributes_are_ignored_without_enable_job_version(api):
    response = put(api, HTTP_JOB_ATTR_COLOR="red", **attribute_headers(20))

    assert response.status_code == 201
    assert len(response.json()["job_id"]) == 26
    assert consume(api)["attributes"] is None


# -- idempotency ------------------------------------------------------------------------------

def test_a_repeated_idempotency_key_answers_the_first_job_and_publishes_nothing(api):
    first = put(api, body=b"one", HTTP_IDEMPOTENCY_KEY="order-42")
    second = put(api, body=b"two", HTTP_IDEMPOTENCY_KEY="order-42")

    assert first.status_code == 201
    assert second.status_code == 200
    assert second.json() == {"msg": "duplicated", "job_id": first.json()["job_id"]}
    assert stats()["ready"] == 1
    assert decoded(consume(api)) == b"one"


def test_the_idempotency_key_still_holds_after_the_first_job_is_acked(api):
    first_id = publish(api, HTTP_IDEMPOTENCY_KEY="k")
    api.delete(url(suffix=f"/job/{first_id}"))

    again = put(api, HTTP_IDEMPOTENCY_KEY="k")

    assert again.json() == {"msg": "duplicated", "job_id": first_id}
    assert stats()["ready"] == 0


def test_the_idempotency_key_lasts_24_hours(api, redis_client):
    from queues import keys

    publish(api, HTTP_IDEMPOTENCY_KEY="k")

    assert 86399 <= redis_client.ttl(keys.idempotency("ns", "q", "k")) <= 86400


def test_idempotency_keys_are_per_queue(api):
    first = publish(api, queue="q1", HTTP_IDEMPOTENCY_KEY="k")
    second = publish(api, queue="q2", HTTP_IDEMPOTENCY_KEY="k")

    assert first != second
    assert stats("q1")["ready"] == stats("q2")["ready"] == 1


def test_different_idempotency_keys_publish_different_jobs(api):
    assert publish(api, HTTP_IDEMPOTENCY_KEY="a") != publish(api, HTTP_IDEMPOTENCY_KEY="b")
    assert stats()["ready"] == 2


def test_a_rejected_publish_does_not_reserve_its_idempotency_key(api):
    rejected = put(api, "tries=0", HTTP_IDEMPOTENCY_KEY="k")

    accepted = put(api, HTTP_IDEMPOTENCY_KEY="k")

    assert rejected.status_code == 400
    assert accepted.status_code == 201


def test_an_idempotency_key_of_255_characters_is_accepted_and_256_is_not(api):
    assert put(api, HTTP_IDEMPOTENCY_KEY="k" * 255).status_code == 201

    response = put(api, HTTP_IDEMPOTENCY_KEY="k" * 256)

    assert response.status_code == 400
    assert response.json() == {"error": "invalid idempotency key"}


# -- rejected requests --------------------------------------------------------------------------

@pytest.mark.parametrize("query, headers, body, status", [
    ("delay=-1", {}, b"x", 400),
    ("delay=10&ttl=5", {}, b"x", 400),
    ("tries=0", {}, b"x", 400),
    ("priority=256", {}, b"x", 400),
    ("", {"HTTP_ENABLE_JOB_VERSION": "YES", **attribute_headers(17)}, b"x", 400),
    ("", {}, b"x" * (MIB + 1), 413),
])
def test_a_rejected_publish_leaves_nothing_behind(api, redis_client, query, headers, body, status):
    response = put(api, query, body=body, **headers)

    assert response.status_code == status
    assert queue_traces(redis_client) == []


def test_a_rejected_publish_to_an_existing_queue_changes_nothing(api, redis_client):
    publish(api)
    before = {key: redis_client.dump(key) for key in queue_traces(redis_client)}

    put(api, "tries=0")

    assert {key: redis_client.dump(key) for key in queue_traces(redis_client)} == before

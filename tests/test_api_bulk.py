"""PUT /api/:ns/:q/bulk — bulk publish (lmstfy §1.3)."""
from __future__ import annotations

import json

import pytest

from queues import ulid
from tests.api_helpers import OCTET, consume, decoded, peek_job, publish, queue_traces, stats, url

MIB = 1024 * 1024
NOT_AN_ARRAY = "request body should be an array of objects"


def bulk(api, body: bytes | str, query: str = "", **headers):
    if isinstance(body, str):
        body = body.encode("utf-8")
    return api.put(url(suffix="/bulk", query=query), data=body, content_type="application/json", **headers)


def bulk_ids(api, body: bytes | str, query: str = "", **headers) -> list[str]:
    response = bulk(api, body, query, **headers)
    assert response.status_code == 201, response.content
    return response.json()["job_ids"]


def test_the_answer_is_201_with_the_ids_in_request_order(api):
    ids = bulk_ids(api, '["a", "b", "c"]')

    assert len(ids) == len(set(ids)) == 3
    batch = api.get(url(query="count=10")).json()
    assert [job["job_id"] for job in batch] == ids
    assert [decoded(job) for job in batch] == [b'"a"', b'"b"', b'"c"']


def test_each_element_is_stored_as_its_raw_json_text_byte_for_byte(api):
    elements = ['{"a" : 1,  "b":[1, 2]}', '"hello"', "123456", "null", "true", "-1.5e3", "[ ]", '"snow \u2603"',
                '"\\u00e9"', '{"nested": {"k": "v w"}}']
    body = "[ " + " ,\n\t".join(elements) + " ]"

    ids = bulk_ids(api, body)

    assert [peek_job(job_id).body for job_id in ids] == [element.encode("utf-8") for element in elements]


def test_the_answer_object_shape_is_msg_and_job_ids(api):
    response = bulk(api, "[1]")

    assert response.json() == {"msg": "published", "job_ids": response.json()["job_ids"]}


@pytest.mark.parametrize("body", [
    b'{"a": 1}',
    b'"x"',
    b"1",
    b"",
    b"   ",
    b"[1,]",
    b"[1 2]",
    b"[1] x",
    b"[1][2]",
    b"[",
    b"[1",
    b"not json",
    b"\xff\xfe[1]",
    b"['single']",
])
def test_a_body_that_is_not_a_json_array_is_a_400(api, redis_client, body):
    response = bulk(api, body)

    assert response.status_code == 400
    assert response.json() == {"error": NOT_AN_ARRAY}
    assert queue_traces(redis_client) == []


@pytest.mark.parametrize("body", ["[NaN]", "[Infinity]", "[-Infinity]"])
def test_non_json_numbers_are_not_an_array(api, redis_client, body):
    response = bulk(api, body)

    assert response.json() == {"error": NOT_AN_ARRAY}
    assert queue_traces(redis_client) == []


def test_a_null_body_is_no_jobs_like_upstream(api):
    assert bulk(api, "null").json() == {"error": "no jobs"}


@pytest.mark.parametrize("body", ["[]", " [ \n ] ", "\n[]\n"])
def test_an_empty_array_is_no_jobs(api, redis_client, body):
    response = bulk(api, body)

    assert response.status_code == 400
    assert response.json() == {"error": "no jobs"}
    assert queue_traces(redis_client) == []


def test_64_jobs_are_accepted(api):
    ids = bulk_ids(api, json.dumps(list(range(64))))

    assert len(set(ids)) == 64
    assert stats()["ready"] == 64


def test_65_jobs_are_too_many(api, redis_client):
    response = bulk(api, json.dumps(list(range(65))))

    assert response.status_code == 400
    assert response.json() == {"error": "too many jobs"}
    assert queue_traces(redis_client) == []


def test_an_element_of_exactly_one_mebibyte_is_accepted(api):
    element = '"' + "x" * (MIB - 2) + '"'

    [job_id] = bulk_ids(api, f"[{element}]")

    assert len(peek_job(job_id).body) == MIB


def test_an_element_over_one_mebibyte_is_413_and_nothing_is_published(api, redis_client):
    big = '"' + "x" * (MIB - 1) + '"'

    response = bulk(api, f'["small", {big}]')

    assert response.status_code == 413
    assert response.json() == {"error": "job too large"}
    assert queue_traces(redis_client) == []


def test_the_element_size_counts_utf8_bytes(api):
    big = '"' + "\u00e9" * (MIB // 2) + '"'  # MIB // 2 characters, MIB + 2 bytes

    response = bulk(api, f"[{big}]")

    assert response.status_code == 413
    assert response.json() == {"error": "job too large"}


def test_the_job_count_is_checked_before_the_element_size(api):
    big = '"' + "x" * MIB + '"'

    response = bulk(api, "[" + ",".join(["1"] * 64 + [big]) + "]")

    assert response.json() == {"error": "too many jobs"}


def test_many_large_elements_together_are_accepted(api):
    element = '"' + "x" * (MIB // 2) + '"'

    ids = bulk_ids(api, "[" + ",".join([element] * 4) + "]")

    assert len(ids) == 4


def test_the_parameters_apply_to_each_job(api, engine):
    ids = bulk_ids(api, "[1, 2, 3]", "delay=30&ttl=100&tries=3&priority=7")

    assert stats()["delayed"] == 3
    for job_id in ids:
        assert ulid.delay_of(job_id) == 30
        assert 99 <= peek_job(job_id).ttl <= 100
    publish(api, b"low priority")  # ready before them, but priority 0
    engine.pump_due(now=ulid.timestamp_ms(ids[-1]) + 30_000)
    batch = api.get(url(query="count=4")).json()
    assert sorted(job["job_id"] for job in batch[:3]) == sorted(ids)
    assert [job["remain_tries"] for job in batch[:3]] == [2, 2, 2]
    assert decoded(batch[3]) == b"low priority"


def test_attributes_apply_to_each_job(api):
    ids = bulk_ids(api, "[1, 2]", HTTP_ENABLE_JOB_VERSION="YES", HTTP_JOB_ATTR_SOURCE="import")

    assert all(len(job_id) == 27 and job_id.startswith("1") for job_id in ids)
    assert [job["attributes"] for job in api.get(url(query="count=2")).json()] == [{"source": "import"}] * 2


def test_too_many_attributes_reject_the_bulk(api, redis_client):
    headers = {f"HTTP_JOB_ATTR_K{i}": "v" for i in range(17)}

    response = bulk(api, "[1]", HTTP_ENABLE_JOB_VERSION="YES", **headers)

    assert response.json() == {"error": "too many attributes, cannot exceed 16"}
    assert queue_traces(redis_client) == []


@pytest.mark.parametrize("query, message", [
    ("delay=-1", "invalid delay"),
    ("ttl=4294967296", "invalid ttl"),
    ("delay=10&ttl=5", "ttl is shorter than delay"),
    ("tries=65536", "invalid tries"),
    ("tries=0", "tries shouldn't be zero"),
    ("priority=256", "invalid priority"),
])
def test_bad_parameters_have_publishs_messages_and_come_before_the_body(api, redis_client, query, message):
    response = bulk(api, b"not json", query)

    assert response.status_code == 400
    assert response.json() == {"error": message}
    assert queue_traces(redis_client) == []


def test_a_repeated_idempotency_key_answers_the_first_ids(api):
    first = bulk_ids(api, "[1, 2]", HTTP_IDEMPOTENCY_KEY="batch-1")

    again = bulk(api, "[3, 4, 5]", HTTP_IDEMPOTENCY_KEY="batch-1")

    assert again.status_code == 200
    assert again.json() == {"msg": "duplicated", "job_ids": first}
    assert stats()["ready"] == 2


def test_the_bulk_route_does_not_care_about_the_content_type(api):
    response = api.put(url(suffix="/bulk"), data=b'["x"]', content_type=OCTET)

    assert response.status_code == 201
    assert consume(api)["data"] == "Ingi"  # base64 of '"x"'


def test_absurdly_deep_nesting_is_a_400_not_a_server_error(api, redis_client):
    response = bulk(api, b"[" * 100_000 + b"]" * 100_000)

    assert response.status_code == 400
    assert response.json() == {"error": NOT_AN_ARRAY}
    assert queue_traces(redis_client) == []

"""PUT /api/:ns/:q/job/:id — re-publish (lmstfy §1.2).

Upstream deletes the old job before validating the parameters, so a bad
request destroys it; ours validates first (SPEC §2) and keeps the old job."""
from __future__ import annotations

import pytest

from queues import ulid
from queues.engine import now_ms
from tests.api_helpers import OCTET, consume, decoded, peek_job, publish, stats, url

MIB = 1024 * 1024


def republish(api, job_id: str, body: bytes = b"again", query: str = "", **headers):
    return api.put(url(suffix=f"/job/{job_id}", query=query), data=body, content_type=OCTET, **headers)


def test_republish_answers_201_with_a_new_id_and_the_old_job_is_gone(api):
    old = publish(api, b"first")
    consume(api)

    response = republish(api, old, b"second")

    assert response.status_code == 201
    new = response.json()["job_id"]
    assert response.json() == {"msg": "published", "job_id": new}
    assert new != old
    assert peek_job(old) is None
    assert decoded(consume(api)) == b"second"


def test_the_new_job_takes_the_new_parameters(api, engine):
    old = publish(api, query="ttl=1000&tries=1")
    consume(api)

    new = republish(api, old, query="delay=5&ttl=50&tries=4&priority=3").json()["job_id"]

    assert ulid.delay_of(new) == 5
    assert 49 <= peek_job(new).ttl <= 50
    engine.pump_due(now=ulid.timestamp_ms(new) + 5_000)
    job = consume(api)
    assert job["job_id"] == new
    assert job["remain_tries"] == 3


def test_the_old_lease_does_not_bring_the_old_job_back(api, engine):
    old = publish(api, query="tries=3")
    consume(api, query="ttr=0")

    new = republish(api, old).json()["job_id"]
    engine.pump_due(now=now_ms() + 1)

    assert (stats()["ready"], stats()["inflight"], stats()["deadletter"]) == (1, 0, 0)
    assert consume(api)["job_id"] == new


def test_republishing_an_unknown_id_still_publishes(api):
    response = republish(api, "01ARZ3NDEKTSV4RRFFQ69G5FAV")

    assert response.status_code == 201
    assert stats()["ready"] == 1


@pytest.mark.parametrize("query, headers, body, status, message", [
    ("delay=-1", {}, b"x", 400, "invalid delay"),
    ("ttl=abc", {}, b"x", 400, "invalid ttl"),
    ("delay=10&ttl=5", {}, b"x", 400, "ttl is shorter than delay"),
    ("tries=0", {}, b"x", 400, "tries shouldn't be zero"),
    ("tries=65536", {}, b"x", 400, "invalid tries"),
    ("priority=256", {}, b"x", 400, "invalid priority"),
    ("", {"HTTP_ENABLE_JOB_VERSION": "YES", **{f"HTTP_JOB_ATTR_K{i}": "v" for i in range(17)}}, b"x", 400,
     "too many attributes, cannot exceed 16"),
    ("", {}, b"x" * (MIB + 1), 413, "body too large"),
])
def test_a_rejected_republish_keeps_the_old_job(api, query, headers, body, status, message):
    old = publish(api, b"precious", query="tries=2")
    consume(api)

    response = republish(api, old, body, query, **headers)

    assert response.status_code == status
    assert response.json() == {"error": message}
    kept = peek_job(old)
    assert kept is not None
    assert kept.body == b"precious"
    assert (stats()["ready"], stats()["inflight"]) == (0, 1)


def test_a_republish_keeps_attributes_when_versioned(api):
    old = publish(api)

    new = republish(api, old, HTTP_ENABLE_JOB_VERSION="YES", HTTP_JOB_ATTR_RETRY="1").json()["job_id"]

    assert new.startswith("1") and len(new) == 27
    assert consume(api)["attributes"] == {"retry": "1"}


def test_a_retried_republish_with_the_same_idempotency_key_completes_once(api):
    old = publish(api)
    first = republish(api, old, HTTP_IDEMPOTENCY_KEY="step-back-1")

    again = republish(api, old, HTTP_IDEMPOTENCY_KEY="step-back-1")

    assert again.status_code == 200
    assert again.json() == {"msg": "duplicated", "job_id": first.json()["job_id"]}
    assert stats()["ready"] == 1
    assert peek_job(old) is None


def test_republish_needs_a_token(api):
    from rest_framework.test import APIClient

    old = publish(api)

    response = APIClient().put(url(suffix=f"/job/{old}"), data=b"x", content_type=OCTET)

    assert response.status_code == 401
    assert peek_job(old) is not None

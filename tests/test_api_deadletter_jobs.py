"""Our dead-letter extensions (SPEC §2.1): GET /deadletter/jobs and PUT/DELETE /deadletter/job/:id."""
from __future__ import annotations

import base64

import pytest

from queues.engine import now_ms
from tests.api_helpers import consume, make_dead, peek_job, publish, stats, url


def listing(api, query: str = ""):
    return api.get(url(suffix="/deadletter/jobs", query=query))


def one(api, method: str, job_id: str, query: str = ""):
    return getattr(api, method)(url(suffix=f"/deadletter/job/{job_id}", query=query))


# -- listing -----------------------------------------------------------------------------------

def test_an_empty_dead_letter_lists_no_jobs(api):
    response = listing(api)

    assert response.status_code == 200
    assert response.json() == {"namespace": "ns", "queue": "q", "total": 0, "offset": 0, "jobs": []}


def test_dead_jobs_are_listed_oldest_first_with_base64_data_and_attributes(api, engine):
    first = make_dead(api, engine, body=b"\x00first", HTTP_ENABLE_JOB_VERSION="YES", HTTP_JOB_ATTR_ORDER="7")
    second = make_dead(api, engine, body=b"second")

    body = listing(api).json()

    assert body["total"] == 2
    assert [job["job_id"] for job in body["jobs"]] == [first, second]
    head = body["jobs"][0]
    assert head["data"] == base64.b64encode(b"\x00first").decode()
    assert head["attributes"] == {"order": "7"}
    assert body["jobs"][1]["attributes"] is None
    assert (head["namespace"], head["queue"], head["ttl"], head["remain_tries"]) == ("ns", "q", 0, 0)


def test_each_listed_job_says_how_often_it_was_delivered(api, engine):
    make_dead(api, engine, query="tries=1")

    assert listing(api).json()["jobs"][0]["deliveries"] == 1


def test_limit_and_offset_page_through_the_dead_letter(api, engine):
    ids = [make_dead(api, engine, body=str(i).encode()) for i in range(5)]

    body = listing(api, "limit=2&offset=1").json()

    assert body["total"] == 5
    assert body["offset"] == 1
    assert [job["job_id"] for job in body["jobs"]] == ids[1:3]


def test_an_offset_past_the_end_lists_nothing(api, engine):
    make_dead(api, engine)

    assert listing(api, "offset=5").json()["jobs"] == []


def test_the_default_page_is_20_jobs(api, engine):
    engine.publish("ns", "q", [b"x"] * 25, tries=1)
    engine.consume("ns", ["q"], ttr_s=0, count=25)
    engine.pump_due(now=now_ms() + 1)
    assert stats()["deadletter"] == 25

    assert len(listing(api).json()["jobs"]) == 20


def test_a_limit_of_100_is_accepted(api):
    assert listing(api, "limit=100").status_code == 200


@pytest.mark.parametrize("query, message", [
    ("limit=0", "invalid limit"),
    ("limit=101", "invalid limit"),
    ("limit=-1", "invalid limit"),
    ("limit=abc", "invalid limit"),
    ("offset=-1", "invalid offset"),
    ("offset=abc", "invalid offset"),
])
def test_bad_listing_parameters_are_400(api, query, message):
    response = listing(api, query)

    assert response.status_code == 400
    assert response.json() == {"error": message}


# -- one job ------------------------------------------------------------------------------------

def test_respawning_one_dead_job_by_id(api, engine):
    first = make_dead(api, engine)
    second = make_dead(api, engine, body=b"second")

    response = one(api, "put", second)

    assert response.status_code == 200
    assert response.json() == {"msg": "respawned", "count": 1}
    assert api.get(url(suffix="/deadletter")).json()["deadletter_head"] == first
    job = consume(api)
    assert job["job_id"] == second
    assert job["remain_tries"] == 0


def test_respawning_one_job_takes_a_ttl(api, engine):
    job_id = make_dead(api, engine)

    one(api, "put", job_id, "ttl=0")

    assert peek_job(job_id).ttl == 0


def test_respawning_one_job_has_the_default_ttl(api, engine):
    job_id = make_dead(api, engine)

    one(api, "put", job_id)

    assert 86399 <= peek_job(job_id).ttl <= 86400


@pytest.mark.parametrize("query", ["ttl=-1", "ttl=abc"])
def test_a_bad_ttl_is_400_and_the_job_stays_dead(api, engine, query):
    job_id = make_dead(api, engine)

    response = one(api, "put", job_id, query)

    assert response.json() == {"error": "invalid ttl"}
    assert peek_job(job_id).state == 3


def test_deleting_one_dead_job_by_id(api, engine):
    first = make_dead(api, engine)
    second = make_dead(api, engine)

    response = one(api, "delete", first)

    assert response.status_code == 204
    assert response.content == b""
    assert peek_job(first) is None
    assert [job["job_id"] for job in listing(api).json()["jobs"]] == [second]


def ready(api, engine) -> str:
    return publish(api)


def in_flight(api, engine) -> str:
    job_id = publish(api)
    consume(api)
    return job_id


def unknown(api, engine) -> str:
    return "01ARZ3NDEKTSV4RRFFQ69G5FAV"


@pytest.mark.parametrize("method", ["put", "delete"])
@pytest.mark.parametrize("make", [unknown, ready, in_flight])
def test_a_job_not_in_the_dead_letter_is_404_and_left_alone(api, engine, method, make):
    job_id = make(api, engine)
    before = stats()

    response = one(api, method, job_id)

    assert response.status_code == 404
    assert response.json() == {"error": "job not found"}
    assert stats() == before


@pytest.mark.parametrize("method", ["put", "delete"])
def test_a_dead_job_of_another_queue_is_404(api, engine, method):
    job_id = make_dead(api, engine, queue="other")

    assert one(api, method, job_id).status_code == 404
    assert stats("other")["deadletter"] == 1


def test_the_dead_letter_listing_needs_a_token():
    from rest_framework.test import APIClient

    assert APIClient().get(url(suffix="/deadletter/jobs")).status_code == 401

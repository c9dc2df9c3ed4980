"""Common behaviour of every /api/ route (lmstfy §1.0): unknown routes and
methods, X-Request-ID, name validation before authentication, token errors."""
from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from queues import ulid
from tests.api_helpers import OCTET, publish, queue_traces, stats, url

API_NOT_FOUND = {"error": "api not found"}


@pytest.fixture
def anonymous() -> APIClient:
    return APIClient()


# -- unknown routes and methods -------------------------------------------------------------------

@pytest.mark.parametrize("path", [
    "/nothing",
    "/api",
    "/api/",
    "/api/ns",
    "/api/ns/q/",
    "/api/ns/q/unknown",
    "/api/ns/q/job",
    "/api/ns/q/job/ID/unknown",
    "/api/ns/q/deadletter/unknown",
    "/api/ns/q/stats/unknown",
    "/api/ns/q/peek/extra",
])
def test_an_unknown_route_is_404_api_not_found(api, path):
    response = api.get(path)

    assert response.status_code == 404
    assert response.json() == API_NOT_FOUND


@pytest.mark.parametrize("method, path", [
    ("post", "/api/ns/q"),
    ("patch", "/api/ns/q"),
    ("post", "/api/ns/q/bulk"),
    ("get", "/api/ns/q/bulk"),
    ("post", "/api/ns/q/job/ID"),
    ("get", "/api/ns/q/job/ID/release"),
    ("post", "/api/ns/q/peek"),
    ("put", "/api/ns/q/peek"),
    ("put", "/api/ns/q/size"),
    ("delete", "/api/ns/q/size"),
    ("post", "/api/ns/q/deadletter"),
    ("put", "/api/ns/q/deadletter/size"),
    ("put", "/api/ns/q/deadletter/jobs"),
    ("get", "/api/ns/q/deadletter/job/ID"),
    ("put", "/api/ns/q/stats"),
    ("delete", "/api/ns/q/stats/due"),
    ("get", "/api/ns/q/pause"),
])
def test_a_wrong_method_on_a_known_path_is_404_api_not_found(api, method, path):
    response = getattr(api, method)(path)

    assert response.status_code == 404
    assert response.json() == API_NOT_FOUND


@pytest.mark.parametrize("path", ["/api/ns/q", "/api/bad.ns/q", f"/api/ns/{'q' * 300}"])
def test_a_wrong_method_is_404_even_without_a_token_or_with_a_bad_name(anonymous, path):
    response = anonymous.post(path)

    assert response.status_code == 404
    assert response.json() == API_NOT_FOUND


def test_head_on_the_consume_route_is_404_and_consumes_nothing(api):
    job_id = publish(api)

    response = api.head(url())

    assert response.status_code == 404
    assert stats()["ready"] == 1
    assert api.get(url()).json()["job_id"] == job_id


@pytest.mark.parametrize("path", ["/api/ns/q", "/api/ns/q/peek", "/api/ns/q/job/ID"])
def test_options_is_404_api_not_found(api, path):
    response = api.options(path)

    assert response.status_code == 404
    assert response.json() == API_NOT_FOUND


# -- X-Request-ID ---------------------------------------------------------------------------------

def responses_of_every_kind(api, anonymous) -> dict:
    job_id = publish(api)
    return {
        "201 published": api.put(url(), data=b"x", content_type=OCTET),
        "200 consumed": api.get(url()),
        "204 acked": api.delete(url(suffix=f"/job/{job_id}")),
        "400 bad parameter": api.put(url(query="tries=0"), data=b"x", content_type=OCTET),
        "400 bad name": anonymous.get("/api/ns/_q/size"),
        "401 no token": anonymous.get(url()),
        "401 bad token": anonymous.get(url(), HTTP_X_TOKEN="wrong"),
        "404 api not found": api.get("/nothing"),
        "404 wrong method": api.post(url()),
        "404 no job": api.get(url("empty")),
        "404 pool not found": anonymous.get(url(suffix="/size"), HTTP_X_TOKEN="nowhere:x"),
        "413 too large": api.put(url(), data=b"x" * (1024 * 1024 + 1), content_type=OCTET),
        "200 public": anonymous.get(url(suffix="/size")),
    }


def test_every_response_has_an_x_request_id_that_is_a_fresh_ulid(api, anonymous):
    responses = responses_of_every_kind(api, anonymous)

    ids = {kind: response.get("X-Request-ID") for kind, response in responses.items()}
    assert all(request_id and len(request_id) == 26 for request_id in ids.values()), ids
    assert all(ulid.timestamp_ms(request_id) is not None for request_id in ids.values())
    assert len(set(ids.values())) == len(ids)


def test_the_kinds_of_response_above_have_their_expected_status(api, anonymous):
    statuses = {kind: response.status_code for kind, response in responses_of_every_kind(api, anonymous).items()}

    assert statuses == {kind: int(kind.split()[0]) for kind in statuses}


# -- names ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path, message", [
    (f"/api/{'n' * 256}/q/peek", "namespace or queue name too long"),
    (f"/api/ns/{'q' * 256}/peek", "namespace or queue name too long"),
    ("/api/n.s/q/peek", "namespace name contains forbidden characters"),
    ("/api/n%20s/q/peek", "namespace name contains forbidden characters"),
    ("/api/ns/q.x/peek", "queue name contains forbidden characters"),
    ("/api/ns/_q/peek", "queue name contains forbidden characters"),
    ("/api/ns/a,b/peek", "queue name contains forbidden characters"),
    ("/api/_ns/q!/peek", "queue name contains forbidden characters"),
])
def test_bad_names_are_400_before_the_token_is_checked(anonymous, path, message):
    response = anonymous.get(path)

    assert response.status_code == 400
    assert response.json() == {"error": message}


@pytest.mark.parametrize("queue", ["q" * 255, "with-dash_and_underscore", "CamelCase09"])
def test_names_of_allowed_characters_up_to_255_are_accepted(api, queue):
    assert api.get(url(queue, suffix="/peek")).json() == {"error": "the queue is empty"}


def test_a_bad_name_in_a_publish_stores_nothing(api, redis_client):
    response = api.put("/api/ns/_q", data=b"x", content_type=OCTET)

    assert response.status_code == 400
    assert queue_traces(redis_client, "_q") == []


# -- tokens -----------------------------------------------------------------------------------------

def test_no_token_is_401_token_not_found(anonymous):
    response = anonymous.get(url())

    assert response.status_code == 401
    assert response.json() == {"error": "token not found"}


def test_a_wrong_token_is_401_invalid_token(anonymous, db):
    response = anonymous.get(url(), HTTP_X_TOKEN="01ARZ3NDEKTSV4RRFFQ69G5FAV")

    assert response.status_code == 401
    assert response.json() == {"error": "invalid token"}


def test_the_token_may_come_from_the_query_string(token, anonymous):
    response = anonymous.get(url(query=f"token={token}"))

    assert response.status_code == 404
    assert response.json() == {"msg": "no job available"}


def test_the_header_wins_over_the_query_string(token, anonymous):
    response = anonymous.get(url(query="token=wrong"), HTTP_X_TOKEN=token)

    assert response.json() == {"msg": "no job available"}


def test_a_default_pool_prefix_is_accepted(token, anonymous):
    assert anonymous.get(url(), HTTP_X_TOKEN=f"default:{token}").status_code == 404


def test_a_token_of_another_namespace_is_401_invalid_token(token, anonymous):
    from queues import tokens

    _, other = tokens.create_token("other", "other namespace")

    response = anonymous.get(url(), HTTP_X_TOKEN=other)

    assert response.status_code == 401
    assert response.json() == {"error": "invalid token"}


def test_an_unknown_pool_is_404_pool_not_found(token, anonymous):
    response = anonymous.get(url(), HTTP_X_TOKEN=f"nowhere:{token}")

    assert response.status_code == 404
    assert response.json() == {"error": "pool not found"}


# -- unexpected failures ----------------------------------------------------------------------------

def test_a_redis_error_is_500_internal_error_in_json(api, monkeypatch):
    import redis

    from queues.engine import Engine

    def fail(*args, **kwargs):
        raise redis.ResponseError("simulated")

    monkeypatch.setattr(Engine, "publish", fail)
    api.raise_request_exception = False

    response = api.put(url(), data=b"x", content_type=OCTET)

    assert response.status_code == 500
    assert response.json() == {"error": "internal error"}
    assert len(response["X-Request-ID"]) == 26


def test_an_unexpected_error_is_500_internal_error_in_json(api, monkeypatch):
    from queues.engine import Engine

    def fail(*args, **kwargs):
        raise RuntimeError("simulated")

    monkeypatch.setattr(Engine, "publish", fail)
    api.raise_request_exception = False

    response = api.put(url(), data=b"x", content_type=OCTET)

    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"error": "internal error"}

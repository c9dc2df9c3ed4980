"""GET /api/:ns/:q/size and /deadletter/size — public size routes (lmstfy §1.8, §1.10)."""
from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.api_helpers import consume, make_dead, publish, url


@pytest.fixture
def anonymous() -> APIClient:
    return APIClient()


def test_size_counts_ready_jobs_only(api, engine, anonymous):
    make_dead(api, engine)
    publish(api, b"ready 1")
    publish(api, b"ready 2")
    publish(api, query="delay=60")
    publish(api, b"in flight", query="priority=9")
    consume(api)

    response = anonymous.get(url(suffix="/size"))

    assert response.status_code == 200
    assert response.json() == {"namespace": "ns", "queue": "q", "size": 2}


def test_size_of_a_queue_that_never_existed_is_zero(anonymous):
    assert anonymous.get(url("nothing", suffix="/size")).json() == {"namespace": "ns", "queue": "nothing", "size": 0}


@pytest.mark.parametrize("headers", [{}, {"HTTP_X_TOKEN": "not-a-token"}, {"HTTP_X_TOKEN": "default:not-a-token"}])
def test_size_needs_no_token_and_ignores_a_wrong_one(api, anonymous, headers):
    publish(api)

    response = anonymous.get(url(suffix="/size"), **headers)

    assert response.status_code == 200
    assert response.json()["size"] == 1


def test_a_token_for_an_unknown_pool_is_404_even_on_the_public_route(anonymous):
    response = anonymous.get(url(suffix="/size"), HTTP_X_TOKEN="nowhere:token")

    assert response.status_code == 404
    assert response.json() == {"error": "pool not found"}


@pytest.mark.parametrize("path, message", [
    ("/api/ns/_q/size", "queue name contains forbidden characters"),
    ("/api/n.s/q/size", "namespace name contains forbidden characters"),
    (f"/api/ns/{'q' * 256}/size", "namespace or queue name too long"),
])
def test_names_are_still_validated_on_the_public_route(anonymous, path, message):
    response = anonymous.get(path)

    assert response.status_code == 400
    assert response.json() == {"error": message}


def test_dead_letter_size_counts_dead_jobs_only_and_is_public(api, engine, anonymous):
    make_dead(api, engine)
    make_dead(api, engine)
    publish(api)

    response = anonymous.get(url(suffix="/deadletter/size"))

    assert response.status_code == 200
    assert response.json() == {"namespace": "ns", "queue": "q", "size": 2}


def test_dead_letter_size_of_an_empty_dead_letter_is_zero(anonymous):
    assert anonymous.get(url(suffix="/deadletter/size")).json()["size"] == 0


def test_sizes_are_per_queue(api, anonymous):
    publish(api, queue="a")

    assert anonymous.get(url("a", suffix="/size")).json()["size"] == 1
    assert anonymous.get(url("b", suffix="/size")).json()["size"] == 0

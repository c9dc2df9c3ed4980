"""Authentication of /api/ routes in lmstfy's order, with its exact messages:
names (400), then the pool (404), then the token (401) (lmstfy-api.md §1.0)."""
from __future__ import annotations

import pytest
import redis
from rest_framework.test import APIClient

from queues import inspect, tokens

pytestmark = pytest.mark.django_db

OCTET = "application/octet-stream"
LONG_NAME = "n" * 256


@pytest.fixture
def anonymous() -> APIClient:
    return APIClient()


def publish(client: APIClient, path: str = "/api/ns/q", **headers: str):
    return client.put(path, data=b"job", content_type=OCTET, **headers)


def assert_error(response, status: int, message: str) -> None:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    assert response.json() == {"error": message}
    assert len(response["X-Request-ID"]) == 26


# --- names come first ------------------------------------------------------------


@pytest.mark.parametrize(("method", "path"), [
    ("put", "/api/bad.ns/q"), ("get", "/api/bad.ns/q"), ("delete", "/api/bad.ns/q"),
    ("get", "/api/bad.ns/q/peek"), ("get", "/api/bad.ns/q/size"), ("put", "/api/bad.ns/q/bulk"),
    ("get", "/api/bad.ns/q/job/01H0000000000000000000000"), ("get", "/api/bad.ns/q/deadletter"),
])
def test_a_bad_namespace_is_refused_before_the_token_is_looked_at(anonymous: APIClient, method: str,
                                                                  path: str) -> None:
    response = getattr(anonymous, method)(path, HTTP_X_TOKEN="nopool:whatever")
    assert_error(response, 400, "namespace name contains forbidden characters")


def test_a_bad_queue_name_is_refused_before_the_token_is_looked_at(anonymous: APIClient) -> None:
    assert_error(publish(anonymous, "/api/ns/bad.q"), 400, "queue name contains forbidden characters")


def test_a_queue_name_starting_with_underscore_cannot_be_published_to(api: APIClient) -> None:
    assert_error(publish(api, "/api/ns/_q"), 400, "queue name contains forbidden characters")
    assert_error(api.get("/api/ns/_q/peek"), 400, "queue name contains forbidden characters")


def test_a_queue_name_starting_with_underscore_can_be_consumed_from(api: APIClient) -> None:
    response = api.get("/api/ns/_q")
    assert response.status_code == 404
    assert response.json() == {"msg": "no job available"}


@pytest.mark.parametrize("path", [f"/api/{LONG_NAME}/q", f"/api/ns/{LONG_NAME}"])
def test_names_longer_than_255_characters_are_refused(anonymous: APIClient, path: str) -> None:
    assert_error(publish(anonymous, path), 400, "namespace or queue name too long")


def test_a_name_of_255_characters_is_accepted(api: APIClient) -> None:
    assert publish(api, "/api/ns/" + "q" * 255).status_code == 201


def test_consume_has_no_length_check_on_queue_names(api: APIClient) -> None:
    response = api.get(f"/api/ns/{LONG_NAME}")
    assert response.status_code == 404
    assert response.json() == {"msg": "no job available"}


def test_consume_refuses_a_bad_queue_list_before_the_token(anonymous: APIClient) -> None:
    assert_error(anonymous.get("/api/ns/q1,q.2"), 400, "queue name contains forbidden characters")


# --- then the pool ---------------------------------------------------------------


def test_an_unknown_pool_is_404_before_the_token_is_checked(anonymous: APIClient) -> None:
    assert_error(publish(anonymous, HTTP_X_TOKEN="nopool:whatever"), 404, "pool not found")
    assert_error(anonymous.get("/api/ns/q?token=nopool:whatever"), 404, "pool not found")


@pytest.mark.parametrize("path", ["/api/ns/q/size", "/api/ns/q/deadletter/size"])
def test_an_unknown_pool_is_404_on_the_public_size_routes_too(anonymous: APIClient, path: str) -> None:
    assert_error(anonymous.get(path, HTTP_X_TOKEN="nopool:whatever"), 404, "pool not found")
    assert_error(anonymous.get(path + "?token=nopool:"), 404, "pool not found")


def test_the_public_size_route_needs_no_token(anonymous: APIClient) -> None:
    response = anonymous.get("/api/ns/q/size")
    assert response.status_code == 200
    assert response.json() == {"namespace": "ns", "queue": "q", "size": 0}


# --- then the token --------------------------------------------------------------


def test_no_token_is_401_token_not_found(anonymous: APIClient) -> None:
    assert_error(publish(anonymous), 401, "token not found")
    assert_error(anonymous.get("/api/ns/q"), 401, "token not found")
    assert_error(anonymous.get("/api/ns/q?token="), 401, "token not found")


def test_a_pool_prefix_with_an_empty_token_is_401_token_not_found(anonymous: APIClient) -> None:
    assert_error(publish(anonymous, HTTP_X_TOKEN="default:"), 401, "token not found")


def test_a_wrong_token_is_401_invalid_token(anonymous: APIClient, token: str) -> None:
    assert_error(publish(anonymous, HTTP_X_TOKEN=token + "x"), 401, "invalid token")
    assert_error(anonymous.get("/api/ns/q?token=not-a-token"), 401, "invalid token")


def test_a_token_of_another_namespace_is_401_invalid_token(anonymous: APIClient) -> None:
    _, other = tokens.create_token("other", "another namespace's token")
    assert_error(publish(anonymous, HTTP_X_TOKEN=other), 401, "invalid token")
    assert publish(anonymous, "/api/other/q", HTTP_X_TOKEN=other).status_code == 201


def test_a_revoked_token_is_401_invalid_token(anonymous: APIClient, token: str) -> None:
    tokens.revoke_token("ns", "default", token)
    assert_error(publish(anonymous, HTTP_X_TOKEN=token), 401, "invalid token")


def test_the_token_may_come_in_the_query(anonymous: APIClient, token: str) -> None:
    assert publish(anonymous, f"/api/ns/q?token={token}").status_code == 201


def test_the_default_pool_may_be_named(anonymous: APIClient, token: str) -> None:
    assert publish(anonymous, HTTP_X_TOKEN=f"default:{token}").status_code == 201


def test_the_x_token_header_wins_over_the_query(anonymous: APIClient, token: str) -> None:
    assert publish(anonymous, "/api/ns/q?token=not-a-token", HTTP_X_TOKEN=token).status_code == 201
    assert_error(publish(anonymous, f"/api/ns/q?token={token}", HTTP_X_TOKEN="not-a-token"),
                 401, "invalid token")
    assert_error(publish(anonymous, f"/api/ns/q?token={token}", HTTP_X_TOKEN="nopool:x"), 404, "pool not found")


# --- pools -----------------------------------------------------------------------


def test_a_pool_prefixed_token_routes_to_its_pool(anonymous: APIClient, second_pool: redis.Redis,
                                                  redis_client: redis.Redis) -> None:
    _, plain = tokens.create_token("ns", "second pool token", pool="second")

    response = publish(anonymous, HTTP_X_TOKEN=f"second:{plain}")

    assert response.status_code == 201, response.content
    assert inspect.ready_size("second", "ns", "q") == 1
    assert inspect.ready_size("default", "ns", "q") == 0
    assert second_pool.dbsize() > 0
    assert redis_client.dbsize() == 0
    size = anonymous.get("/api/ns/q/size?token=second:")
    assert size.status_code == 200 and size.json()["size"] == 1
    consumed = anonymous.get("/api/ns/q", HTTP_X_TOKEN=f"second:{plain}")
    assert consumed.status_code == 200 and consumed.json()["msg"] == "new job"


def test_a_token_is_valid_only_in_its_own_pool(anonymous: APIClient, second_pool: redis.Redis, token: str) -> None:
    _, second_plain = tokens.create_token("ns", "second pool token", pool="second")
    assert_error(publish(anonymous, HTTP_X_TOKEN=f"second:{token}"), 401, "invalid token")
    assert_error(publish(anonymous, HTTP_X_TOKEN=second_plain), 401, "invalid token")


# --- wrong methods ---------------------------------------------------------------


@pytest.mark.parametrize(("method", "path"), [
    ("post", "/api/ns/q"), ("patch", "/api/ns/q/peek"), ("post", "/api/bad.ns/q"), ("post", "/api/ns/q/size"),
])
def test_a_wrong_method_is_api_not_found_before_names_pool_and_token(anonymous: APIClient, method: str,
                                                                    path: str) -> None:
    assert_error(getattr(anonymous, method)(path, HTTP_X_TOKEN="nopool:x"), 404, "api not found")


# --- every answer ----------------------------------------------------------------


@pytest.mark.parametrize(("method", "path"), [
    ("put", "/api/ns/q"), ("get", "/api/ns/q"), ("get", "/api/ns/q/peek"), ("get", "/api/ns/q/size"),
    ("delete", "/api/ns/q"), ("get", "/api/bad.ns/q"), ("get", "/api/ns/q/job/nope"),
    ("get", "/api/ns/q/nothing/here"), ("get", "/api/ns"),
])
def test_every_answer_has_a_fresh_request_id(api: APIClient, method: str, path: str) -> None:
    first = getattr(api, method)(path)
    second = getattr(api, method)(path)
    assert len(first["X-Request-ID"]) == 26
    assert first["X-Request-ID"] != second["X-Request-ID"]


@pytest.mark.parametrize(("method", "path", "token_header"), [
    ("put", "/api/bad.ns/q", None), ("put", "/api/ns/q", "nopool:x"), ("put", "/api/ns/q", None),
    ("put", "/api/ns/q", "wrong"), ("put", "/api/ns/q?delay=abc", "valid"), ("get", "/api/ns/q/nope/x", None),
])
def test_every_error_body_is_json(anonymous: APIClient, token: str, method: str, path: str,
                                  token_header: str | None) -> None:
    headers = {} if token_header is None else {"HTTP_X_TOKEN": token if token_header == "valid" else token_header}
    response = getattr(anonymous, method)(path, **headers)
    assert response.status_code >= 400
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"]

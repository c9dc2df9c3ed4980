"""lmstfy's admin routes (/token/..., /pools, /info), served by the same
application, behind staff authentication (HTTP Basic or a staff session)."""
from __future__ import annotations

import base64
import json
from urllib.parse import quote

import pytest
import redis
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from queues import tokens
from queues.models import Token

pytestmark = pytest.mark.django_db

USER_TOKEN = "a-user-chosen-token-0123456789"
ADMIN_ROUTES = [
    ("get", "/token/ns"), ("post", "/token/ns?description=d"), ("delete", "/token/ns/some-token"),
    ("get", "/token/ns/some-token/limit"), ("put", "/token/ns/some-token/limit"), ("get", "/limits"),
    ("get", "/pools"), ("get", "/pools/"), ("get", "/info"), ("get", "/metrics"),
]


def basic(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


def create_token(client: APIClient, query: str, namespace: str = "ns"):
    return client.post(f"/token/{namespace}?{query}")


def assert_error(response, status: int, message: str) -> None:
    assert response.status_code == status, response.content
    assert response.json() == {"error": message}


def can_publish(token: str, namespace: str = "ns") -> bool:
    response = APIClient().put(f"/api/{namespace}/q", data=b"job", content_type="application/octet-stream",
                               HTTP_X_TOKEN=token)
    assert response.status_code in (201, 401), response.content
    return response.status_code == 201


# --- who may call them ---------------------------------------------------------


@pytest.mark.parametrize(("method", "path"), ADMIN_ROUTES)
def test_admin_routes_without_credentials_are_401_with_a_challenge(method: str, path: str) -> None:
    response = getattr(APIClient(), method)(path)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Basic")
    assert response.json()["error"]


@pytest.mark.parametrize(("method", "path"), ADMIN_ROUTES)
def test_admin_routes_with_a_wrong_password_are_401(staff_user: User, method: str, path: str) -> None:
    response = getattr(APIClient(), method)(path, HTTP_AUTHORIZATION=basic("staff", "wrong"))
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Basic")


@pytest.mark.parametrize(("method", "path"), ADMIN_ROUTES)
def test_admin_routes_refuse_a_user_who_is_not_staff(db: None, method: str, path: str) -> None:
    get_user_model().objects.create_user("plain", password="plain-password")
    response = getattr(APIClient(), method)(path, HTTP_AUTHORIZATION=basic("plain", "plain-password"))
    assert response.status_code == 403
    assert response.json()["error"]


def test_a_staff_user_may_use_http_basic(admin_api: APIClient) -> None:
    created = create_token(admin_api, "description=by+basic")
    assert created.status_code == 201
    assert admin_api.get("/token/ns").json() == {
        "tokens": {tokens.listed_value(Token.objects.get()): "by basic"}}


def test_http_basic_needs_no_csrf_token(staff_user: User) -> None:
    client = APIClient(enforce_csrf_checks=True)
    client.credentials(HTTP_AUTHORIZATION=basic("staff", "staff-password"))
    assert create_token(client, "description=d").status_code == 201


def test_a_staff_session_may_read_and_must_send_the_csrf_token_to_write(staff_user: User) -> None:
    client = APIClient(enforce_csrf_checks=True)
    client.get("/admin/login/")  # the login page sets the CSRF cookie
    csrf_token = client.cookies["csrftoken"].value
    client.force_login(staff_user)

    assert client.get("/token/ns").json() == {"tokens": {}}
    refused = create_token(client, "description=d")
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["error"]
    assert Token.objects.count() == 0

    accepted = client.post("/token/ns?description=d", HTTP_X_CSRFTOKEN=csrf_token)
    assert accepted.status_code == 201
    assert Token.objects.get().created_by == staff_user


def test_a_session_of_a_user_who_is_not_staff_is_refused(db: None) -> None:
    client = APIClient()
    client.force_login(get_user_model().objects.create_user("plain", password="plain-password"))
    assert client.get("/pools").status_code == 403


def test_version_needs_no_credentials() -> None:
    response = APIClient().get("/version")
    assert response.status_code == 200
    assert set(response.json()) == {"version", "build_commit", "build_date"}


# --- POST /token/:ns -----------------------------------------------------------


def test_creating_a_token_answers_201_with_the_token(admin_api: APIClient) -> None:
    response = create_token(admin_api, "description=worker")
    assert response.status_code == 201
    plain = response.json()["token"]
    assert len(plain) == 26
    assert can_publish(plain)
    assert Token.objects.get().description == "worker"


def test_the_description_may_come_as_a_form_field(admin_api: APIClient) -> None:
    response = admin_api.post("/token/ns", data={"description": "from a form", "token": USER_TOKEN},
                              format="multipart")
    assert response.status_code == 201
    assert response.json() == {"token": USER_TOKEN}
    assert Token.objects.get().description == "from a form"


def test_a_user_token_is_granted_as_given(admin_api: APIClient) -> None:
    response = create_token(admin_api, f"description=d&token={USER_TOKEN}")
    assert response.status_code == 201
    assert response.json() == {"token": USER_TOKEN}
    assert can_publish(USER_TOKEN)


@pytest.mark.parametrize("query", ["", "description=", "token=" + USER_TOKEN, "description=" + "d" * 256])
def test_a_missing_or_oversized_description_is_400(admin_api: APIClient, query: str) -> None:
    assert_error(create_token(admin_api, query), 400, "invalid description")
    assert Token.objects.count() == 0


def test_a_description_of_255_characters_is_accepted(admin_api: APIClient) -> None:
    assert create_token(admin_api, "description=" + "d" * 255).status_code == 201


def test_a_short_user_token_is_400(admin_api: APIClient) -> None:
    assert_error(create_token(admin_api, "description=d&token=" + "x" * 19), 400, "the user token was too short")


def test_a_namespace_longer_than_255_characters_is_400(admin_api: APIClient) -> None:
    assert_error(create_token(admin_api, "description=d", namespace="n" * 256), 400,
                 "the namespace name was too long")


def test_a_namespace_with_forbidden_characters_is_400(admin_api: APIClient) -> None:
    assert_error(create_token(admin_api, "description=d", namespace="bad.ns"), 400,
                 "namespace name contains forbidden characters")


@pytest.mark.parametrize("query", ["description=d&pool=nope", f"description=d&token=nope:{USER_TOKEN}"])
def test_an_unknown_pool_is_400(admin_api: APIClient, query: str) -> None:
    assert_error(create_token(admin_api, query), 400, "the pool was not exists")


def test_a_duplicate_user_token_is_400(admin_api: APIClient) -> None:
    assert create_token(admin_api, f"description=d&token={USER_TOKEN}").status_code == 201
    assert_error(create_token(admin_api, f"description=again&token={USER_TOKEN}"), 400,
                 "the token has already existed")
    assert Token.objects.count() == 1


def test_the_same_user_token_may_serve_two_namespaces(admin_api: APIClient) -> None:
    assert create_token(admin_api, f"description=d&token={USER_TOKEN}").status_code == 201
    assert create_token(admin_api, f"description=d&token={USER_TOKEN}", namespace="other").status_code == 201
    assert can_publish(USER_TOKEN, "ns") and can_publish(USER_TOKEN, "other")


def test_a_token_of_another_pool_is_answered_with_its_pool_prefix(admin_api: APIClient,
                                                              second_pool: redis.Redis) -> None:
    generated = create_token(admin_api, "description=d&pool=second")
    assert generated.status_code == 201
    pool, _, plain = generated.json()["token"].partition(":")
    assert pool == "second" and len(plain) == 26
    assert can_publish(f"second:{plain}")
    assert not can_publish(plain)

    user = create_token(admin_api, f"description=d&token=second:{USER_TOKEN}")
    assert user.json() == {"token": f"second:{USER_TOKEN}"}
    default = create_token(admin_api, "description=d&pool=default")
    assert ":" not in default.json()["token"]


# --- GET /token/:ns ------------------------------------------------------------


def test_listing_a_namespace_without_tokens_is_empty(admin_api: APIClient) -> None:
    response = admin_api.get("/token/ns")
    assert response.status_code == 200
    assert response.json() == {"tokens": {}}


def test_listing_shows_the_tokens_of_one_namespace_and_pool(admin_api: APIClient, second_pool: redis.Redis) -> None:
    tokens.create_token("ns", "mine", user_token=USER_TOKEN)
    tokens.create_token("other", "not mine")
    tokens.create_token("ns", "other pool", pool="second")

    mine = Token.objects.get(description="mine")
    assert admin_api.get("/token/ns").json() == {"tokens": {f"{USER_TOKEN[:6]}…{mine.id}": "mine"}}
    listed_second = admin_api.get("/token/ns?pool=second").json()["tokens"]
    assert list(listed_second.values()) == ["other pool"]
    assert next(iter(listed_second)).startswith("second:")
    # As upstream: a pool query, even "default", prefixes the keys.
    assert admin_api.get("/token/ns?pool=default").json() == {"tokens": {f"default:{USER_TOKEN[:6]}…{mine.id}": "mine"}}


def test_listing_an_unknown_pool_is_400(admin_api: APIClient) -> None:
    assert_error(admin_api.get("/token/ns?pool=nope"), 400, "the pool was not exists")


# --- DELETE /token/:ns/:token --------------------------------------------------


def test_deleting_a_token_answers_204_and_the_token_stops_working(admin_api: APIClient) -> None:
    plain = create_token(admin_api, "description=d").json()["token"]
    assert can_publish(plain)

    response = admin_api.delete(f"/token/ns/{plain}")

    assert response.status_code == 204
    assert not can_publish(plain)
    assert admin_api.get("/token/ns").json() == {"tokens": {}}


def test_a_token_may_be_deleted_by_its_listed_prefix(admin_api: APIClient) -> None:
    plain = create_token(admin_api, "description=d").json()["token"]
    listed = next(iter(admin_api.get("/token/ns").json()["tokens"]))
    assert "…" in listed and plain not in listed

    assert admin_api.delete("/token/ns/" + quote(listed)).status_code == 204
    assert not can_publish(plain)


def test_tokens_sharing_a_prefix_are_both_listed_and_deleted_one_at_a_time(admin_api: APIClient) -> None:
    first, second = "shared-prefix-token-number-1", "shared-prefix-token-number-2"
    for value in (first, second):
        assert create_token(admin_api, f"description={value[-1]}&token={value}").status_code == 201
    listed = admin_api.get("/token/ns").json()["tokens"]
    assert sorted(listed.values()) == ["1", "2"]

    by_description = {description: key for key, description in listed.items()}
    assert admin_api.delete("/token/ns/" + quote(by_description["1"])).status_code == 204
    assert not can_publish(first) and can_publish(second)


def test_a_token_of_another_pool_is_deleted_with_its_prefix(admin_api: APIClient, second_pool: redis.Redis) -> None:
    prefixed = create_token(admin_api, "description=d&pool=second").json()["token"]
    assert admin_api.delete(f"/token/ns/{prefixed}").status_code == 204
    assert not can_publish(prefixed)


def test_deleting_in_an_unknown_pool_is_400(admin_api: APIClient) -> None:
    assert_error(admin_api.delete(f"/token/ns/nope:{USER_TOKEN}"), 400, "the pool was not exists")


def test_deleting_another_namespace_s_token_leaves_it_working(admin_api: APIClient) -> None:
    plain = create_token(admin_api, "description=d").json()["token"]
    assert admin_api.delete(f"/token/other/{plain}").status_code == 204
    assert can_publish(plain)


# --- /pools, /info ---------------------------------------------------------------


def test_pools_lists_the_configured_pools(admin_api: APIClient) -> None:
    response = admin_api.get("/pools")
    assert response.status_code == 200
    assert response.json() == ["default"]
    assert admin_api.get("/pools/").json() == ["default"]


def test_pools_lists_every_configured_pool(admin_api: APIClient, second_pool: redis.Redis) -> None:
    assert admin_api.get("/pools").json() == ["default", "second"]


def test_info_maps_namespaces_to_their_queues_after_a_publish(admin_api: APIClient, api: APIClient) -> None:
    assert admin_api.get("/info").json() == {}
    for queue in ("q1", "q2"):
        assert api.put(f"/api/ns/{queue}", data=b"x", content_type="text/plain").status_code == 201

    response = admin_api.get("/info")

    assert response.status_code == 200
    assert {ns: sorted(queues) for ns, queues in response.json().items()} == {"ns": ["q1", "q2"]}
    assert response.content.decode() == json.dumps(response.json(), indent=4)


def test_info_of_another_pool_shows_only_its_queues(admin_api: APIClient, second_pool: redis.Redis) -> None:
    _, plain = tokens.create_token("ns", "d", pool="second")
    assert can_publish(f"second:{plain}")
    assert admin_api.get("/info?pool=second").json() == {"ns": ["q"]}
    assert admin_api.get("/info").json() == {}


def test_info_of_an_unknown_pool_is_200_with_an_empty_body(admin_api: APIClient) -> None:
    response = admin_api.get("/info?pool=nope")
    assert response.status_code == 200
    assert response.content == b""


# --- wrong methods -------------------------------------------------------------


@pytest.mark.parametrize(("method", "path"), [
    ("put", "/token/ns"), ("patch", "/token/ns"), ("get", "/token/ns/some-token"), ("post", "/pools"),
    ("delete", "/info"), ("post", "/version"),
])
@pytest.mark.parametrize("authenticated", [True, False])
def test_a_wrong_method_on_a_known_admin_path_is_api_not_found(admin_api: APIClient, method: str, path: str,
                                                                authenticated: bool) -> None:
    client = admin_api if authenticated else APIClient()
    assert_error(getattr(client, method)(path), 404, "api not found")

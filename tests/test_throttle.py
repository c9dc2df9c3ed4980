"""lmstfy's per-token throttle: the limit admin routes and the 429 answers."""
from __future__ import annotations

import json

import pytest

from queues import throttling
from queues.models import Token


def set_limit(admin_api, token: str, method: str = "post", **limiter):
    body = {"read": 0, "write": 0, "interval": 10, **limiter}
    return getattr(admin_api, method)(f"/token/ns/{token}/limit", data=json.dumps(body),
                                      content_type="application/json")


@pytest.fixture(autouse=True)
def fresh_limits(db):
    throttling.limits.reload()


def test_it_creates_reads_updates_and_deletes_a_limit(admin_api, token):
    response = set_limit(admin_api, token, write=3)
    assert response.status_code == 201
    assert response.json() == {"limiter": {"read": 0, "write": 3, "interval": 10}}
    assert admin_api.get(f"/token/ns/{token}/limit").json() == {"read": 0, "write": 3, "interval": 10}

    again = set_limit(admin_api, token, write=3)
    assert again.status_code == 500
    assert again.json() == {"error": f"throttler token({token}) has already exists"}

    updated = set_limit(admin_api, token, method="put", read=5, interval=2)
    assert updated.status_code == 200
    assert updated.json() == {"limiter": {"read": 5, "write": 0, "interval": 2}}

    listed = admin_api.get("/limits").json()
    token_id = Token.objects.get().id
    assert listed == [{"namespace": "ns", "token": f"{token[:12]}…{token_id}",
                       "limiter": {"read": 5, "write": 0, "interval": 2}}]

    assert admin_api.delete(f"/token/ns/{token}/limit").json() == {"msg": "success"}
    missing = admin_api.get(f"/token/ns/{token}/limit")
    assert missing.status_code == 404 and missing.content == b"null"


@pytest.mark.parametrize("limiter, status, body", [
    ({"read": 0, "write": 0}, 400, {"limiter": {"read": 0, "write": 0, "interval": 10}}),
    ({"write": 1, "interval": 0}, 400, {"error": "interval should be > 0"}),
    ({"write": 1, "interval": -1}, 500, {"error": "limiter interval should be > 0"}),
])
def test_it_rejects_a_limiter_as_lmstfy_does(admin_api, token, limiter, status, body):
    response = set_limit(admin_api, token, **limiter)
    assert response.status_code == status
    assert response.json() == body


def test_it_rejects_a_body_that_is_not_a_limiter(admin_api, token):
    response = admin_api.post(f"/token/ns/{token}/limit", data="{nope", content_type="application/json")
    assert response.status_code == 400
    assert "error" in response.json()


def test_a_limit_can_be_set_by_the_listed_token_value(admin_api, token):
    listed = next(iter(admin_api.get("/token/ns").json()["tokens"]))
    assert set_limit(admin_api, listed, write=2).status_code == 201
    assert admin_api.get(f"/token/ns/{token}/limit").json() == {"read": 0, "write": 2, "interval": 10}


def test_the_limit_routes_need_staff(client, token):
    assert client.get(f"/token/ns/{token}/limit").status_code == 401
    assert client.get("/limits").status_code == 401


def test_publishes_past_the_write_limit_get_429_with_lmstfys_body(admin_api, api, token):
    set_limit(admin_api, token, write=3)
    throttling.limits.reload()
    for _ in range(3):
        assert api.put("/api/ns/q", data=b"x", content_type="text/plain").status_code == 201
    limited = api.put("/api/ns/q", data=b"x", content_type="text/plain")
    assert limited.status_code == 429
    assert limited.json() == {"msg": f"token({token}) produce reach the limit rate, please retry later"}
    # consumes are counted separately and this token has no read limit
    assert api.get("/api/ns/q").status_code == 200


def test_failed_publishes_and_empty_consumes_do_not_use_the_quota(admin_api, api, token):
    set_limit(admin_api, token, read=2, write=2)
    throttling.limits.reload()
    for _ in range(5):
        assert api.put("/api/ns/q?tries=0", data=b"x", content_type="text/plain").status_code == 400
        assert api.get("/api/ns/empty").status_code == 404
    assert api.put("/api/ns/q", data=b"x", content_type="text/plain").status_code == 201
    assert api.put("/api/ns/q", data=b"x", content_type="text/plain").status_code == 201
    assert api.get("/api/ns/q").status_code == 200
    assert api.get("/api/ns/q").status_code == 200
    assert api.get("/api/ns/q").status_code == 429


def test_unthrottled_routes_are_never_limited(admin_api, api, token):
    set_limit(admin_api, token, read=1, write=1)
    throttling.limits.reload()
    job_id = api.put("/api/ns/q", data=b"x", content_type="text/plain").json()["job_id"]
    for _ in range(3):
        assert api.get(f"/api/ns/q/job/{job_id}").status_code == 200
        assert api.get("/api/ns/q/peek").status_code == 200

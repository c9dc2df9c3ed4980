from __future__ import annotations


def test_version_needs_no_credentials_and_has_a_request_id(client):
    response = client.get("/version")
    assert response.status_code == 200
    assert set(response.json()) == {"version", "build_commit", "build_date"}
    assert len(response["X-Request-ID"]) == 26


def test_unknown_route_answers_api_not_found(client):
    response = client.get("/nothing/here")
    assert response.status_code == 404
    assert response.json() == {"error": "api not found"}
    assert response["X-Request-ID"]

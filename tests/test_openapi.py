from __future__ import annotations

import re

from queues.api.urls import api_urlpatterns


def django_route_to_openapi(route: str) -> str:
    return "/" + re.sub(r"<str:(\w+)>", r"{\1}", route)


def test_the_api_schema_is_served_without_a_token(client):
    response = client.get("/api/schema/")
    assert response.status_code == 200
    assert response.json()["openapi"].startswith("3.")


def test_the_schema_describes_every_api_route_and_method_and_nothing_else(client):
    paths = client.get("/api/schema/").json()["paths"]
    routes = {django_route_to_openapi(p.pattern._route): p.callback.view_class for p in api_urlpatterns
              if "schema" not in p.pattern._route}
    assert set(paths) == set(routes)
    for route, view in routes.items():
        served = {m for m in ("get", "put", "delete", "post") if hasattr(view, m)}
        assert set(paths[route]) == served, route


def test_every_tokened_operation_declares_the_token_and_its_401(client):
    paths = client.get("/api/schema/").json()["paths"]
    for route, operations in paths.items():
        for method, operation in operations.items():
            public = route.endswith("/size")
            assert ("security" in operation) is not public, (route, method)
            assert ("401" in operation["responses"]) is not public, (route, method)

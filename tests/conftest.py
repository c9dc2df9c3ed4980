"""Test fixtures: real Redis and a real database.

Redis: REDIS_URL when set (CI: a dedicated DB of the machine's Redis), else an
embedded redis-server under var/test/ (never the quickstart's data). Every test
starts from an empty Redis DB. Database: DATABASE_URL when set (PostgreSQL in
CI), else SQLite.
"""
from __future__ import annotations

import base64
import os
from pathlib import Path

os.environ.setdefault("LMSTFY_VAR_DIR", str(Path(__file__).resolve().parent.parent / "var" / "test"))
os.environ.setdefault("LMSTFY_TOKEN_LISTING", "prefix")

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def redis_client():
    """The default pool's client, flushed before each test."""
    from queues import pools, tokens

    client = pools.client()
    client.flushdb()
    tokens.cache.clear()
    yield client


@pytest.fixture
def engine(redis_client):
    from queues.engine import Engine

    return Engine()


@pytest.fixture
def namespace(db):
    from queues.models import Namespace

    return Namespace.objects.create(name="ns")


@pytest.fixture
def token(db) -> str:
    """A plain token for namespace "ns" in the default pool."""
    from queues import tokens

    _, plain = tokens.create_token("ns", "test token")
    return plain


@pytest.fixture
def api(token):
    """A DRF test client that sends the token in X-Token."""
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_X_TOKEN=token)
    return client


@pytest.fixture
def staff_user(db):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user("staff", password="staff-password", is_staff=True)


@pytest.fixture
def admin_api(staff_user):
    """A client that authenticates with HTTP Basic as a staff user."""
    from rest_framework.test import APIClient

    client = APIClient()
    credentials = base64.b64encode(b"staff:staff-password").decode()
    client.credentials(HTTP_AUTHORIZATION=f"Basic {credentials}")
    return client

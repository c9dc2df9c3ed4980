"""Test fixtures: real Redis and a real database.

Redis: REDIS_URL when set (CI: a dedicated DB of the machine's Redis), else an
embedded redis-server under var/test/ (never the quickstart's data; see
tests/settings.py). Every test starts from an empty Redis DB and empty
per-process caches. Database: DATABASE_URL when set (PostgreSQL in CI), else
an SQLite file under var/test/.
"""
from __future__ import annotations

import base64

import pytest


@pytest.fixture(autouse=True)
def fast_password_hasher(settings):
    """PBKDF2 costs ~1 s per HTTP Basic request on this machine; tests need no strength."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def redis_client():
    """The default pool's client, flushed before each test."""
    from queues import pools, throttling, tokens

    client = pools.client()
    client.flushdb()
    tokens.cache.clear()
    throttling.limits.clear()
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


@pytest.fixture
def scratch_redis(tmp_path):
    """A private redis-server (AOF on) on a free port, for tests that stop it or
    read server-wide counters (commandstats); killed after the test."""
    from tests.testutil import ScratchRedis

    server = ScratchRedis(tmp_path)
    server.start()
    yield server
    server.kill()


@pytest.fixture
def second_pool(settings, redis_client):
    """A second pool named "second": DB 10 of the default pool's Redis server
    (or of the embedded one), flushed before and after the test. Yields its client."""
    from urllib.parse import urlsplit, urlunsplit

    from queues import embedded, pools

    default_url = pools.configured_urls()[pools.DEFAULT_POOL]
    if default_url == "embedded":
        default_url = embedded.url()
    parts = urlsplit(default_url)
    if parts.scheme in ("redis", "rediss"):
        second_url = urlunsplit(parts._replace(path="/11" if parts.path.strip("/") == "10" else "/10"))
    else:  # unix:///path/redis.sock?db=N (urlunsplit would drop the empty netloc)
        second_url = default_url.partition("?")[0] + "?db=10"
    settings.LMSTFY_POOLS = {pools.DEFAULT_POOL: default_url, "second": second_url}
    pools.reset_clients()
    client = pools.client("second")
    client.flushdb()
    yield client
    client.flushdb()
    pools.reset_clients()


@pytest.fixture
def receiver():
    """A real local HTTP receiver (tests/receiver.py) on 127.0.0.1, stopped after the test."""
    from tests.receiver import Receiver

    server = Receiver().start()
    yield server
    server.stop()


@pytest.fixture
def private_callbacks(settings):
    """The receiver listens on loopback: allow private callback addresses."""
    settings.LMSTFY_ALLOW_PRIVATE_CALLBACKS = True
    return settings


@pytest.fixture
def staff_client(client, staff_user):
    """Django's test client logged in as a staff user (admin pages)."""
    client.force_login(staff_user)
    return client


@pytest.fixture
def superuser_client(client, django_user_model):
    """Logged in as a superuser: the Django admin's change forms need model permissions."""
    client.force_login(django_user_model.objects.create_superuser("root", password="root-password"))
    return client

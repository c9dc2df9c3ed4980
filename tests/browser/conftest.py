"""Fixtures of the browser tests: the REAL service (`manage.py runall`:
gunicorn + pumper + notifier) as a subprocess, and headless Debian Chromium
driven by Playwright.

The service cannot share pytest-django's test database (a subprocess does not
see it), so it gets its own: for PostgreSQL a database named after
DATABASE_URL's with a `_live` suffix, recreated empty for the run; without
DATABASE_URL, SQLite in the service's own var dir. Its Redis is a DB next to
REDIS_URL's (one below it, or 1 for DB 0), flushed before and after; without
REDIS_URL, the service starts its own embedded Redis. Override both with
LMSTFY_BROWSER_DATABASE_URL / LMSTFY_BROWSER_REDIS_URL.
"""
from __future__ import annotations

import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import requests

REPO_DIR = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
ARTIFACTS_DIR = REPO_DIR / "test-artifacts"
PORT_RANGE = (19000, 19999)
START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 30


@dataclass(frozen=True)
class LiveService:
    url: str
    admin_user: str
    admin_password: str
    log_path: Path

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def free_port() -> int:
    """A free port in the 19xxx range (this project's scratch ports)."""
    for _ in range(200):
        port = random.randint(*PORT_RANGE)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 19000-19999")


def live_database_url() -> str | None:
    explicit = os.environ.get("LMSTFY_BROWSER_DATABASE_URL")
    if explicit:
        return explicit
    base = os.environ.get("DATABASE_URL")
    if not base:
        return None
    parts = urlsplit(base)
    return urlunsplit(parts._replace(path="/" + parts.path.strip("/") + "_live"))


def recreate_postgres_database(url: str) -> None:
    """Drop and create the service's database: bootstrap then makes our admin
    user (it does nothing once any superuser exists)."""
    import psycopg

    parts = urlsplit(url)
    name = parts.path.strip("/")
    if not name.endswith("_live"):
        raise RuntimeError(f"refusing to recreate database {name!r}: browser tests own '*_live' databases only")
    maintenance = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(maintenance, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def live_redis_url() -> str | None:
    explicit = os.environ.get("LMSTFY_BROWSER_REDIS_URL")
    if explicit:
        return explicit
    base = os.environ.get("REDIS_URL")
    if not base:
        return None
    parts = urlsplit(base)
    db = int(parts.path.strip("/") or 0)
    return urlunsplit(parts._replace(path=f"/{db - 1 if db > 0 else 1}"))


def flush_redis(url: str | None) -> None:
    if url:
        import redis

        with redis.Redis.from_url(url, socket_timeout=5) as client:
            client.flushdb()


def service_env(var_dir: Path, port: int, password: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LMSTFY_POOLS", "DATABASE_URL", "REDIS_URL")}
    env.update({"LMSTFY_VAR_DIR": str(var_dir), "LMSTFY_BIND": f"127.0.0.1:{port}", "LMSTFY_WORKERS": "1",
                "LMSTFY_THREADS": "16", "LMSTFY_NOTIFIER_THREADS": "4", "LMSTFY_ADMIN_USER": "browser-admin",
                "LMSTFY_ADMIN_PASSWORD": password, "LMSTFY_ALLOW_PRIVATE_CALLBACKS": "1",
                "SECRET_KEY": secrets.token_urlsafe(48), "DEBUG": "0", "PYTHONUNBUFFERED": "1"})
    database, redis_url = live_database_url(), live_redis_url()
    if database:
        env["DATABASE_URL"] = database
    if redis_url:
        env["REDIS_URL"] = redis_url
    return env


def wait_until_up(process: subprocess.Popen, url: str, log_path: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the service exited with {process.returncode}:\n{log_path.read_text()[-4000:]}")
        try:
            if requests.get(url + "/version", timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"the service did not answer within {START_TIMEOUT_S} s:\n{log_path.read_text()[-4000:]}")


def stop(process: subprocess.Popen) -> None:
    """SIGTERM to the service's process group (runall, gunicorn, pumper,
    notifier), then SIGKILL whatever is left after the grace period."""
    if process.poll() is None:
        with _suppress_missing():
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pass
    with _suppress_missing():
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(10)


class _suppress_missing:
    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback) -> bool:
        return kind is ProcessLookupError


SHARED_SCHEDULES = ("loadfile", "loadscope", "loadgroup")


@pytest.fixture(scope="session")
def live_service(tmp_path_factory, request) -> LiveService:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium)")
    if os.environ.get("PYTEST_XDIST_WORKER") and request.config.getoption("dist", "no") not in SHARED_SCHEDULES:
        # The steps of a module follow one another in one tab, and every worker
        # would start its own service on the same database and Redis DB.
        pytest.skip("the browser tests are one scenario: run them without -n, or with --dist loadfile")
    var_dir = tmp_path_factory.mktemp("live-service")
    port, password = free_port(), secrets.token_urlsafe(18)
    env = service_env(var_dir, port, password)
    if env.get("DATABASE_URL", "").startswith("postgres"):
        recreate_postgres_database(env["DATABASE_URL"])
    flush_redis(env.get("REDIS_URL"))
    log_path = var_dir / "service.log"
    url = f"http://127.0.0.1:{port}"
    with open(log_path, "wb") as log:
        process = subprocess.Popen([sys.executable, "manage.py", "runall"], cwd=REPO_DIR, env=env, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until_up(process, url, log_path)
        yield LiveService(url=url, admin_user="browser-admin", admin_password=password, log_path=log_path)
    finally:
        stop(process)
        flush_redis(env.get("REDIS_URL"))


@pytest.fixture(scope="module")
def browser(live_service):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def page(browser, live_service):
    """One logged-in tab for the module's scenario (the tests follow one another)."""
    context = browser.new_context(base_url=live_service.url, viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(15_000)
    tab = context.new_page()
    tab.goto("/admin/login/?next=/admin/")
    tab.fill("#id_username", live_service.admin_user)
    tab.fill("#id_password", live_service.admin_password)
    tab.click("input[type=submit]")
    tab.wait_for_url("**/admin/")
    try:
        yield tab
    finally:
        context.close()


@pytest.fixture
def shoot(page, request):
    """shoot("name"): a full-page screenshot in test-artifacts/ (look at them)."""
    ARTIFACTS_DIR.mkdir(exist_ok=True)

    def take(name: str) -> Path:
        path = ARTIFACTS_DIR / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take

"""The embedded Redis (no REDIS_URL, no LMSTFY_POOLS): the first process starts
it with persistence on, later processes reuse it, and its data survives a restart.

These start real redis-server processes under a private LMSTFY_VAR_DIR and
always shut them down again.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from django.core.exceptions import ImproperlyConfigured
from pytest_django import Settings

from queues import embedded

pytestmark = pytest.mark.slow

BASE_DIR = Path(__file__).resolve().parent.parent
STOP_TIMEOUT_S = 10.0


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_for_exit(pid: int, timeout_s: float = STOP_TIMEOUT_S) -> bool:
    deadline = time.monotonic() + timeout_s
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


class EmbeddedRun:
    """A private LMSTFY_VAR_DIR for processes that use the embedded Redis."""

    def __init__(self, var_dir: Path) -> None:
        self.var_dir = var_dir
        self.redis_dir = var_dir / "redis"
        self.socket = self.redis_dir / "redis.sock"
        self.pid_file = self.redis_dir / "redis.pid"

    def env(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items()
               if key not in ("REDIS_URL", "LMSTFY_POOLS", "DATABASE_URL", "SECRET_KEY")}
        env.update({"LMSTFY_VAR_DIR": str(self.var_dir), "DJANGO_SETTINGS_MODULE": "lmstfy_site.settings"})
        return env

    def manage(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "manage.py", *args], cwd=BASE_DIR, env=self.env(),
                              capture_output=True, text=True, timeout=120)

    def pump_once(self) -> subprocess.CompletedProcess:
        return self.manage("pumper", "--once")

    def pid(self) -> int:
        return int(self.pid_file.read_text().strip())

    def client(self) -> redis.Redis:
        return redis.Redis(unix_socket_path=str(self.socket), socket_timeout=5, decode_responses=True)

    def stop(self, settings: Settings) -> None:
        """Shut the server down through queues.embedded.stop() and wait for it to exit."""
        pid = self.pid()
        settings.VAR_DIR = self.var_dir
        embedded.stop()
        assert wait_for_exit(pid), f"embedded Redis {pid} did not exit"

    def kill_leftovers(self) -> None:
        """Last resort for a failed test: end the server we started, by its pid."""
        if not self.pid_file.exists():
            return
        pid = self.pid()
        if pid_alive(pid) and not wait_for_exit(pid, 0.1):
            try:
                self.client().shutdown(nosave=True)
            except redis.RedisError:
                pass
            if not wait_for_exit(pid, 2.0):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def embedded_run() -> Iterator[EmbeddedRun]:
    # A short path of our own: a unix socket path has at most ~104 bytes.
    var_dir = Path(tempfile.mkdtemp(prefix="lmstfy-emb-", dir="/tmp"))
    run = EmbeddedRun(var_dir)
    try:
        # The embedded run's SQLite database, migrated as `runall` does first
        # (the pumper also fires schedules and evaluates alert rules).
        migrated = run.manage("migrate", "--noinput")
        assert migrated.returncode == 0, migrated.stderr
        yield run
    finally:
        run.kill_leftovers()
        shutil.rmtree(var_dir, ignore_errors=True)


def test_the_first_process_starts_the_embedded_redis_with_persistence_and_the_next_reuses_it(
        embedded_run: EmbeddedRun, settings: Settings) -> None:
    first = embedded_run.pump_once()
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[0] == "handled 0 timers"
    assert embedded_run.socket.is_socket()
    pid = embedded_run.pid()
    assert pid_alive(pid)
    client = embedded_run.client()
    assert client.ping()
    assert client.config_get("appendonly") == {"appendonly": "yes"}
    assert client.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
    assert client.config_get("port") == {"port": "0"}

    second = embedded_run.pump_once()
    assert second.returncode == 0, second.stderr
    assert embedded_run.pid() == pid
    assert pid_alive(pid)

    embedded_run.stop(settings)
    assert not pid_alive(pid)
    with pytest.raises(redis.ConnectionError):
        embedded_run.client().ping()


def test_data_in_the_embedded_redis_survives_a_restart(embedded_run: EmbeddedRun, settings: Settings) -> None:
    assert embedded_run.pump_once().returncode == 0
    first_pid = embedded_run.pid()
    embedded_run.client().set("survivor", "still here")
    embedded_run.stop(settings)

    restarted = embedded_run.pump_once()

    assert restarted.returncode == 0, restarted.stderr
    assert embedded_run.pid() != first_pid
    assert embedded_run.client().get("survivor") == "still here"
    embedded_run.stop(settings)


def test_a_var_dir_too_long_for_the_socket_is_refused_before_starting_anything(
        settings: Settings, tmp_path: Path) -> None:
    settings.VAR_DIR = tmp_path / ("x" * 120)

    with pytest.raises(ImproperlyConfigured, match="LMSTFY_VAR_DIR is too long"):
        embedded.ensure_running()

    assert not (settings.VAR_DIR / "redis").exists()

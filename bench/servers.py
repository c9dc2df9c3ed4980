"""Start and stop the two HTTP servers of a run: the real stack (`manage.py
runall`: gunicorn + pumper, exactly as a user runs it) and the framework floor
(bench/floor_site under the same gunicorn command line). Every process goes in
a session of its own, so stopping it stops all its children too."""
from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.environment import REPO_DIR

READY_TIMEOUT_S = 60
STOP_GRACE_S = 20
PORT_RANGE = range(18000, 18999)


def free_port(start: int = PORT_RANGE.start, ports: range = PORT_RANGE) -> int:
    for port in range(start, ports.stop):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {ports}")


@dataclass
class Server:
    name: str
    port: int
    process: subprocess.Popen
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def wait_ready(self, path: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}:\n{self.log_tail()}")
            if _answers(self.port, path):
                return
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} not ready after {READY_TIMEOUT_S}s:\n{self.log_tail()}")

    def worker_pids(self) -> list[int]:
        """The gunicorn workers among the processes of our session (for CPU accounting)."""
        session = os.getsid(self.process.pid)
        pids = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
                cmdline = (stat.parent / "cmdline").read_bytes()
            except OSError:
                continue
            if int(fields[3]) == session and b"gunicorn" in cmdline and _is_worker(int(stat.parent.name)):
                pids.append(int(stat.parent.name))
        return sorted(pids)

    def workers_cpu_s(self) -> float:
        """CPU seconds (user + system) the gunicorn workers have used so far."""
        hz = os.sysconf("SC_CLK_TCK")
        total = 0
        for pid in self.worker_pids():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(fields[11]) + int(fields[12])
        return total / hz

    def stop(self) -> None:
        """SIGTERM (runall stops its children gracefully), then SIGKILL whatever
        is left of the session we created -- never anything else."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.process.wait()


def _is_worker(pid: int) -> bool:
    """A gunicorn worker's parent is itself a gunicorn process (the master)."""
    try:
        ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        return b"gunicorn" in Path(f"/proc/{ppid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return False


def _answers(port: int, path: str) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        conn.request("GET", path)
        return conn.getresponse().status < 500
    except OSError:
        return False
    finally:
        conn.close()


def start(name: str, argv: list[str], env: dict[str, str], port: int, log_dir: Path) -> Server:
    log_path = log_dir / f"{name}.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(argv, env=env, cwd=REPO_DIR, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    return Server(name=name, port=port, process=process, log_path=log_path)


def start_real_stack(env: dict[str, str], port: int, log_dir: Path) -> Server:
    """`manage.py runall` with only its bind changed: its own migrate, gunicorn
    (LMSTFY_WORKERS x LMSTFY_THREADS gthread) and pumper."""
    argv = [sys.executable, str(REPO_DIR / "manage.py"), "runall"]
    server = start("ours", argv, {**env, "LMSTFY_BIND": f"127.0.0.1:{port}"}, port, log_dir)
    return _ready_or_stopped(server, "/version")


def floor_gunicorn_argv(port: int) -> list[str]:
    """runall's own gunicorn command line, with the floor app and port swapped in,
    so workers, threads, worker class, timeouts and access log are the same."""
    from queues.management.commands.runall import Command

    real = Command()._commands()[0]
    if "lmstfy_site.wsgi" not in real:
        raise RuntimeError(f"runall's gunicorn command changed shape; update bench/servers.py: {real}")
    argv: list[str] = []
    skip = False
    for arg in real:
        if skip:
            skip = False
        elif arg == "--bind":
            skip = True
        else:
            argv.append("bench.floor_site.wsgi" if arg == "lmstfy_site.wsgi" else arg)
    return argv + ["--bind", f"127.0.0.1:{port}"]


def start_floor(env: dict[str, str], port: int, log_dir: Path) -> Server:
    server = start("floor", floor_gunicorn_argv(port), env, port, log_dir)
    return _ready_or_stopped(server, "/ping")


def _ready_or_stopped(server: Server, path: str) -> Server:
    """A server that never became ready is stopped before the error goes up."""
    try:
        server.wait_ready(path)
    except BaseException:
        server.stop()
        raise
    return server

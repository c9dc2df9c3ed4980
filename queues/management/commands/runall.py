"""One command for a single machine: migrate, bootstrap the staff user, then run
gunicorn (API + admin), the pumper and the notifier, and stop them all on
SIGTERM/SIGINT or when one of them dies."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from queues import embedded, metrics, pools

GRACE_S = 15
GUNICORN_CONFIG = settings.BASE_DIR / "lmstfy_site" / "gunicorn.conf.py"  # the metrics worker-exit hook


class Command(BaseCommand):
    help = "Run the whole service on this machine: gunicorn + pumper + notifier."

    def handle(self, *args, **options) -> None:
        env = os.environ.copy()
        started_redis = settings.LMSTFY_POOLS is None
        if started_redis:
            env["REDIS_URL"] = embedded.ensure_running()
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        call_command("bootstrap")
        pools.log_durability_warnings()
        # gunicorn's workers share their metrics through files here (queues/metrics.py);
        # the files of a previous run are removed, so totals restart with the processes.
        env[metrics.MULTIPROC_ENV] = metrics.prepare_multiprocess_dir(
            env.get(metrics.MULTIPROC_ENV) or settings.VAR_DIR / "prometheus")
        children = [self._spawn(argv, env) for argv in self._commands()]
        self._announce()
        stopping = {"now": False}

        def stop(signum, frame) -> None:
            stopping["now"] = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        try:
            while not stopping["now"] and all(child.poll() is None for child in children):
                time.sleep(0.2)
        finally:
            code = self._stop(children)
            if started_redis:
                embedded.stop()
        sys.exit(code)

    def _commands(self) -> list[list[str]]:
        manage = [sys.executable, str(settings.BASE_DIR / "manage.py")]
        gunicorn = [sys.executable, "-m", "gunicorn", "lmstfy_site.wsgi", "--config", str(GUNICORN_CONFIG),
                    "--worker-class", "gthread",
                    "--workers", str(settings.LMSTFY_WORKERS), "--threads", str(settings.LMSTFY_THREADS),
                    "--graceful-timeout", str(GRACE_S), "--timeout", "0", "--access-logfile", "-"]
        for bind in settings.LMSTFY_BIND:
            gunicorn += ["--bind", bind]
        return [gunicorn, manage + ["pumper"], manage + ["notifier"]]

    @staticmethod
    def _spawn(argv: list[str], env: dict) -> subprocess.Popen:
        return subprocess.Popen(argv, env=env, cwd=settings.BASE_DIR)

    def _announce(self) -> None:
        first = settings.LMSTFY_BIND[0]
        self.stdout.write(self.style.SUCCESS(
            f"\nlmstfy is running.\n  API:   http://{first}/api/<namespace>/<queue>\n"
            f"  Admin: http://{first}/admin/  (user {settings.LMSTFY_ADMIN_USER!r})\n"
            f"  Token: curl -u USER:PASSWORD -X POST 'http://{first}/token/<namespace>?description=mine'\n"
            "Stop with Ctrl-C.\n"))

    @staticmethod
    def _stop(children: list[subprocess.Popen]) -> int:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + GRACE_S
        for child in children:
            try:
                child.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
        return max((abs(child.returncode or 0) for child in children), default=0)

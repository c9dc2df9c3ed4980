"""gunicorn settings that `manage.py runall` passes with --config.

Only what the command line cannot say: the access-log format and the
worker-exit hook of prometheus-client's multiprocess mode (see queues/metrics.py).
"""
from __future__ import annotations

import os

# The default format logs the request line with its query string, and lmstfy
# clients may send their token as ?token=...: log the path only (no secret in logs).
access_log_format = '%(h)s %(l)s %(u)s %(t)s "%(m)s %(U)s %(H)s" %(s)s %(b)s %(L)ss "%(a)s"'


def child_exit(server, worker) -> None:
    """A worker exited: drop its live-gauge files. Its counter and histogram files
    stay, since what it counted still belongs in the totals."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)

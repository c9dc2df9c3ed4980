"""gunicorn settings that `manage.py runall` passes with --config.

Only what the command line cannot say: the worker-exit hook of
prometheus-client's multiprocess mode (see queues/metrics.py).
"""
from __future__ import annotations

import os


def child_exit(server, worker) -> None:
    """A worker exited: drop its live-gauge files. Its counter and histogram files
    stay, since what it counted still belongs in the totals."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)

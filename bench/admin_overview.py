"""The web admin's overview with 10 000 queues renders in under 1 s (SPEC §7).

    python bench/admin_overview.py     # BENCH_REDIS_URL / BENCH_DATABASE_URL as for bench/run.py

Seeds 10 000 registered queues (one ready job each, 50 namespaces) into the
bench Redis DB with one pipeline (the DB is flushed before and after), migrates
the bench database, then renders the first and a middle page of /admin/queues/
as a staff user through Django's test client, in process. Prints the median of
ROUNDS renders of each and exits 1 if one is at or above the 1 s target.
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import environment  # noqa: E402

QUEUES = 10_000
NAMESPACES = 50
ROUNDS = 5
TARGET_S = 1.0


def seed(client) -> None:
    from queues import keys

    pipe = client.pipeline(transaction=False)
    for i in range(QUEUES):
        ns, q = f"ns{i % NAMESPACES:02d}", f"queue{i:05d}"
        pipe.sadd(keys.QUEUE_REGISTRY, keys.queue_member(ns, q))
        pipe.zadd(keys.ready(ns, q), {f"job{i}": i})
    pipe.execute()


def staff_client():
    from django.contrib.auth import get_user_model
    from django.test import Client

    user, _ = get_user_model().objects.get_or_create(username="bench-admin-overview", defaults={"is_staff": True})
    client = Client()
    client.force_login(user)
    return client


def median_render_s(client, url: str) -> float:
    client.get(url)  # warm up: templates, connections
    timings = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        response = client.get(url)
        timings.append(time.perf_counter() - started)
        assert response.status_code == 200, response.status_code
    return statistics.median(timings)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-admin-") as var_dir:
        environment.setup_django(environment.service_env(Path(var_dir)))
        environment.migrate()
        from queues import pools

        redis_client = pools.client()
        redis_client.flushdb()
        try:
            seed(redis_client)
            client = staff_client()
            failed = False
            for url in ("/admin/queues/", f"/admin/queues/?page={QUEUES // 200}"):
                took = median_render_s(client, url)
                failed = failed or took >= TARGET_S
                print(f"{url:32} {took * 1000:7.0f} ms (median of {ROUNDS}; target < {TARGET_S * 1000:.0f} ms)")
        finally:
            redis_client.flushdb()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

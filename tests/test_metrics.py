"""/metrics (queues/metrics.py): exact values after known sequences of API
calls, its authentication, bounded labels, and two real gunicorn workers that
must agree on every total whichever of them serves the scrape."""
from __future__ import annotations

import base64
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from django.test import Client
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.utils import floatToGoString

from queues import embedded, inspect, keys, metrics, pools
from queues.engine import Engine, JobNotFound, now_ms
from queues.management.commands.runall import GUNICORN_CONFIG, Command
from queues.notifier import Notifier
from tests.api_helpers import consume, make_dead, publish, url
from tests.push_helpers import deliver_ready, make_topic
from tests.testutil import T0

pytestmark = pytest.mark.django_db
BASE_DIR = Path(__file__).resolve().parent.parent
METRICS_TOKEN = "metrics-token-for-the-tests-0123456789"
QUEUE_ROUTE = "/api/<str:namespace>/<str:queue>"
Samples = dict[tuple[str, frozenset], float]


def parse(text: str) -> Samples:
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def scrape(client) -> Samples:
    response = client.get("/metrics")
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == metrics.CONTENT_TYPE
    return parse(b"".join(response.streaming_content).decode())


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def queue_value(samples: Samples, name: str, queue: str = "q") -> float:
    return value(samples, name, pool=pools.DEFAULT_POOL, namespace="ns", queue=queue)


def label_names(samples: Samples, name: str) -> set[str]:
    return {label for (sample, labels) in samples if sample == name for label, _ in labels}


# -- per-queue depths and job counters (Redis, exact) -------------------------------------------


def test_job_counters_and_depths_are_exact_after_publish_3_consume_2_ack_1_release_1(api, admin_api) -> None:
    for _ in range(3):
        publish(api)
    first, second = consume(api)["job_id"], consume(api)["job_id"]
    assert api.delete(url(suffix=f"/job/{first}")).status_code == 204
    assert api.put(url(suffix=f"/job/{second}/release")).status_code == 204

    samples = scrape(admin_api)

    assert {name: queue_value(samples, f"lmstfy_jobs_{name}_total") for name in
            ("published", "consumed", "acked", "released", "expired", "dead_lettered", "respawned")} == {
        "published": 3, "consumed": 2, "acked": 1, "released": 1, "expired": 0, "dead_lettered": 0, "respawned": 0}
    assert {name: queue_value(samples, f"lmstfy_queue_{name}") for name in
            ("ready", "delayed", "inflight", "deadletter", "paused")} == {
        "ready": 2, "delayed": 0, "inflight": 0, "deadletter": 0, "paused": 0}
    assert value(samples, "lmstfy_queues", pool="default") == 1


def test_dead_letter_respawn_expiry_and_pause_are_counted(api, admin_api, engine) -> None:
    make_dead(api, engine)                                     # published, consumed, dead-lettered
    assert api.put(url(suffix="/deadletter", query="limit=1")).json()["count"] == 1
    publish(api, query="ttl=1&delay=0")
    engine.pump_due(now=now_ms() + 5_000)                      # the ttl of both ready jobs ran out
    publish(api, query="delay=60")
    assert api.put(url(suffix="/pause")).status_code == 200

    samples = scrape(admin_api)

    assert [queue_value(samples, f"lmstfy_jobs_{name}_total") for name in
            ("published", "consumed", "dead_lettered", "respawned", "expired")] == [3, 1, 1, 1, 1]
    assert [queue_value(samples, f"lmstfy_queue_{name}") for name in
            ("ready", "delayed", "paused")] == [1, 1, 1]


@pytest.mark.parametrize(("kind", "expected"), [
    ("expired_while_ready_at_consume", {"exp_t": 1, "con_t": 0}),
    ("expired_while_in_flight_at_release", {"exp_t": 1, "rel_t": 0}),
    ("buried_by_the_notifier", {"dead_t": 1}),
    ("acked_twice", {"ack_t": 1}),
])
def test_each_script_counts_its_own_transitions(engine: Engine, kind: str, expected: dict[str, int]) -> None:
    [job_id] = engine.publish("ns", "q", [b"x"], ttl_s=1, now=T0).job_ids
    if kind == "expired_while_ready_at_consume":
        assert engine.consume("ns", ["q"], ttr_s=30, now=T0 + 2_000).jobs == []
    elif kind == "expired_while_in_flight_at_release":
        engine.consume("ns", ["q"], ttr_s=30, now=T0)
        with pytest.raises(JobNotFound):
            engine.release("ns", "q", job_id, now=T0 + 2_000)
    elif kind == "buried_by_the_notifier":
        engine.consume("ns", ["q"], ttr_s=30, now=T0)
        engine.bury("ns", "q", job_id)
    else:
        engine.ack("ns", "q", job_id)
        engine.ack("ns", "q", job_id)

    [reading] = inspect.queue_metrics(pools.DEFAULT_POOL, [("ns", "q")])
    totals = dict(zip(inspect.TOTAL_FIELDS, reading.totals, strict=True))
    assert {field: totals[field] for field in expected} == expected


def test_an_unknown_job_acked_creates_no_queue_state(engine: Engine, redis_client) -> None:
    engine.ack("ns", "q", "01J00000000000000000000000")

    assert redis_client.keys("*") == []


# -- process-local observations (this process's registry here; multiprocess under gunicorn) -----


def test_publish_to_consume_latency_counts_each_consumed_job_once(api, admin_api) -> None:
    before = value(scrape(admin_api), "lmstfy_publish_to_consume_seconds_count", namespace="ns")
    publish(api)
    publish(api)
    consume(api, query="count=2")
    assert api.get(url()).status_code == 404   # an empty consume observes nothing

    samples = scrape(admin_api)

    assert value(samples, "lmstfy_publish_to_consume_seconds_count", namespace="ns") == before + 2
    assert label_names(samples, "lmstfy_publish_to_consume_seconds_bucket") == {"namespace", "le"}


def test_http_requests_are_labelled_by_route_pattern_not_by_path(api, admin_api) -> None:
    labels = {"route": QUEUE_ROUTE, "method": "PUT", "code": "201"}
    before = scrape(admin_api)
    publish(api, queue="a")
    publish(api, queue="b")
    assert api.get("/no/such/route").status_code == 404

    samples = scrape(admin_api)

    assert value(samples, "lmstfy_http_requests_total", **labels) == \
        value(before, "lmstfy_http_requests_total", **labels) + 2
    unmatched = {"route": metrics.UNMATCHED_ROUTE, "method": "GET", "code": "404"}
    assert value(samples, "lmstfy_http_requests_total", **unmatched) == \
        value(before, "lmstfy_http_requests_total", **unmatched) + 1
    assert value(samples, "lmstfy_http_request_duration_seconds_count", route=QUEUE_ROUTE, method="PUT") >= 2
    routes = {dict(labels).get("route") for (name, labels) in samples if name.startswith("lmstfy_http_")}
    assert not [route for route in routes if route.startswith(("/api/ns/", "/no/"))], routes


def test_an_unknown_http_method_is_labelled_other() -> None:
    assert (metrics.method_label("GET"), metrics.method_label("BREW"), metrics.method_label(None)) == \
        ("GET", "other", "other")


# -- Redis-kept counters: auth failures, rate limits, deliveries, memory ------------------------


def test_token_auth_failures_are_counted_by_reason_and_per_minute(admin_api) -> None:
    from rest_framework.test import APIClient

    assert APIClient().get(url()).status_code == 401
    assert APIClient().get(url(), HTTP_X_TOKEN="not-a-token").status_code == 401
    assert APIClient().get(url(), HTTP_X_TOKEN="not-a-token").status_code == 401

    samples = scrape(admin_api)

    assert value(samples, "lmstfy_auth_failures_total", reason="token_missing") == 1
    assert value(samples, "lmstfy_auth_failures_total", reason="token_invalid") == 2
    assert (inspect.auth_failures_total(), inspect.auth_failures_in_last(1)) == (3, 3)


def test_auth_failure_windows_follow_the_clock(engine: Engine, redis_client) -> None:
    minute = T0 // 60_000
    engine.count_auth_failure("token_invalid", now=T0)
    engine.count_auth_failure("token_invalid", now=T0 + 60_000)
    engine.count_auth_failure("token_missing", now=T0 + 60_000)

    assert inspect.auth_failures_per_minute(3, now=T0 + 60_000) == [(minute - 1, 0), (minute, 1), (minute + 1, 2)]
    assert [inspect.auth_failures_in_last(n, now=T0 + 60_000) for n in (1, 2)] == [2, 3]
    assert 0 < redis_client.ttl(keys.auth_failures_minute(minute)) <= 120 * 60


def test_rate_limited_requests_are_counted_per_namespace_and_direction(api, admin_api, token) -> None:
    limit = admin_api.post(f"/token/ns/{token}/limit", {"read": 0, "write": 1, "interval": 60}, format="json")
    assert limit.status_code == 201, limit.content
    publish(api)
    assert api.put(url(), data=b"x", content_type="application/octet-stream").status_code == 429
    assert api.put(url(), data=b"x", content_type="application/octet-stream").status_code == 429

    samples = scrape(admin_api)

    assert value(samples, "lmstfy_rate_limited_total", namespace="ns", direction="produce") == 2


# transaction=True: the delivery threads write the delivery_exhausted alert event on
# connections of their own, outside the test's transaction; the flush removes it.
@pytest.mark.django_db(transaction=True)
def test_deliveries_are_counted_by_topic_and_outcome_with_their_durations(
        private_callbacks, receiver, namespace, engine, admin_api) -> None:
    topic = make_topic(namespace, receiver, max_attempts=5, backoff="fixed", min_backoff_s=60)
    engine.publish("ns", "q", [b"1", b"2", b"3"])
    for status in (200, 500, 410):
        receiver.answer(status=status)
    notifier = Notifier(threads=1)   # one seat: one job per pass, in FIFO order
    try:
        for _ in range(3):
            assert deliver_ready(notifier)
    finally:
        notifier.shutdown(5)

    samples = scrape(admin_api)

    outcomes = {outcome: value(samples, "lmstfy_deliveries_total", topic=str(topic.id), namespace="ns", queue="q",
                               outcome=outcome) for outcome in ("success", "retry", "dead")}
    assert outcomes == {"success": 1, "retry": 1, "dead": 1}
    buckets = [value(samples, "lmstfy_delivery_duration_seconds_bucket", namespace="ns", le=le) for le in
               [floatToGoString(bound / 1000) for bound in metrics.DELIVERY_BUCKETS_MS] + ["+Inf"]]
    assert buckets == sorted(buckets) and buckets[-1] == 3
    assert value(samples, "lmstfy_delivery_duration_seconds_count", namespace="ns") == 3
    assert [queue_value(samples, f"lmstfy_jobs_{name}_total") for name in
            ("consumed", "acked", "released", "dead_lettered")] == [3, 1, 1, 1]


def test_the_per_queue_fast_path_writes_what_generate_latest_would() -> None:
    from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily

    queues = [("default", inspect.QueueMetrics("ns", "q", 1, 2, 3, 4, True, (1, 2, 3, 4, 5, 6, 7))),
              ('odd"pool\\', inspect.QueueMetrics("ns-2", "q_2", 0, 0, 0, 9, False, (0,) * 7))]
    families = []
    for name, documentation, attribute in metrics.PER_QUEUE_GAUGES:
        families.append(GaugeMetricFamily(name, documentation, labels=["pool", "namespace", "queue"]))
        for pool, queue in queues:
            families[-1].add_metric([pool, queue.namespace, queue.queue], float(getattr(queue, attribute)))
    for index, (name, documentation) in enumerate(metrics.PER_QUEUE_COUNTERS):
        families.append(CounterMetricFamily(name, documentation, labels=["pool", "namespace", "queue"]))
        for pool, queue in queues:
            families[-1].add_metric([pool, queue.namespace, queue.queue], queue.totals[index])

    fast = b"".join(metrics.render_per_queue(queues)).decode()
    reference = b"".join(metrics.render(families)).decode()

    assert parse(fast) == parse(reference)
    assert [line for line in fast.splitlines() if line.startswith("#")] == \
        [line for line in reference.splitlines() if line.startswith("#")]


def test_a_delivery_duration_falls_in_the_first_bucket_that_holds_it() -> None:
    assert [metrics.delivery_bucket(ms) for ms in (0, 10, 11, 60_000, 60_001)] == ["10", "10", "25", "60000", "+Inf"]


def test_redis_memory_is_reported_per_pool(admin_api, redis_client) -> None:
    samples = scrape(admin_api)

    assert value(samples, "lmstfy_redis_up", pool="default") == 1
    assert value(samples, "lmstfy_redis_used_memory_bytes", pool="default") > 0
    assert value(samples, "lmstfy_redis_maxmemory_bytes", pool="default") == int(
        redis_client.config_get("maxmemory")["maxmemory"])


def test_an_unreachable_pool_is_reported_down_and_the_scrape_still_answers(settings, api, admin_api) -> None:
    publish(api)
    settings.LMSTFY_POOLS = {**pools.configured_urls(), "gone": f"redis://127.0.0.1:{closed_port()}/0"}
    pools.reset_clients()
    try:
        samples = scrape(admin_api)
    finally:
        pools.reset_clients()

    assert (value(samples, "lmstfy_redis_up", pool="gone"), value(samples, "lmstfy_redis_up", pool="default")) == (0, 1)
    assert queue_value(samples, "lmstfy_jobs_published_total") == 1


def test_histograms_and_counters_never_carry_a_queue_label(api, admin_api) -> None:
    for queue in ("a", "b", "c"):
        publish(api, queue=queue)
        consume(api, queue)

    samples = scrape(admin_api)

    for name in ("lmstfy_publish_to_consume_seconds_bucket", "lmstfy_http_request_duration_seconds_bucket",
                 "lmstfy_http_requests_total", "lmstfy_auth_failures_total", "lmstfy_rate_limited_total"):
        assert "queue" not in label_names(samples, name), name
    assert len([key for key in samples if key[0] == "lmstfy_queue_ready"]) == 3


# -- authentication of /metrics --------------------------------------------------------------


def test_metrics_without_credentials_is_401_with_a_basic_challenge() -> None:
    response = Client().get("/metrics")

    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Basic")


def test_the_configured_bearer_token_may_scrape(settings) -> None:
    settings.LMSTFY_METRICS_TOKEN = METRICS_TOKEN

    assert Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {METRICS_TOKEN}").status_code == 200
    assert Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {METRICS_TOKEN}x").status_code == 401


def test_a_bearer_token_is_refused_while_none_is_configured(settings) -> None:
    settings.LMSTFY_METRICS_TOKEN = None

    assert Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {METRICS_TOKEN}").status_code == 401


def test_staff_may_scrape_with_basic_auth_or_a_session(admin_api, staff_user) -> None:
    session = Client()
    session.force_login(staff_user)

    assert admin_api.get("/metrics").status_code == 200
    assert session.get("/metrics").status_code == 200


def test_a_user_who_is_not_staff_is_refused(db) -> None:
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_user("visitor", password="visitor-password")
    credentials = base64.b64encode(b"visitor:visitor-password").decode()

    assert Client().get("/metrics", HTTP_AUTHORIZATION=f"Basic {credentials}").status_code == 403


def test_a_short_metrics_token_stops_start_up(tmp_path: Path) -> None:
    env = {**os.environ, "LMSTFY_METRICS_TOKEN": "short", "LMSTFY_VAR_DIR": str(tmp_path),
           "DJANGO_SETTINGS_MODULE": "lmstfy_site.settings"}
    result = subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=BASE_DIR, env=env,
                            capture_output=True, text=True, timeout=60)

    assert result.returncode != 0
    assert "LMSTFY_METRICS_TOKEN must be at least 16 characters" in result.stderr


# -- runall and gunicorn wiring ----------------------------------------------------------------


def test_runall_gives_gunicorn_the_config_with_the_worker_exit_hook() -> None:
    argv = Command()._commands()[0]

    assert argv[argv.index("--config") + 1] == str(GUNICORN_CONFIG)
    assert "def child_exit(" in GUNICORN_CONFIG.read_text()


def test_preparing_the_multiprocess_dir_removes_a_previous_runs_files(tmp_path: Path) -> None:
    (tmp_path / "counter_123.db").write_bytes(b"old")
    (tmp_path / "notes.txt").write_text("kept")

    assert metrics.prepare_multiprocess_dir(tmp_path) == str(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


# -- two gunicorn workers ------------------------------------------------------------------------


@dataclass
class LiveServer:
    base_url: str
    token: str
    multiproc_dir: Path
    process: subprocess.Popen
    log_path: Path

    def scrape(self) -> Samples:
        # A new connection each time, so either worker may take it.
        response = requests.get(f"{self.base_url}/metrics", timeout=30, headers={
            "Authorization": f"Bearer {METRICS_TOKEN}", "Connection": "close"})
        assert response.status_code == 200, response.text
        return parse(response.text)

    def worker_pids_that_served(self, route: str) -> set[int]:
        """Workers whose own multiprocess file counts a request on `route`."""
        served = set()
        for path in self.multiproc_dir.glob("counter_*.db"):
            for family in MultiProcessCollector.merge([str(path)]):
                if any(s.labels.get("route") == route and s.value > 0 for s in family.samples):
                    served.add(int(path.stem.split("_")[-1]))
        return served


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def free_port(ports: range = range(17000, 18000)) -> int:
    start = random.randrange(len(ports))  # other suites use this range too: do not all try 17000 first
    for port in [*ports[start:], *ports[:start]]:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {ports}")


def live_redis_url() -> str:
    """LMSTFY_TEST_LIVE_REDIS_URL, else the tests' own Redis DB (this test owns it
    while it runs: the autouse fixture flushed it)."""
    override = os.environ.get("LMSTFY_TEST_LIVE_REDIS_URL")
    if override:
        return override
    default_url = pools.configured_urls()[pools.DEFAULT_POOL]
    return embedded.url() if default_url == "embedded" else default_url


def live_env(tmp_path: Path) -> dict[str, str]:
    """The server's own environment: its Redis, its database (LMSTFY_TEST_LIVE_DATABASE_URL,
    else SQLite in its var dir), its var dir and its multiprocess dir."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("DATABASE_URL", "LMSTFY_POOLS", "PROMETHEUS_MULTIPROC_DIR")}
    env.update({"DJANGO_SETTINGS_MODULE": "lmstfy_site.settings", "REDIS_URL": live_redis_url(),
                "LMSTFY_VAR_DIR": str(tmp_path / "var"), "LMSTFY_METRICS_TOKEN": METRICS_TOKEN,
                "PROMETHEUS_MULTIPROC_DIR": metrics.prepare_multiprocess_dir(tmp_path / "prometheus")})
    if os.environ.get("LMSTFY_TEST_LIVE_DATABASE_URL"):
        env["DATABASE_URL"] = os.environ["LMSTFY_TEST_LIVE_DATABASE_URL"]
    return env


def flush_live_redis() -> None:
    import redis

    redis.Redis.from_url(live_redis_url()).flushdb()


MIGRATE_AND_MAKE_TOKEN = ("import django; django.setup(); from django.core.management import call_command; "
                          "call_command('migrate', verbosity=0); from queues import tokens; "
                          "print(tokens.create_token('ns', 'metrics test')[1])")


@pytest.fixture
def two_workers(tmp_path: Path) -> Iterator[LiveServer]:
    env = live_env(tmp_path)
    flush_live_redis()
    setup = subprocess.run([sys.executable, "-c", MIGRATE_AND_MAKE_TOKEN], cwd=BASE_DIR, env=env,
                           capture_output=True, text=True, timeout=300)
    assert setup.returncode == 0, setup.stderr
    port = free_port()
    log_path = tmp_path / "gunicorn.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "lmstfy_site.wsgi", "--config", str(GUNICORN_CONFIG),
             "--worker-class", "gthread", "--workers", "2", "--threads", "4", "--bind", f"127.0.0.1:{port}"],
            cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
    server = LiveServer(f"http://127.0.0.1:{port}", setup.stdout.strip().splitlines()[-1],
                        Path(env["PROMETHEUS_MULTIPROC_DIR"]), process, log_path)
    try:
        wait_until_answering(server)
        yield server
    finally:
        stop_process_group(process)
        if os.environ.get("LMSTFY_TEST_LIVE_REDIS_URL"):
            flush_live_redis()


def wait_until_answering(server: LiveServer, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert server.process.poll() is None, server.log_path.read_text(errors="replace")
        try:
            if requests.get(f"{server.base_url}/version", timeout=10).status_code == 200:
                return
        except requests.RequestException:  # not listening yet, or a worker still importing Django
            pass
        time.sleep(0.2)
    raise AssertionError(f"gunicorn did not answer in {timeout_s}s:\n{server.log_path.read_text(errors='replace')}")


def stop_process_group(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(5)


def call(server: LiveServer, method: str, path: str, expected: int) -> None:
    response = requests.request(method, f"{server.base_url}{path}", data=b"job", timeout=30,
                                headers={"X-Token": server.token, "Connection": "close"})
    assert response.status_code == expected, response.text


@pytest.mark.slow
def test_two_gunicorn_workers_report_the_same_exact_totals_whichever_serves_the_scrape(
        two_workers: LiveServer) -> None:
    server = two_workers
    published = consumed = 0
    with ThreadPoolExecutor(8) as pool:
        # Enough requests, in parallel on fresh connections, that both workers serve some.
        while len(server.worker_pids_that_served(QUEUE_ROUTE)) < 2 and published < 2000:
            list(pool.map(lambda _: call(server, "PUT", "/api/ns/q", 201), range(50)))
            published += 50
        list(pool.map(lambda _: call(server, "GET", "/api/ns/q?ttr=600", 200), range(30)))
        consumed += 30
    assert len(server.worker_pids_that_served(QUEUE_ROUTE)) == 2

    scrapes = 0
    while scrapes < 4 or (len(server.worker_pids_that_served("/metrics")) < 2 and scrapes < 200):
        samples = server.scrape()
        scrapes += 1
        assert value(samples, "lmstfy_http_requests_total", route=QUEUE_ROUTE, method="PUT", code="201") == published
        assert value(samples, "lmstfy_http_requests_total", route=QUEUE_ROUTE, method="GET", code="200") == consumed
        # The histogram has no code label: its count is every PUT answered on the route.
        assert value(samples, "lmstfy_http_request_duration_seconds_count", route=QUEUE_ROUTE, method="PUT") == \
            sum(v for (name, labels), v in samples.items() if name == "lmstfy_http_requests_total"
                and {("route", QUEUE_ROUTE), ("method", "PUT")} <= labels)
        assert value(samples, "lmstfy_publish_to_consume_seconds_count", namespace="ns") == consumed
        assert queue_value(samples, "lmstfy_jobs_published_total") == published
        assert queue_value(samples, "lmstfy_jobs_consumed_total") == consumed
        assert queue_value(samples, "lmstfy_queue_ready") == published - consumed
        assert queue_value(samples, "lmstfy_queue_inflight") == consumed
    assert len(server.worker_pids_that_served("/metrics")) == 2, "one worker served every scrape"


# -- the Grafana dashboard -------------------------------------------------------------------------


def test_the_grafana_dashboard_queries_only_metrics_the_exporter_serves(admin_api) -> None:
    import json
    import re

    response = admin_api.get("/metrics")
    served = set(re.findall(r"^# TYPE (\S+) ", b"".join(response.streaming_content).decode(), re.M))
    dashboard = json.loads((BASE_DIR / "docs" / "grafana-dashboard.json").read_text())
    queried = {re.sub(r"_(bucket|sum|count)$", "", name)  # a histogram's series -> its family
               for panel in dashboard["panels"] for target in panel.get("targets", [])
               for name in re.findall(r"\blmstfy_[a-z_]+", target["expr"])}

    assert queried and queried <= served, queried - served

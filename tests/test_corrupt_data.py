"""Bytes in Redis that do not decode as a job never turn an API call into a 500."""
from __future__ import annotations

from queues import keys


def corrupt(redis_client, job_id: str) -> None:
    redis_client.hset(keys.jobs("ns", "q"), job_id, b"\xff\x00garbage")


def test_consume_skips_a_corrupt_job_and_serves_the_next_one(api, engine, redis_client):
    bad, good = engine.publish("ns", "q", [b"will be corrupted", b"fine"]).job_ids
    corrupt(redis_client, bad)
    response = api.get("/api/ns/q")
    assert response.status_code == 200
    assert response.json()["job_id"] == good
    assert redis_client.hexists(keys.jobs("ns", "q"), bad) == 0


def test_peeking_a_corrupt_job_answers_null_data_not_an_error(api, engine, redis_client):
    (bad,) = engine.publish("ns", "q", [b"will be corrupted"]).job_ids
    corrupt(redis_client, bad)
    for path in (f"/api/ns/q/job/{bad}", "/api/ns/q/peek"):
        response = api.get(path)
        assert response.status_code == 200, path
        assert response.json()["job_id"] == bad and response.json()["data"] is None


def test_the_dead_letter_listing_shows_a_corrupt_job_without_data(api, engine, redis_client):
    (job_id,) = engine.publish("ns", "q", [b"x"]).job_ids
    engine.consume("ns", ["q"], ttr_s=0)
    engine.pump_due()
    corrupt(redis_client, job_id)
    response = api.get("/api/ns/q/deadletter/jobs")
    assert response.status_code == 200
    assert [(j["job_id"], j["data"]) for j in response.json()["jobs"]] == [(job_id, None)]

"""The OpenAPI 3 description of /api/ (served at /api/schema/).

Written out rather than inferred: the lmstfy API is fixed, its answers are not
DRF serializers, and clients generated from this need the exact parameters,
limits and error bodies. tests/test_openapi.py checks that it names every
route of queues/api/urls.py and nothing else.
"""
from __future__ import annotations

from django.conf import settings

from queues.api import views

JSON = "application/json"


def _uint(name: str, description: str, default: int | None = None, maximum: int = 2**32 - 1,
          minimum: int = 0) -> dict:
    schema: dict = {"type": "integer", "minimum": minimum, "maximum": maximum}
    if default is not None:
        schema["default"] = default
    return {"name": name, "in": "query", "required": False, "description": description, "schema": schema}


def _path(name: str, description: str) -> dict:
    return {"name": name, "in": "path", "required": True, "description": description,
            "schema": {"type": "string", "pattern": "^[-_A-Za-z0-9]+$", "maxLength": 255}}


def _answer(description: str, schema: str | None = None, example: dict | list | None = None) -> dict:
    answer: dict = {"description": description}
    if schema or example is not None:
        content: dict = {}
        if schema:
            content["schema"] = {"$ref": f"#/components/schemas/{schema}"}
        if example is not None:
            content["example"] = example
        answer["content"] = {JSON: content}
    return answer


def _error(description: str, message: str, key: str = "error") -> dict:
    return {"description": description,
            "content": {JSON: {"schema": {"$ref": "#/components/schemas/Error"}, "example": {key: message}}}}


NS, Q = _path("namespace", "Namespace"), _path("queue", "Queue")
QUEUES = {**_path("queue", "One queue, or several separated by ',' in priority order"),
          "schema": {"type": "string", "pattern": "^[-_,A-Za-z0-9]+$"}}
JOB_ID = {"name": "job_id", "in": "path", "required": True, "schema": {"type": "string"}}
COMMON_ERRORS = {
    "400": _error("Invalid name or parameter", "queue name contains forbidden characters"),
    "401": _error("No token or an invalid one", "invalid token"),
    "404": _error("Unknown pool prefix in the token", "pool not found"),
    "503": _error("Redis is unreachable", "storage unavailable"),
}


def _publish_parameters() -> list[dict]:
    return [
        _uint("delay", "Seconds before the job becomes ready", settings.LMSTFY_DEFAULT_DELAY),
        _uint("ttl", "Seconds of life from publish; 0 = never expires", settings.LMSTFY_DEFAULT_TTL),
        _uint("tries", "Maximum deliveries (>= 1)", settings.LMSTFY_DEFAULT_TRIES, maximum=2**16 - 1,
              minimum=1),
        _uint("priority", "0..255, higher is consumed first (extension)", 0, maximum=views.MAX_PRIORITY),
        {"name": "Idempotency-Key", "in": "header", "required": False, "schema": {"type": "string"},
         "description": "Same key in the same queue within 24 h returns the first job ids (extension)"},
        {"name": "Enable-Job-Version", "in": "header", "required": False,
         "schema": {"type": "string", "enum": ["YES"]},
         "description": "Versioned job ids; enables Job-Attr-<Key> attribute headers (at most 16)"},
    ]


def _operation(summary: str, parameters: list[dict], responses: dict, *, tokened: bool = True,
               body: str | None = None) -> dict:
    operation: dict = {"summary": summary, "parameters": parameters,
                       "responses": {**responses, **{code: error for code, error in COMMON_ERRORS.items()
                                                      if code not in responses and (tokened or code != "401")}}}
    if tokened:
        operation["security"] = [{"XToken": []}, {"TokenQuery": []}]
    if body == "raw":
        operation["requestBody"] = {"description": f"The job body, opaque bytes, at most {views.MAX_BODY_BYTES}",
                                    "content": {"application/octet-stream": {"schema": {"type": "string",
                                                                                        "format": "binary"}}}}
    elif body == "bulk":
        operation["requestBody"] = {"description": f"A JSON array of 1..{views.MAX_BULK_JOBS} elements; "
                                                   "each element's raw JSON text becomes one job body",
                                    "content": {JSON: {"schema": {"type": "array", "minItems": 1,
                                                                  "maxItems": views.MAX_BULK_JOBS, "items": {}}}}}
    return operation


def _paths() -> dict:
    q, job = "/api/{namespace}/{queue}", "/api/{namespace}/{queue}/job/{job_id}"
    no_job = _error("No job available", "no job available", key="msg")
    job_not_found = _error("Unknown, expired or deleted job", "job not found")
    published = _answer("Published", "Published")
    return {
        q: {
            "put": _operation("Publish a job", [NS, Q, *_publish_parameters()],
                              {"201": published, "200": _answer("Duplicate idempotency key", "Published"),
                               "413": _error("Body over 1 MiB", "body too large")}, body="raw"),
            "get": _operation("Consume jobs (one or several queues)", [NS, QUEUES,
                              _uint("ttr", "Lease in seconds", settings.LMSTFY_DEFAULT_TTR),
                              _uint("timeout", "Long-poll seconds; 0 = do not wait", settings.LMSTFY_DEFAULT_TIMEOUT),
                              _uint("count", "Jobs to take; > 1 answers an array", 1,
                                    maximum=views.MAX_CONSUME_COUNT, minimum=1)],
                              {"200": {"description": "A job (count = 1) or an array of jobs (count > 1)",
                                       "content": {JSON: {"schema": {"oneOf": [
                                           {"$ref": "#/components/schemas/ConsumedJob"},
                                           {"type": "array", "items": {"$ref": "#/components/schemas/ConsumedJob"}}]}}}},
                               "404": no_job}),
            "delete": _operation("Destroy the queue's live jobs", [NS, Q], {"204": _answer("Destroyed")}),
        },
        q + "/bulk": {"put": _operation("Publish up to 64 jobs", [NS, Q, *_publish_parameters()],
                                        {"201": _answer("Published", "BulkPublished"),
                                         "413": _error("An element over 1 MiB", "job too large")}, body="bulk")},
        job: {
            "put": _operation("Re-publish: replace the job by a new one", [NS, Q, JOB_ID, *_publish_parameters()],
                              {"201": published}, body="raw"),
            "get": _operation("Peek a job by id", [NS, Q, JOB_ID], {"200": _answer("The job", "Job"),
                                                                    "404": job_not_found}),
            "delete": _operation("Acknowledge (delete) a job", [NS, Q, JOB_ID], {"204": _answer("Deleted")}),
        },
        job + "/release": {"put": _operation("Give an in-flight job back (extension)",
                                             [NS, Q, JOB_ID, _uint("delay", "Seconds before it is ready again", 0)],
                                             {"204": _answer("Released"), "404": job_not_found})},
        q + "/peek": {"get": _operation("Peek the next ready job", [NS, Q],
                                        {"200": _answer("The job", "Job"),
                                         "404": _error("Nothing ready", "the queue is empty")})},
        q + "/size": {"get": _operation("Ready jobs (public)", [NS, Q], {"200": _answer("Size", "Size")},
                                        tokened=False)},
        q + "/deadletter": {
            "get": _operation("Peek the dead letter", [NS, Q], {"200": _answer("Size and oldest id", "DeadLetter")}),
            "put": _operation("Respawn the oldest dead jobs", [NS, Q, _uint("limit", "How many", 1, 2**63 - 1, 1),
                                                               _uint("ttl", "New ttl; 0 = never", settings.LMSTFY_DEFAULT_TTL, 2**63 - 1)],
                              {"200": _answer("Respawned", example={"msg": "respawned", "count": 1})}),
            "delete": _operation("Delete the oldest dead jobs", [NS, Q, _uint("limit", "How many", 1, 2**63 - 1, 1)],
                                 {"204": _answer("Deleted")}),
        },
        q + "/deadletter/size": {"get": _operation("Dead jobs (public)", [NS, Q], {"200": _answer("Size", "Size")},
                                                   tokened=False)},
        q + "/deadletter/jobs": {"get": _operation("List dead jobs, oldest first (extension)",
                                                   [NS, Q, _uint("limit", "Page size", 20, 100, 1),
                                                    _uint("offset", "Skip", 0)],
                                                   {"200": _answer("A page", "DeadJobs")})},
        q + "/deadletter/job/{job_id}": {
            "put": _operation("Respawn one dead job (extension)", [NS, Q, JOB_ID,
                              _uint("ttl", "New ttl; 0 = never", settings.LMSTFY_DEFAULT_TTL, 2**63 - 1)],
                              {"200": _answer("Respawned", example={"msg": "respawned", "count": 1}),
                               "404": job_not_found}),
            "delete": _operation("Delete one dead job (extension)", [NS, Q, JOB_ID],
                                 {"204": _answer("Deleted"), "404": job_not_found}),
        },
        q + "/stats": {"get": _operation("Queue counts (extension)", [NS, Q], {"200": _answer("Counts", "Stats")})},
        q + "/stats/due": {"get": _operation("Delayed jobs falling due per bucket (extension)",
                                             [NS, Q, _uint("bucket", "Bucket seconds", 3600, minimum=1),
                                              _uint("buckets", "Bucket count", 72, 1000, 1)],
                                             {"200": _answer("Histogram", "DueHistogram")})},
        q + "/pause": {
            "put": _operation("Pause consumption (extension)", [NS, Q], {"200": _answer("Paused", "PauseState")}),
            "delete": _operation("Resume consumption (extension)", [NS, Q], {"200": _answer("Resumed", "PauseState")}),
        },
    }


def _schemas() -> dict:
    integer, string = {"type": "integer"}, {"type": "string"}
    job = {"type": "object", "required": ["namespace", "queue", "job_id", "data", "ttl", "elapsed_ms",
                                           "remain_tries", "attributes"],
           "properties": {"namespace": string, "queue": string, "job_id": string,
                          "data": {"type": "string", "format": "byte", "nullable": True},
                          "ttl": integer, "elapsed_ms": integer, "remain_tries": integer,
                          "attributes": {"type": "object", "nullable": True,
                                         "additionalProperties": {"type": "string"}}}}
    return {
        "Error": {"type": "object", "properties": {"error": string, "msg": string}},
        "Job": job,
        "ConsumedJob": {"allOf": [job, {"type": "object", "properties": {"msg": {"type": "string",
                                                                                    "enum": ["new job"]}}}]},
        "Published": {"type": "object", "properties": {"msg": {"type": "string", "enum": ["published", "duplicated"]},
                                                       "job_id": string}},
        "BulkPublished": {"type": "object", "properties": {"msg": string,
                                                           "job_ids": {"type": "array", "items": string}}},
        "Size": {"type": "object", "properties": {"namespace": string, "queue": string, "size": integer}},
        "DeadLetter": {"type": "object", "properties": {"namespace": string, "queue": string,
                                                        "deadletter_size": integer, "deadletter_head": string}},
        "DeadJobs": {"type": "object", "properties": {
            "namespace": string, "queue": string, "total": integer, "offset": integer,
            "jobs": {"type": "array", "items": {"allOf": [job, {"type": "object",
                                                               "properties": {"deliveries": integer}}]}}}},
        "Stats": {"type": "object", "properties": {"namespace": string, "queue": string, "ready": integer,
                                                   "delayed": integer, "inflight": integer, "deadletter": integer,
                                                   "paused": {"type": "boolean"}}},
        "DueHistogram": {"type": "object", "properties": {"bucket": integer, "start": integer,
                                                          "counts": {"type": "array", "items": integer}}},
        "PauseState": {"type": "object", "properties": {"namespace": string, "queue": string,
                                                        "paused": {"type": "boolean"}}},
    }


def document() -> dict:
    return {
        "openapi": "3.0.3",
        "info": {"title": "lmstfy-compatible job API", "version": "1.0.0",
                 "description": "lmstfy's /api/ routes and our extensions. See README, compatibility notes."},
        "paths": _paths(),
        "components": {
            "schemas": _schemas(),
            "securitySchemes": {"XToken": {"type": "apiKey", "in": "header", "name": "X-Token"},
                                "TokenQuery": {"type": "apiKey", "in": "query", "name": "token"}},
        },
    }

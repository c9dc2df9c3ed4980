from __future__ import annotations

import importlib.util
from pathlib import Path

CONFIG = Path(__file__).resolve().parent.parent / "lmstfy_site" / "gunicorn.conf.py"


def load_config():
    spec = importlib.util.spec_from_file_location("gunicorn_conf", CONFIG)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_access_log_never_records_a_query_string_that_may_hold_a_token():
    log_format = load_config().access_log_format
    assert "%(U)s" in log_format  # the path
    assert "%(r)s" not in log_format and "%(q)s" not in log_format  # request line / query string

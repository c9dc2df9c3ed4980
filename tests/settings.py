"""Settings of the test run: the project's, with test defaults set before they
are read (pytest-django loads settings before any conftest code runs).

The test run keeps its own var/ directory, so without REDIS_URL it starts its
own embedded Redis (which the tests flush) and never touches the quickstart's.
Subprocesses started by the tests inherit both variables.
"""
from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("LMSTFY_VAR_DIR", str(Path(__file__).resolve().parent.parent / "var" / "test"))
os.environ.setdefault("LMSTFY_TOKEN_LISTING", "prefix")

from lmstfy_site.settings import *  # noqa: E402,F401,F403

"""The registry of Lua scripts: the only code that opens lua/*.lua.

Per-queue scripts get the shared prelude (lua/_job.lua) prepended; the global
scripts (timer index, throttle counters) run alone. Each script is loaded once
per process and called by SHA (redis-py reloads it on NOSCRIPT).
"""
from __future__ import annotations

from functools import cache
from pathlib import Path

from redis.commands.core import Script

LUA_DIR = Path(__file__).resolve().parent / "lua"
PRELUDE = "_job.lua"
# Scripts on global keys: no per-queue prelude.
GLOBAL_SCRIPTS = frozenset({"index_claim", "index_settle", "throttle"})


@cache
def source(name: str) -> str:
    text = (LUA_DIR / f"{name}.lua").read_text()
    if name in GLOBAL_SCRIPTS:
        return text
    return (LUA_DIR / PRELUDE).read_text() + "\n" + text


def script(name: str) -> Script:
    """An unbound Script; call it with ``client=`` so one object serves every pool."""
    return _scripts()[name]


@cache
def _scripts() -> dict[str, Script]:
    names = sorted(p.stem for p in LUA_DIR.glob("*.lua") if not p.name.startswith("_"))
    # No registered client: the SHA is computed locally from the bytes, and
    # every call passes its pool's client (or pipeline).
    return {name: Script(None, source(name).encode()) for name in names}

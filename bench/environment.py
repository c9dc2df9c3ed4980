"""Where the benchmarks run: the bench Redis DB and PostgreSQL database, the
environment every process of the run shares, a token minted through the
database, and a description of the machine for the report."""
from __future__ import annotations

import os
import platform
import secrets
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REPO_DIR = Path(__file__).resolve().parent.parent
# DB 9 is the benchmarks' own: the test suites of the team use DBs 10-15.
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/9")
DATABASE_URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/bench")
NAMESPACE = "bench"


def redis_db(url: str = REDIS_URL) -> int:
    path = urlsplit(url).path.strip("/")
    return int(path) if path else 0


def service_env(var_dir: Path) -> dict[str, str]:
    """The environment of the real stack and of this process's in-process engine.

    LMSTFY_POOLS is dropped so that REDIS_URL (the bench DB) is the only pool;
    VAR_DIR is a temporary directory so the run never touches the repo's var/."""
    env = {k: v for k, v in os.environ.items() if k not in ("LMSTFY_POOLS", "DJANGO_SETTINGS_MODULE")}
    env.update({
        "DJANGO_SETTINGS_MODULE": "lmstfy_site.settings",
        "DATABASE_URL": DATABASE_URL,
        "REDIS_URL": REDIS_URL,
        "LMSTFY_VAR_DIR": str(var_dir),
        "SECRET_KEY": env.get("SECRET_KEY") or secrets.token_urlsafe(48),
        "LMSTFY_ADMIN_PASSWORD": secrets.token_urlsafe(18),
        "DEBUG": "0",
    })
    return env


def flush_bench_db(client) -> None:
    """FLUSHDB of the bench DB, and only of it: other DBs of this Redis belong
    to the team's test suites."""
    db = client.connection_pool.connection_kwargs.get("db", 0)
    if db != redis_db():
        raise RuntimeError(f"refusing to flush Redis DB {db}: the benchmarks own DB {redis_db()} only")
    client.flushdb()


def floor_env(port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env.update({"FLOOR_REDIS_URL": REDIS_URL, "DJANGO_SETTINGS_MODULE": "bench.floor_site.settings"})
    return env


def fresh_database() -> None:
    """(Re)create the bench PostgreSQL database, empty: it only ever holds one
    run's token, and a fresh one cannot trip over migrations that changed since
    the last run."""
    import psycopg

    parts = urlsplit(DATABASE_URL)
    name = parts.path.strip("/")
    if not name.startswith("bench"):
        raise RuntimeError(f"refusing to recreate database {name!r}: the benchmarks own 'bench*' databases only")
    maintenance = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(maintenance, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def setup_django(env: dict[str, str]) -> None:
    """Load the real site in this process (engine benchmarks, token minting)."""
    os.environ.update(env)
    if str(REPO_DIR) not in sys.path:
        sys.path.insert(0, str(REPO_DIR))
    import django

    django.setup()


def migrate() -> None:
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)


def mint_token() -> str:
    """A token created the way the admin API creates one (stored hashed in the DB)."""
    from queues import tokens

    _, plain = tokens.create_token(NAMESPACE, "benchmark run")
    return plain


@dataclass(frozen=True)
class Machine:
    nproc: int
    cpu_model: str
    python: str
    redis_version: str
    load_average: str
    busy_processes: list[str]

    def as_dict(self) -> dict:
        return asdict(self)


def describe_machine(redis_client) -> Machine:
    return Machine(nproc=os.cpu_count() or 0, cpu_model=_cpu_model(), python=platform.python_version(),
                   redis_version=redis_client.info("server")["redis_version"],
                   load_average=load_average(),
                   busy_processes=busy_processes())


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def busy_processes(sample_s: float = 1.0, limit: int = 6, threshold: float = 3.0) -> list[str]:
    """What else is using CPU right now, measured over `sample_s` (ps's %CPU is a
    lifetime average, useless here): the figures are only as quiet as the machine."""
    before = _cpu_ticks()
    time.sleep(sample_s)
    after = _cpu_ticks()
    hz = os.sysconf("SC_CLK_TCK")
    usage = []
    for pid, (ticks, name) in after.items():
        if pid in before and pid != os.getpid():
            percent = 100.0 * (ticks - before[pid][0]) / hz / sample_s
            if percent >= threshold:
                usage.append((percent, name))
    usage.sort(reverse=True)
    return [f"{percent:.0f}% {name}" for percent, name in usage[:limit]]


def _cpu_ticks() -> dict[int, tuple[int, str]]:
    ticks = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            raw = stat.read_text()
            cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2:].split()
        name = cmdline.strip()[:90] or raw[raw.index("(") + 1:raw.rindex(")")]
        ticks[int(stat.parent.name)] = (int(fields[11]) + int(fields[12]), name)
    return ticks

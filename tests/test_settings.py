"""Settings come from the environment and a bad value stops start-up with an
ImproperlyConfigured error that names the variable.

Each error path loads the settings in a fresh interpreter (settings are read
once per process), from a known-good environment with one variable spoiled.
"""
from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from lmstfy_site import envparse

BASE_DIR = Path(__file__).resolve().parent.parent
# The variables settings.py reads, so that the caller's environment cannot leak in.
SETTINGS_VARIABLES = ("SECRET_KEY", "DEBUG", "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS", "DATABASE_URL", "REDIS_URL",
                      "DEFAULT_FROM_EMAIL", "LOG_LEVEL")
SETTINGS_PREFIXES = ("LMSTFY_", "EMAIL_")


def clean_environment() -> dict[str, str]:
    return {key: value for key, value in os.environ.items()
            if key not in SETTINGS_VARIABLES and not key.startswith(SETTINGS_PREFIXES)}
GOOD_SECRET_KEY = "k" * 40
PRINT_SETTING = "from django.conf import settings; print(getattr(settings, {name!r}))"


def load_settings(var_dir: Path, code: str = "", **overrides: str | None) -> subprocess.CompletedProcess:
    """Run django.setup() in a new interpreter with a good environment plus `overrides`
    (None removes a variable), then `code`."""
    env = clean_environment()
    env.update({
        "DJANGO_SETTINGS_MODULE": "lmstfy_site.settings",
        "LMSTFY_VAR_DIR": str(var_dir),
        "SECRET_KEY": GOOD_SECRET_KEY,
        "REDIS_URL": "redis://127.0.0.1:6379/11",
    })
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    script = "import django; django.setup()\n" + code
    return subprocess.run([sys.executable, "-c", script], cwd=BASE_DIR, env=env, capture_output=True,
                          text=True, timeout=60)


def assert_refused(result: subprocess.CompletedProcess, variable: str) -> None:
    assert result.returncode != 0, result.stdout
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith("django.core.exceptions.ImproperlyConfigured: "), result.stderr
    assert variable in last_line, last_line


def test_the_baseline_environment_loads(tmp_path: Path) -> None:
    result = load_settings(tmp_path, PRINT_SETTING.format(name="LMSTFY_POOLS"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "{'default': 'redis://127.0.0.1:6379/11'}"


BAD_VALUES = [
    pytest.param("DEBUG", "maybe", id="debug-not-a-boolean"),
    pytest.param("SECRET_KEY", "too-short", id="secret-key-too-short"),
    pytest.param("DATABASE_URL", "garbage", id="database-url-garbage"),
    pytest.param("DATABASE_URL", "mongodb://db.example/app", id="database-url-unknown-scheme"),
    pytest.param("LMSTFY_POOLS", "other=redis://127.0.0.1:6379/1", id="pools-without-default"),
    pytest.param("LMSTFY_POOLS", "default=redis://127.0.0.1:6379/1,broken", id="pools-malformed-entry"),
    pytest.param("LMSTFY_POOLS", "default=redis://127.0.0.1:6379/1,=redis://h/2", id="pools-entry-without-name"),
    pytest.param("LMSTFY_POOLS", "default=redis://h/1,a=redis://h/2,a=redis://h/3", id="pools-duplicate-pool"),
    pytest.param("LMSTFY_POOLS", "default=http://127.0.0.1:6379/1", id="pools-bad-scheme"),
    pytest.param("LMSTFY_POOLS", "default=redis://h/1,a:b=redis://h/2", id="pools-name-with-colon"),
    pytest.param("REDIS_URL", "http://127.0.0.1:6379/0", id="redis-url-bad-scheme"),
    pytest.param("REDIS_URL", "127.0.0.1:6379", id="redis-url-without-scheme"),
    pytest.param("LMSTFY_DEFAULT_TTL", "-1", id="default-ttl-negative"),
    pytest.param("LMSTFY_DEFAULT_TTL", "abc", id="default-ttl-not-a-number"),
    pytest.param("LMSTFY_DEFAULT_TRIES", "0", id="default-tries-zero"),
    pytest.param("LMSTFY_PUMP_INTERVAL", "0", id="pump-interval-too-small"),
    pytest.param("LMSTFY_PUMP_INTERVAL", "5", id="pump-interval-too-large"),
    pytest.param("LMSTFY_PUMP_INTERVAL", "nan", id="pump-interval-nan"),
    pytest.param("LMSTFY_PUMP_INTERVAL", "soon", id="pump-interval-not-a-number"),
    pytest.param("LMSTFY_TOKEN_LISTING", "bogus", id="token-listing-bogus"),
    pytest.param("EMAIL_PORT", "0", id="email-port-zero"),
    pytest.param("EMAIL_PORT", "65536", id="email-port-too-large"),
    pytest.param("EMAIL_USE_TLS", "sometimes", id="email-use-tls-not-a-boolean"),
    pytest.param("LMSTFY_WORKERS", "0", id="workers-zero"),
    pytest.param("LMSTFY_THREADS", "many", id="threads-not-a-number"),
    pytest.param("LMSTFY_NOTIFIER_THREADS", "0", id="notifier-threads-zero"),
    pytest.param("LMSTFY_METRICS_TOKEN", "short", id="metrics-token-too-short"),
]


@pytest.mark.parametrize(("variable", "value"), BAD_VALUES)
def test_a_bad_value_stops_start_up_with_a_message_naming_the_variable(
        tmp_path: Path, variable: str, value: str) -> None:
    assert_refused(load_settings(tmp_path, **{variable: value}), variable)


def test_lmstfy_pools_takes_precedence_over_redis_url(tmp_path: Path) -> None:
    result = load_settings(tmp_path, PRINT_SETTING.format(name="LMSTFY_POOLS"),
                           LMSTFY_POOLS="default=redis://a:6379/1, second = redis+sentinel://s:26379/m ")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "{'default': 'redis://a:6379/1', 'second': 'redis+sentinel://s:26379/m'}"


def test_no_redis_url_and_no_pools_means_the_embedded_redis(tmp_path: Path) -> None:
    result = load_settings(tmp_path, PRINT_SETTING.format(name="LMSTFY_POOLS"), REDIS_URL=None)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "None"


def test_no_database_url_means_sqlite_under_the_var_dir(tmp_path: Path) -> None:
    code = "from django.conf import settings; d = settings.DATABASES['default']; print(d['ENGINE'], d['NAME'])"
    result = load_settings(tmp_path, code, DATABASE_URL=None)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["django.db.backends.sqlite3", str(tmp_path.resolve() / "db.sqlite3")]


def test_an_unset_secret_key_is_generated_once_into_the_var_dir_and_reused(tmp_path: Path) -> None:
    show_key = PRINT_SETTING.format(name="SECRET_KEY")
    first = load_settings(tmp_path, show_key, SECRET_KEY=None)
    assert first.returncode == 0, first.stderr
    key_file = tmp_path / "secret_key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = first.stdout.strip()
    assert len(key) >= 50
    assert key_file.read_text().strip() == key

    second = load_settings(tmp_path, show_key, SECRET_KEY=None)
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == key
    assert [p.name for p in tmp_path.iterdir()] == ["secret_key"]


def test_processes_starting_together_agree_on_the_generated_secret_key(tmp_path: Path) -> None:
    """runall starts gunicorn, the pumper and the notifier at once: whoever creates
    the key file, every process must read the same complete key."""
    env = clean_environment()
    env.update({"DJANGO_SETTINGS_MODULE": "lmstfy_site.settings", "LMSTFY_VAR_DIR": str(tmp_path)})
    script = ("import django; django.setup(); from django.conf import settings; print(settings.SECRET_KEY)")
    processes = [subprocess.Popen([sys.executable, "-c", script], cwd=BASE_DIR, env=env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(8)]
    outputs = [process.communicate(timeout=60) for process in processes]
    assert [process.returncode for process in processes] == [0] * 8, [err for _, err in outputs]
    keys = {out.strip() for out, _ in outputs}
    assert keys == {(tmp_path / "secret_key").read_text().strip()}
    assert len(keys.pop()) >= 50


def test_an_unusable_secret_key_file_stops_start_up(tmp_path: Path) -> None:
    (tmp_path / "secret_key").write_text("\n")
    assert_refused(load_settings(tmp_path, SECRET_KEY=None), "SECRET_KEY")


def test_a_secret_key_given_in_the_environment_writes_no_file(tmp_path: Path) -> None:
    result = load_settings(tmp_path, PRINT_SETTING.format(name="SECRET_KEY"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == GOOD_SECRET_KEY
    assert not (tmp_path / "secret_key").exists()


# --- envparse helpers, in-process ---------------------------------------------


@pytest.mark.parametrize(("raw", "expected"), [
    ("1", True), ("true", True), ("YES", True), (" on ", True),
    ("0", False), ("False", False), ("no", False), ("off", False), ("", False),
])
def test_envbool_reads_the_usual_spellings(monkeypatch: pytest.MonkeyPatch, raw: str, expected: bool) -> None:
    monkeypatch.setenv("X_FLAG", raw)
    assert envparse.envbool("X_FLAG", not expected) is expected


def test_envbool_returns_the_default_when_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("X_FLAG", raising=False)
    assert envparse.envbool("X_FLAG", True) is True
    assert envparse.envbool("X_FLAG", False) is False


def test_envbool_refuses_anything_else_and_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match=r"^X_FLAG .*'maybe'"):
        envparse.envbool("X_FLAG")


def test_envstr_treats_empty_as_unset_and_strips(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_TEXT", "   ")
    assert envparse.envstr("X_TEXT", "fallback") == "fallback"
    monkeypatch.setenv("X_TEXT", "  value ")
    assert envparse.envstr("X_TEXT") == "value"
    monkeypatch.delenv("X_TEXT")
    assert envparse.envstr("X_TEXT") is None


def test_envint_parses_and_checks_the_range(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("X_NUMBER", raising=False)
    assert envparse.envint("X_NUMBER", 7, minimum=1, maximum=10) == 7
    monkeypatch.setenv("X_NUMBER", " 10 ")
    assert envparse.envint("X_NUMBER", 7, minimum=1, maximum=10) == 10
    monkeypatch.setenv("X_NUMBER", "11")
    with pytest.raises(ImproperlyConfigured, match=r"^X_NUMBER must be <= 10, got 11$"):
        envparse.envint("X_NUMBER", 7, minimum=1, maximum=10)
    monkeypatch.setenv("X_NUMBER", "0")
    with pytest.raises(ImproperlyConfigured, match=r"^X_NUMBER must be >= 1, got 0$"):
        envparse.envint("X_NUMBER", 7, minimum=1, maximum=10)
    monkeypatch.setenv("X_NUMBER", "1.5")
    with pytest.raises(ImproperlyConfigured, match=r"^X_NUMBER must be an integer, got '1.5'$"):
        envparse.envint("X_NUMBER", 7)


@pytest.mark.parametrize("raw", ["nan", "inf", "-inf", "NaN"])
def test_envfloat_refuses_values_that_are_not_finite(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("X_SECONDS", raw)
    with pytest.raises(ImproperlyConfigured, match=r"^X_SECONDS "):
        envparse.envfloat("X_SECONDS", 1.0)


def test_envfloat_parses_and_checks_the_range(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_SECONDS", "0.25")
    assert envparse.envfloat("X_SECONDS", 1.0, minimum=0.01, maximum=1.0) == 0.25
    monkeypatch.setenv("X_SECONDS", "1.5")
    with pytest.raises(ImproperlyConfigured, match=r"^X_SECONDS must be <= 1.0"):
        envparse.envfloat("X_SECONDS", 1.0, minimum=0.01, maximum=1.0)
    monkeypatch.setenv("X_SECONDS", "later")
    with pytest.raises(ImproperlyConfigured, match=r"^X_SECONDS must be a number, got 'later'$"):
        envparse.envfloat("X_SECONDS", 1.0)


def test_envlist_splits_on_commas_and_drops_empty_items(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_LIST", " a, b ,,c ,")
    assert envparse.envlist("X_LIST", ["z"]) == ["a", "b", "c"]
    monkeypatch.delenv("X_LIST")
    default = ["z"]
    listed = envparse.envlist("X_LIST", default)
    assert listed == ["z"] and listed is not default


@pytest.mark.parametrize("url", [
    "redis://h:6379/0", "rediss://h:6380/1", "unix:///tmp/redis.sock", "redis+sentinel://s:26379/m",
    "redis+cluster://c:7000",
])
def test_check_redis_url_accepts_every_supported_scheme(url: str) -> None:
    assert envparse.check_redis_url("X_URL", url) == url


@pytest.mark.parametrize("url", ["http://h/0", "h:6379", "", "memcached://h"])
def test_check_redis_url_refuses_other_schemes_naming_the_variable(url: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=r"^X_URL: .* is not a Redis URL"):
        envparse.check_redis_url("X_URL", url)


def test_envpools_falls_back_to_a_single_default_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("X_POOLS", raising=False)
    monkeypatch.setenv("X_REDIS", "redis://h:6379/3")
    assert envparse.envpools("X_POOLS", "X_REDIS") == {"default": "redis://h:6379/3"}
    monkeypatch.delenv("X_REDIS")
    assert envparse.envpools("X_POOLS", "X_REDIS") is None


def test_envpools_parses_several_pools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_POOLS", "default=redis://h/1, bulk-jobs = redis://h/2 ,eu_1=rediss://e/0")
    assert envparse.envpools("X_POOLS", "X_REDIS") == {
        "default": "redis://h/1", "bulk-jobs": "redis://h/2", "eu_1": "rediss://e/0"}


@pytest.mark.parametrize(("raw", "message"), [
    ("bulk=redis://h/1", r"^X_POOLS must define a pool named 'default'$"),
    ("default=redis://h/1,bulk", r"^X_POOLS entries must look like"),
    ("default=", r"^X_POOLS entries must look like"),
    ("default=redis://h/1,default=redis://h/2", r"^X_POOLS names pool 'default' twice$"),
    ("default=redis://h/1,a b=redis://h/2", r"^X_POOLS: pool name 'a b'"),
    ("default=redis://h/1,pool:x=redis://h/2", r"^X_POOLS: pool name 'pool:x'"),
    ("default=redis://h/1,pöol=redis://h/2", r"^X_POOLS: pool name 'pöol'"),
    ("default=tcp://h/1", r"^X_POOLS: 'tcp://h/1' is not a Redis URL"),
])
def test_envpools_refuses_bad_definitions(monkeypatch: pytest.MonkeyPatch, raw: str, message: str) -> None:
    monkeypatch.setenv("X_POOLS", raw)
    with pytest.raises(ImproperlyConfigured, match=message):
        envparse.envpools("X_POOLS", "X_REDIS")

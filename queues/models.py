"""Configuration that lives in the database: namespaces and their tokens.

Jobs never touch the database; they live in Redis (see engine.py).
"""
from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxLengthValidator, MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from queues import validators

NAME_VALIDATOR = RegexValidator(r"^[-_A-Za-z0-9]+$", "Use only letters, digits, '-' and '_'.")


class Namespace(models.Model):
    """A tenant: it owns tokens, queues and (later) topics and schedules."""

    name = models.CharField(max_length=255, unique=True, validators=[NAME_VALIDATOR, MaxLengthValidator(255)])
    description = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class TokenQuerySet(models.QuerySet):
    def active(self) -> TokenQuerySet:
        return self.filter(revoked_at__isnull=True)


class Token(models.Model):
    """Grants access to one namespace in one pool.

    Only a SHA-256 digest and a short public prefix are stored; the plain token
    is shown once, when it is created (see queues/tokens.py).
    """

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="tokens")
    pool = models.CharField(max_length=64, default="default")
    description = models.CharField(max_length=255)
    digest = models.CharField(max_length=64, db_index=True)
    prefix = models.CharField(max_length=16)
    # Random, non-secret input from which a generated token is derived with
    # SECRET_KEY; empty for user-supplied tokens. See tokens.derive_token().
    derivation = models.CharField(max_length=32, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = TokenQuerySet.as_manager()

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "pool", "digest"], condition=Q(revoked_at__isnull=True),
                name="one_active_token_per_value"),
        ]

    def __str__(self) -> str:
        return f"{self.namespace.name}: {self.prefix}… ({self.description})"


class TokenLimit(models.Model):
    """lmstfy's per-token throttle: at most `read` consumes and `write` publishes
    per `interval` seconds (a fixed window); a limit <= 0 means unlimited."""

    token = models.OneToOneField(Token, on_delete=models.CASCADE, related_name="limit")
    read = models.IntegerField(default=0)
    write = models.IntegerField(default=0)
    interval = models.PositiveIntegerField()

    def __str__(self) -> str:
        return f"{self.token}: read {self.read}, write {self.write} per {self.interval}s"

    def as_dict(self) -> dict:
        return {"read": self.read, "write": self.write, "interval": self.interval}


def new_signing_secret() -> str:
    """Standard Webhooks symmetric secret: `whsec_` + base64 of 24 random bytes."""
    import base64
    import secrets

    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


class Topic(models.Model):
    """Binds a queue to a callback URL: the notifier pushes each ready job there."""

    class Method(models.TextChoices):
        POST = "POST"
        PUT = "PUT"
        GET = "GET"

    class Backoff(models.TextChoices):
        DQ = "dq", "dq: 1, 3, 5, 7 … minutes"
        EXPONENTIAL = "exponential", "exponential: min·2^(n−1), capped, ±10 % jitter"
        FIXED = "fixed", "fixed: min_backoff_s"

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="topics")
    queue = models.CharField(max_length=255, validators=[validators.validate_queue_name])
    pool = models.CharField(max_length=64, default="default", validators=[validators.validate_pool])
    callback_url = models.URLField(max_length=2048, validators=[validators.validate_callback_url])
    method = models.CharField(max_length=6, choices=Method.choices, default=Method.POST)
    headers = models.JSONField(default=dict, blank=True, validators=[validators.validate_headers])
    timeout_ms = models.PositiveIntegerField(default=3000, validators=[MinValueValidator(100),
                                                                        MaxValueValidator(60_000)])
    retry_expression = models.TextField(blank=True, default="", validators=[validators.validate_retry_expression])
    max_attempts = models.PositiveIntegerField(default=10, validators=[MinValueValidator(1), MaxValueValidator(100)])
    backoff = models.CharField(max_length=16, choices=Backoff.choices, default=Backoff.DQ)
    min_backoff_s = models.PositiveIntegerField(default=10, validators=[MinValueValidator(1)])
    max_backoff_s = models.PositiveIntegerField(default=3600, validators=[MinValueValidator(1)])
    concurrency = models.PositiveIntegerField(default=10, validators=[MinValueValidator(1), MaxValueValidator(1000)])
    rate_per_s = models.FloatField(default=0, validators=[MinValueValidator(0), MaxValueValidator(100_000)])
    paused = models.BooleanField(default=False)
    alert_emails = models.JSONField(default=list, blank=True, validators=[validators.validate_email_list])
    description = models.TextField(blank=True, default="")
    signing_secret = models.CharField(max_length=128, default=new_signing_secret, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["namespace__name", "queue"]
        constraints = [models.UniqueConstraint(fields=["namespace", "queue"], name="one_topic_per_queue")]

    def __str__(self) -> str:
        return f"{self.namespace.name}/{self.queue} → {self.callback_url}"

    def clean(self) -> None:
        validators.validate_backoff_range(self.min_backoff_s, self.max_backoff_s)


class Schedule(models.Model):
    """A recurring job: a cron rule (or `@every <n>s|m|h`) that publishes one job
    into a queue at each tick. Fired by the pumper (queues/scheduler.py)."""

    class CatchUp(models.TextChoices):
        SKIP = "skip", "skip missed runs"
        ONCE = "once", "fire once for all missed runs"

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="schedules")
    queue = models.CharField(max_length=255, validators=[validators.validate_queue_name])
    # The Redis pool the jobs go to (like Topic.pool): consumers holding a `pool:token` see them.
    pool = models.CharField(max_length=64, default="default", validators=[validators.validate_pool])
    name = models.CharField(max_length=255)
    spec = models.CharField(max_length=255, validators=[validators.validate_schedule_spec])
    timezone = models.CharField(max_length=64, default="UTC", validators=[validators.validate_timezone])
    body = models.TextField(blank=True, default="")
    tries = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1), MaxValueValidator(65535)])
    ttl = models.PositiveIntegerField(default=86400)
    priority = models.PositiveIntegerField(default=0, validators=[MaxValueValidator(255)])
    enabled = models.BooleanField(default=True)
    catch_up = models.CharField(max_length=8, choices=CatchUp.choices, default=CatchUp.SKIP)
    # The next tick to fire; claimed with a conditional UPDATE so each tick fires once.
    next_fire_at = models.DateTimeField(null=True, blank=True, db_index=True)
    last_fired_at = models.DateTimeField(null=True, blank=True)
    # The last fires and skipped (missed) ticks, newest first, capped (scheduler.RECENT_FIRES_KEPT).
    recent_fires = models.JSONField(default=list, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    # Written by the scheduler's claims. An edit writes none of them back (a stale copy, read
    # before a claim and saved after it, would re-open a tick already fired), except
    # next_fire_at when the edit changed the timing.
    SCHEDULER_FIELDS = ("next_fire_at", "last_fired_at", "recent_fires")

    class Meta:
        ordering = ["namespace__name", "name"]
        constraints = [models.UniqueConstraint(fields=["namespace", "name"], name="one_schedule_name_per_namespace")]

    def __str__(self) -> str:
        return f"{self.namespace.name}/{self.name}: {self.spec} → {self.queue}"

    def save(self, *args, **kwargs) -> None:
        """A new schedule, or one whose spec, timezone or enabled flag changed, gets
        its next tick from now; no edit writes the scheduler's other fields."""
        from queues import scheduler

        editing = not self._state.adding
        rescheduled = scheduler.reschedule_on_save(self)
        if editing:
            fields = kwargs.get("update_fields")
            if fields is None:
                fields = [field.name for field in self._meta.concrete_fields
                          if not field.primary_key and field.name not in self.SCHEDULER_FIELDS]
            kwargs["update_fields"] = {*fields, "next_fire_at"} if rescheduled else fields
        super().save(*args, **kwargs)


class AlertRule(models.Model):
    """When to tell someone: a condition over queues, evaluated by the pumper."""

    class Kind(models.TextChoices):
        REDIS_DOWN = "redis_down"
        BACKLOG_ABOVE = "backlog_above"
        DEADLETTER_ABOVE = "deadletter_above"
        DELIVERY_EXHAUSTED = "delivery_exhausted"
        DELIVERY_FAILURE_RATE = "delivery_failure_rate"
        CONSUMER_IDLE = "consumer_idle"
        SCHEDULE_MISSED = "schedule_missed"
        AUTH_FAILURES_ABOVE = "auth_failures_above"

    name = models.CharField(max_length=255, unique=True)
    kind = models.CharField(max_length=32, choices=Kind.choices)
    namespace = models.ForeignKey(Namespace, null=True, blank=True, on_delete=models.CASCADE,
                                  related_name="alert_rules")
    queue_pattern = models.CharField(max_length=255, default="*", blank=True,
                                     help_text="A glob (fnmatch) over queue names; empty or * is every queue.")
    threshold = models.FloatField(default=0, validators=[MinValueValidator(0)], help_text=(
        "Per kind: backlog_above / deadletter_above: jobs; delivery_exhausted / auth_failures_above: "
        "count in the window; delivery_failure_rate: a fraction 0..1 of failed attempts in the window; "
        "consumer_idle: minutes; schedule_missed: seconds late; redis_down: unused."))
    window_s = models.PositiveIntegerField(default=300, validators=[MinValueValidator(1)])
    cooldown_s = models.PositiveIntegerField(default=900)
    emails = models.JSONField(default=list, blank=True, validators=[validators.validate_email_list])
    # The same SSRF rule as topic callbacks: alert webhooks go out through delivery.send too.
    webhook_url = models.URLField(max_length=2048, blank=True, default="",
                                  validators=[validators.validate_callback_url])
    enabled = models.BooleanField(default=True)
    # Evaluation state, kept by the pumper.
    firing = models.BooleanField(default=False)
    last_notified_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"

    def clean(self) -> None:
        validators.validate_alert_threshold(self.kind, self.threshold)


class AlertEvent(models.Model):
    """Something an operator should hear about: a rule that fired (and when it
    resolved), or a delivery that ran out of attempts."""

    rule = models.ForeignKey(AlertRule, null=True, blank=True, on_delete=models.SET_NULL, related_name="events")
    kind = models.CharField(max_length=64)
    namespace = models.CharField(max_length=255, blank=True, default="")
    queue = models.CharField(max_length=255, blank=True, default="")
    message = models.TextField()
    details = models.JSONField(default=dict, blank=True)
    # A default, not auto_now_add: the evaluator stamps its own (injectable) clock.
    fired_at = models.DateTimeField(default=timezone.now)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-fired_at", "-id"]

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


class Lease(models.Model):
    """A named duty held by one process until `expires_at` (the alert evaluator's
    once-per-deployment claim, alerts.take_lease). In the database, not Redis:
    the evaluator must keep running, and report, while a Redis pool is down."""

    name = models.CharField(max_length=64, unique=True)
    owner = models.CharField(max_length=255, blank=True, default="")
    expires_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name}: {self.owner or 'nobody'} until {self.expires_at:%Y-%m-%d %H:%M:%S}"

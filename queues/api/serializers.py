"""Serializers of the management API (/manage/v1/). The rules live in the
model fields' validators (queues/validators.py), shared with the Django admin."""
from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from queues import scheduler, validators
from queues.models import AlertEvent, AlertRule, Namespace, Schedule, Topic


class NamespaceSerializer(serializers.ModelSerializer):
    class Meta:
        model = Namespace
        fields = ["name", "description", "created_at"]
        read_only_fields = ["created_at"]


class TopicSerializer(serializers.ModelSerializer):
    namespace = serializers.SlugRelatedField(slug_field="name", queryset=Namespace.objects.all())

    class Meta:
        model = Topic
        fields = ["id", "namespace", "queue", "pool", "callback_url", "method", "headers", "timeout_ms",
                  "retry_expression", "max_attempts", "backoff", "min_backoff_s", "max_backoff_s", "concurrency",
                  "rate_per_s", "paused", "alert_emails", "description", "signing_secret", "created_at"]
        read_only_fields = ["id", "signing_secret", "created_at"]

    def validate(self, attrs: dict) -> dict:
        low = attrs.get("min_backoff_s", getattr(self.instance, "min_backoff_s", 10))
        high = attrs.get("max_backoff_s", getattr(self.instance, "max_backoff_s", 3600))
        try:
            validators.validate_backoff_range(low, high)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from None
        return attrs


class AttemptSerializer(serializers.Serializer):
    job_id = serializers.CharField()
    attempt = serializers.IntegerField()
    at = serializers.CharField()
    duration_ms = serializers.IntegerField()
    status = serializers.IntegerField(allow_null=True)
    error = serializers.CharField(allow_blank=True)
    response = serializers.CharField(allow_blank=True)
    outcome = serializers.ChoiceField(choices=["success", "retry", "dead"])
    next_attempt_at = serializers.CharField(allow_blank=True)

    def to_representation(self, record: dict) -> dict:
        return {**record, "attempt": int(record.get("attempt") or 0),
                "duration_ms": int(record.get("duration_ms") or 0),
                "status": int(record["status"]) if record.get("status") else None}


class ExpressionCheckSerializer(serializers.Serializer):
    expression = serializers.CharField(allow_blank=True, max_length=2000, trim_whitespace=False)
    status = serializers.IntegerField(min_value=0, max_value=999, default=200)
    body = serializers.CharField(allow_blank=True, required=False, default="", trim_whitespace=False)


MAX_JOB_BODY = 1024 * 1024  # a job body is at most 1 MiB (SPEC §1)


class ScheduleSerializer(serializers.ModelSerializer):
    """A recurring job. Timing rules (cron or `@every`, IANA zone, ranges) are the
    model fields' validators; next_fire_at itself is set by the model's save hook."""

    namespace = serializers.SlugRelatedField(slug_field="name", queryset=Namespace.objects.all())
    body = serializers.CharField(allow_blank=True, required=False, default="", max_length=MAX_JOB_BODY,
                                 trim_whitespace=False)
    next_fire_times = serializers.SerializerMethodField()

    class Meta:
        model = Schedule
        fields = ["id", "namespace", "queue", "pool", "name", "spec", "timezone", "body", "tries", "ttl", "priority",
                  "enabled", "catch_up", "next_fire_times", "last_fired_at", "recent_fires"]
        read_only_fields = ["id", "last_fired_at", "recent_fires"]

    @extend_schema_field(serializers.ListField(child=serializers.DateTimeField()))
    def get_next_fire_times(self, schedule: Schedule) -> list[str]:
        as_iso = serializers.DateTimeField().to_representation
        return [as_iso(tick) for tick in scheduler.upcoming_fire_times(schedule, timezone.now())]


class AlertRuleSerializer(serializers.ModelSerializer):
    """An alert rule (queues/alerts.py documents each kind's threshold and window).
    The webhook URL passes the topics' SSRF rule (a model field validator)."""

    namespace = serializers.SlugRelatedField(slug_field="name", queryset=Namespace.objects.all(), allow_null=True,
                                             required=False)
    threshold = serializers.FloatField(required=False, min_value=0)

    class Meta:
        model = AlertRule
        fields = ["id", "name", "kind", "namespace", "queue_pattern", "threshold", "window_s", "cooldown_s", "emails",
                  "webhook_url", "enabled", "firing", "last_notified_at", "created_at"]
        read_only_fields = ["id", "firing", "last_notified_at", "created_at"]

    def validate(self, attrs: dict) -> dict:
        from queues import alerts

        kind = attrs.get("kind", getattr(self.instance, "kind", None))
        if "threshold" not in attrs and self.instance is None:  # each kind's own sensible default
            attrs["threshold"] = alerts.DEFAULT_THRESHOLDS.get(kind, 0)
        try:
            validators.validate_alert_threshold(kind, attrs.get("threshold", getattr(self.instance, "threshold", 0)))
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from None
        return attrs


class AlertEventSerializer(serializers.ModelSerializer):
    """One alert: fired, and resolved when resolved_at is set. `rule` is null for the
    notifier's own delivery_exhausted records (and once a rule is deleted)."""

    rule_name = serializers.CharField(source="rule.name", read_only=True, default=None)
    firing = serializers.SerializerMethodField()

    class Meta:
        model = AlertEvent
        fields = ["id", "rule", "rule_name", "kind", "namespace", "queue", "message", "details", "fired_at",
                  "resolved_at", "firing"]
        read_only_fields = fields

    def get_firing(self, event: AlertEvent) -> bool:
        return event.resolved_at is None and event.rule_id is not None

"""Serializers of the management API (/manage/v1/). The rules live in the
model fields' validators (queues/validators.py), shared with the Django admin."""
from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers

from queues import validators
from queues.models import Namespace, Topic


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

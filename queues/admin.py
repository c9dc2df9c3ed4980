"""Django admin registrations. Tokens are created on the namespace page (the
plain value is shown once there); here they can be inspected and revoked."""
from __future__ import annotations

from django.contrib import admin, messages

from queues import tokens
from queues.models import AlertEvent, AlertRule, Namespace, Schedule, Token, TokenLimit, Topic


@admin.register(Namespace)
class NamespaceAdmin(admin.ModelAdmin):
    list_display = ["name", "description", "created_at"]
    search_fields = ["name"]


@admin.register(Token)
class TokenAdmin(admin.ModelAdmin):
    list_display = ["namespace", "pool", "prefix", "description", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["pool", "revoked_at"]
    search_fields = ["namespace__name", "description", "prefix"]
    readonly_fields = ["namespace", "pool", "prefix", "digest", "derivation", "created_at", "created_by",
                       "last_used_at", "revoked_at"]
    fields = ["namespace", "pool", "description", *readonly_fields[2:]]
    actions = ["revoke"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset) -> None:
        count = tokens.revoke(list(queryset.values_list("id", flat=True)))
        self.message_user(request, f"Revoked {count} token(s).", messages.SUCCESS)


@admin.register(TokenLimit)
class TokenLimitAdmin(admin.ModelAdmin):
    list_display = ["token", "read", "write", "interval"]


@admin.register(Topic)
class TopicAdmin(admin.ModelAdmin):
    list_display = ["namespace", "queue", "callback_url", "method", "max_attempts", "backoff", "concurrency",
                    "paused"]
    list_filter = ["paused", "backoff", "method"]
    search_fields = ["namespace__name", "queue", "callback_url"]
    readonly_fields = ["signing_secret", "created_at", "updated_at"]


@admin.register(AlertRule)
class AlertRuleAdmin(admin.ModelAdmin):
    """The change form of an alert rule; the alerts page (/admin/queues/alerts/) lists
    them with their state, and the history. Thresholds per kind: queues/alerts.py."""

    list_display = ["name", "kind", "namespace", "queue_pattern", "threshold", "window_s", "cooldown_s", "enabled",
                    "firing", "last_notified_at"]
    list_filter = ["kind", "enabled", "firing"]
    search_fields = ["name", "namespace__name", "queue_pattern"]
    readonly_fields = ["firing", "last_notified_at", "created_at"]

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        if db_field.name == "webhook_url":  # Django 6's default; silences the transition warning
            kwargs["assume_scheme"] = "https"
        return super().formfield_for_dbfield(db_field, request, **kwargs)


@admin.register(AlertEvent)
class AlertEventAdmin(admin.ModelAdmin):
    list_display = ["fired_at", "kind", "namespace", "queue", "message", "resolved_at"]
    list_filter = ["kind"]
    readonly_fields = ["kind", "namespace", "queue", "message", "details", "fired_at", "resolved_at"]


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    """The change form of a schedule; the schedules page (/admin/queues/schedules/)
    lists them with their next fire times. Saving recomputes next_fire_at when the
    spec, time zone or enabled flag changed (Schedule.save)."""

    list_display = ["name", "namespace", "queue", "spec", "timezone", "enabled", "catch_up", "next_fire_at",
                    "last_fired_at"]
    list_filter = ["enabled", "catch_up", "namespace"]
    search_fields = ["name", "namespace__name", "queue", "spec"]
    readonly_fields = ["next_fire_at", "last_fired_at", "created_at"]

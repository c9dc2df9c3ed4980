"""Django admin registrations. Tokens are created on the namespace page (the
plain value is shown once there); here they can be inspected and revoked."""
from __future__ import annotations

from django.contrib import admin, messages
from django.utils import timezone

from queues import tokens
from queues.models import AlertEvent, Namespace, Token, TokenLimit, Topic


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
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        tokens.cache.clear()
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


@admin.register(AlertEvent)
class AlertEventAdmin(admin.ModelAdmin):
    list_display = ["fired_at", "kind", "namespace", "queue", "message", "resolved_at"]
    list_filter = ["kind"]
    readonly_fields = ["kind", "namespace", "queue", "message", "details", "fired_at", "resolved_at"]

"""Configuration that lives in the database: namespaces and their tokens.

Jobs never touch the database; they live in Redis (see engine.py).
"""
from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxLengthValidator, RegexValidator
from django.db import models
from django.db.models import Q

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

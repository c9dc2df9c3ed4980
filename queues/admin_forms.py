"""Forms of the web admin's dashboard pages (queues/admin_views.py).

Model forms reuse the models' field validators, so the page, the Django admin
and the management API apply the same rules (URL and SSRF guard, retry
expression, ranges)."""
from __future__ import annotations

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError

from queues import pools
from queues.models import Token, TokenLimit, Topic

MAX_SELECTED_IDS = 100


def pool_choices() -> list[tuple[str, str]]:
    return [(name, name) for name in pools.pool_names()]


class TokenCreateForm(forms.Form):
    required_css_class = "required"
    description = forms.CharField(max_length=Token._meta.get_field("description").max_length,
                                  help_text="Who or what uses this token.")
    pool = forms.ChoiceField(choices=pool_choices, initial=pools.DEFAULT_POOL)


class TokenLimitForm(forms.ModelForm):
    """lmstfy's limiter: at most `read` consumes and `write` publishes per `interval` s."""

    required_css_class = "required"

    class Meta:
        model = TokenLimit
        fields = ["read", "write", "interval"]
        help_texts = {"read": "Consumes per interval (0 = unlimited).",
                      "write": "Publishes per interval (0 = unlimited).",
                      "interval": "Seconds."}

    def clean(self) -> dict:
        data = super().clean()
        if data.get("interval") is not None and data["interval"] <= 0:
            self.add_error("interval", "The interval must be at least 1 second.")
        if (data.get("read") or 0) <= 0 and (data.get("write") or 0) <= 0:
            raise ValidationError("Limit reads or writes (or both), or remove the limit.")
        return data


class EmailListField(forms.CharField):
    """A JSON list of addresses in the model, comma-separated on the page."""

    def prepare_value(self, value) -> str:
        if isinstance(value, (list, tuple)):
            return ", ".join(value)
        return value or ""

    def to_python(self, value) -> list[str]:
        text = super().to_python(value) or ""
        return [part.strip() for part in text.replace("\n", ",").split(",") if part.strip()]


class TopicForm(forms.ModelForm):
    required_css_class = "required"
    pool = forms.ChoiceField(choices=pool_choices, initial=pools.DEFAULT_POOL)
    # An address typed without a scheme means https (the model's validators still run).
    callback_url = forms.URLField(max_length=2048, assume_scheme="https",
                                  help_text="http(s) only; private addresses are refused unless "
                                            "LMSTFY_ALLOW_PRIVATE_CALLBACKS=1.")
    alert_emails = EmailListField(required=False, help_text="Comma-separated addresses told when a job "
                                                            "runs out of attempts.")

    class Meta:
        model = Topic
        fields = ["namespace", "queue", "pool", "callback_url", "method", "headers", "timeout_ms",
                  "retry_expression", "max_attempts", "backoff", "min_backoff_s", "max_backoff_s", "concurrency",
                  "rate_per_s", "paused", "alert_emails", "description"]
        widgets = {
            "retry_expression": forms.Textarea(attrs={"rows": 2, "cols": 60, "spellcheck": "false",
                                                      "autocomplete": "off"}),
            "headers": forms.Textarea(attrs={"rows": 3, "cols": 60}),
            "description": forms.Textarea(attrs={"rows": 2, "cols": 60}),
        }
        help_texts = {
            "retry_expression": "True means “this attempt failed, retry”, e.g. {res.code} != 0 || {status} >= 500. "
                                "Empty: success is any 2xx.",
            "headers": 'Extra request headers as a JSON object, e.g. {"Authorization": "Bearer …"}.',
            "timeout_ms": "100 – 60 000 ms.",
            "rate_per_s": "Deliveries per second across all notifiers (0 = unlimited).",
            "concurrency": "Deliveries in flight at once across all notifiers.",
        }


class ExpressionTesterForm(forms.Form):
    expression = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2, "cols": 60,
                                                                               "spellcheck": "false"}),
                                 strip=False)
    status = forms.IntegerField(min_value=0, max_value=999, initial=200)
    body = forms.CharField(required=False, strip=False, widget=forms.Textarea(attrs={"rows": 4, "cols": 60}),
                           help_text="The response body the callback would answer (JSON or text).")


class AttemptFilterForm(forms.Form):
    OUTCOMES = [("", "any outcome"), ("success", "success"), ("retry", "retry"), ("dead", "dead")]

    job_id = forms.CharField(required=False, max_length=64)
    outcome = forms.ChoiceField(choices=OUTCOMES, required=False)


class JobIdsField(forms.MultipleChoiceField):
    """Job ids from checkboxes or links; whether each is in the dead letter is the engine's to check."""

    def valid_value(self, value: str) -> bool:
        return 0 < len(value) <= 64


class DeadSelectionForm(forms.Form):
    """Which dead jobs an action is about: the listed ids, the `oldest` N, or `all`."""

    ids = JobIdsField(required=False)
    oldest = forms.IntegerField(required=False, min_value=1, max_value=1_000_000)
    all = forms.BooleanField(required=False)
    ttl = forms.IntegerField(required=False, min_value=0, initial=settings.LMSTFY_DEFAULT_TTL, label="TTL (s)",
                             help_text="Seconds of life for respawned jobs (0 = never expire).")

    def clean(self) -> dict:
        data = super().clean()
        chosen = [bool(data.get("ids")), data.get("oldest") is not None, bool(data.get("all"))]
        if sum(chosen) != 1:
            raise ValidationError("Select dead jobs, give a number of oldest jobs, or choose all.")
        if len(data.get("ids") or []) > MAX_SELECTED_IDS:
            raise ValidationError(f"Select at most {MAX_SELECTED_IDS} jobs at once.")
        if data.get("ttl") is None:
            data["ttl"] = settings.LMSTFY_DEFAULT_TTL
        return data

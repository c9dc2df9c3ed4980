"""Field validators of the configuration models. Attached to the model fields,
so the Django admin and the management API (DRF model serializers) apply the
same rules."""
from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import validate_email

RESERVED_HEADER_PREFIXES = ("x-lmstfy-", "webhook-")
RESERVED_HEADERS = {"host", "content-length", "content-type", "transfer-encoding", "connection"}


def validate_queue_name(value: str) -> None:
    from queues import names

    error = names.names_error("ns", value)
    if error:
        raise ValidationError(error)


def validate_pool(value: str) -> None:
    from queues import pools

    if value not in pools.configured_urls():
        raise ValidationError(f"unknown pool {value!r}")


def validate_callback_url(value: str) -> None:
    from queues import delivery

    try:
        delivery.check_callback_url(value)
    except delivery.CallbackRefused as exc:
        raise ValidationError(str(exc)) from None


def validate_retry_expression(value: str) -> None:
    from queues.expressions import ExpressionError, parse

    if value.strip():
        try:
            parse(value)
        except ExpressionError as exc:
            raise ValidationError(str(exc)) from None


def validate_headers(value: object) -> None:
    if not isinstance(value, dict):
        raise ValidationError("headers must be a JSON object of name: value")
    for name, header_value in value.items():
        lowered = name.lower()
        if not isinstance(header_value, str):
            raise ValidationError(f"header {name!r} must have a string value")
        if lowered in RESERVED_HEADERS or lowered.startswith(RESERVED_HEADER_PREFIXES):
            raise ValidationError(f"header {name!r} is set by the notifier and cannot be overridden")
        if not name or any(c in name for c in " :\r\n\t") or any(c in header_value for c in "\r\n"):
            raise ValidationError(f"header {name!r} is not a valid HTTP header")


def validate_email_list(value: object) -> None:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValidationError("alert_emails must be a list of e-mail addresses")
    for address in value:
        validate_email(address)


def validate_backoff_range(min_backoff_s: int, max_backoff_s: int) -> None:
    if max_backoff_s < min_backoff_s:
        raise ValidationError({"max_backoff_s": "must be >= min_backoff_s"})


def validate_schedule_spec(value: str) -> None:
    """A 5-field cron expression (croniter) or `@every <n>s|m|h`."""
    from queues.scheduler import parse_every

    if value.strip().startswith("@every"):
        if parse_every(value) is None:
            raise ValidationError("use '@every <n>s', '@every <n>m' or '@every <n>h' with n >= 1")
        return
    from croniter import CroniterBadDateError, croniter

    if len(value.split()) != 5 or not croniter.is_valid(value):
        raise ValidationError("not a 5-field cron expression (minute hour day month weekday)")
    try:
        croniter(value).get_next()
    except CroniterBadDateError:  # valid fields that never meet, like "0 0 31 2 *"
        raise ValidationError("this cron expression never fires") from None


def validate_timezone(value: str) -> None:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationError(f"unknown IANA time zone {value!r}") from None


def validate_alert_threshold(kind: str, threshold: float) -> None:
    """delivery_failure_rate compares a share of failed attempts: a fraction, not a percent."""
    if kind == "delivery_failure_rate" and not 0 <= threshold <= 1:
        raise ValidationError({"threshold": "delivery_failure_rate takes a fraction between 0 and 1 (0.2 = 20 %)"})

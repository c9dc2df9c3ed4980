"""`manage.py bootstrap`: the first staff account, from LMSTFY_ADMIN_PASSWORD or
with a generated password printed once; Django's createsuperuser still works."""
from __future__ import annotations

import re
from io import StringIO

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import CommandError, call_command
from django.test import override_settings

pytestmark = pytest.mark.django_db

PASSWORD_IN_OUTPUT = re.compile(r"with password '([^']+)'")


def bootstrap() -> str:
    out = StringIO()
    call_command("bootstrap", stdout=out)
    return out.getvalue()


@override_settings(LMSTFY_ADMIN_USER="root", LMSTFY_ADMIN_PASSWORD="a-password-from-the-environment")
def test_it_creates_a_superuser_with_the_configured_password_and_does_not_print_it() -> None:
    output = bootstrap()

    user = get_user_model().objects.get()
    assert (user.username, user.is_superuser, user.is_staff) == ("root", True, True)
    assert authenticate(username="root", password="a-password-from-the-environment") == user
    assert "a-password-from-the-environment" not in output
    assert "root" in output


@override_settings(LMSTFY_ADMIN_USER="admin", LMSTFY_ADMIN_PASSWORD=None)
def test_it_prints_a_generated_password_once() -> None:
    output = bootstrap()

    found = PASSWORD_IN_OUTPUT.findall(output)
    assert len(found) == 1
    password = found[0]
    assert len(password) >= 20
    user = get_user_model().objects.get()
    assert user.is_superuser
    assert authenticate(username="admin", password=password) == user

    again = bootstrap()
    assert again == ""
    assert get_user_model().objects.count() == 1
    assert authenticate(username="admin", password=password) == user


@override_settings(LMSTFY_ADMIN_PASSWORD=None)
def test_two_installations_get_different_generated_passwords() -> None:
    first = PASSWORD_IN_OUTPUT.findall(bootstrap())
    get_user_model().objects.all().delete()
    second = PASSWORD_IN_OUTPUT.findall(bootstrap())
    assert first and second and first != second


@override_settings(LMSTFY_ADMIN_USER="admin", LMSTFY_ADMIN_PASSWORD="a-password-from-the-environment")
def test_it_does_nothing_once_a_superuser_exists() -> None:
    get_user_model().objects.create_superuser("someone", "", "their-own-password")

    assert bootstrap() == ""

    assert list(get_user_model().objects.values_list("username", flat=True)) == ["someone"]


@override_settings(LMSTFY_ADMIN_USER="admin", LMSTFY_ADMIN_PASSWORD="a-password-from-the-environment")
def test_it_refuses_clearly_when_the_admin_name_belongs_to_an_ordinary_user() -> None:
    ordinary = get_user_model().objects.create_user("admin", password="ordinary-password")

    with pytest.raises(CommandError, match="'admin'"):
        bootstrap()

    ordinary.refresh_from_db()
    assert not ordinary.is_superuser
    assert authenticate(username="admin", password="ordinary-password") == ordinary


def test_createsuperuser_noinput_reads_the_django_superuser_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DJANGO_SUPERUSER_USERNAME", "operator")
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "operator-password-1234")
    monkeypatch.setenv("DJANGO_SUPERUSER_EMAIL", "ops@example.com")

    call_command("createsuperuser", interactive=False, stdout=StringIO())

    user = get_user_model().objects.get()
    assert (user.username, user.email, user.is_superuser) == ("operator", "ops@example.com", True)
    assert authenticate(username="operator", password="operator-password-1234") == user
    assert bootstrap() == ""

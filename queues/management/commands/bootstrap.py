from __future__ import annotations

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = ("Create the first staff account: LMSTFY_ADMIN_USER / LMSTFY_ADMIN_PASSWORD, or a generated "
            "password printed once. Does nothing once any superuser exists.")

    def handle(self, *args, **options) -> None:
        users = get_user_model().objects
        if users.filter(is_superuser=True).exists():
            return
        username = settings.LMSTFY_ADMIN_USER
        if users.filter(username=username).exists():
            raise CommandError(f"A user named {username!r} exists but is not a superuser; make it one in the "
                               "admin, set LMSTFY_ADMIN_USER to another name, or use createsuperuser.")
        password = settings.LMSTFY_ADMIN_PASSWORD
        generated = password is None
        if generated:
            password = secrets.token_urlsafe(18)
        users.create_superuser(username=username, email="", password=password)
        if generated:
            self.stdout.write(self.style.WARNING(
                f"Created staff user {username!r} with password {password!r} -- shown once; "
                "change it in the admin or set LMSTFY_ADMIN_PASSWORD."))
        else:
            self.stdout.write(f"Created staff user {username!r} (password from LMSTFY_ADMIN_PASSWORD).")

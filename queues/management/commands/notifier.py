from __future__ import annotations

import logging
import os

from django.conf import settings
from django.core.management.base import BaseCommand

from queues.management.commands._loop import Loop
from queues.notifier import Notifier

log = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Push delivery: send ready jobs of active topics to their callback URLs."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--once", action="store_true", help="dispatch what is ready, wait for it, exit")
        parser.add_argument("--threads", type=int, default=None, help="concurrent deliveries (default: setting)")

    def handle(self, *args, once: bool = False, threads: int | None = None, **options) -> None:
        notifier = Notifier(threads)
        if once:
            # Everything ready now, not only the first batch of free seats.
            while notifier.dispatch_ready() or notifier.busy():
                notifier.wait_for_work(0.1)
            notifier.shutdown(grace_s=3600)
            return
        log.info("notifier started (%d delivery threads)", notifier.threads)
        loop = Loop("notifier")

        def work() -> float:
            if not notifier.dispatch_ready():
                notifier.wait_for_work()
            return 0.0

        loop.run(work)
        left = notifier.shutdown(settings.LMSTFY_NOTIFIER_GRACE_S)
        if left:
            log.warning("notifier: %d deliveries still running after the grace period; "
                        "their leases will bring the jobs back", left)
            os._exit(0)  # do not wait for the abandoned threads
        log.info("notifier stopped")

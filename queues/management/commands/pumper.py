from __future__ import annotations

import logging

from django.conf import settings
from django.core.management.base import BaseCommand

from queues import pools
from queues.management.commands._loop import Loop
from queues.pumper import Pumper

log = logging.getLogger(__name__)


class Command(BaseCommand):
    help = ("Move due jobs (delays, expired leases (TTR), ttl expiry) in every pool, fire due schedules "
            "and evaluate the alert rules.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--once", action="store_true", help="run one pass and exit")

    def handle(self, *args, once: bool = False, **options) -> None:
        pumper = Pumper(settings.LMSTFY_PUMP_INTERVAL)
        if once:
            self.stdout.write(f"handled {pumper.pump_once()} timers")
            fired = pumper.fire_schedules()
            if fired:  # only then: `handled N timers` alone stays the output scripts read
                self.stdout.write(f"fired {fired} schedules")
            alerted = pumper.alerts.run_logged()
            if alerted:
                self.stdout.write(f"{alerted} alerts fired or resolved")
            return
        pools.log_durability_warnings()
        log.info("pumper started (interval %.2fs, pools %s)", pumper.interval_s, ", ".join(pools.pool_names()))

        def work() -> float:
            pumper.pump_once()
            pumper.fire_schedules()
            pumper.evaluate_alerts()
            return pumper.seconds_until_due()

        Loop("pumper").run(work)
        pumper.alerts.stop()
        log.info("pumper stopped")

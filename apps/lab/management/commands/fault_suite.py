"""manage.py fault_suite [--json] [--only WORD ...]: faults on this portal and its lab, and
what is left after each (apps/lab/faults.py). It kills a lab daemon and restarts PostgreSQL
and Redis: run it through `./platter faults`, which gives it a portal of its own."""

from pathlib import Path

from django.core.management import BaseCommand, CommandError, call_command

from apps.lab import devservers


class Command(BaseCommand):
    help = (
        "Run the fault suite (kills daemons, restarts PostgreSQL and Redis): see ./platter faults"
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--json", action="store_true", help="print the outcomes as JSON")
        parser.add_argument("--report", help="also write the outcomes as JSON to this file")
        parser.add_argument("--only", nargs="*", help="only faults whose name has these words")
        parser.add_argument("--deadline", type=float, default=240, help="seconds per fault")

    def handle(self, *args, **options) -> None:
        from apps.lab import faults

        devservers.up()
        call_command("load_catalog", verbosity=0)
        suite = faults.Suite(log=lambda line: self.stderr.write(line), deadline=options["deadline"])
        outcomes = suite.run(options["only"])
        self.stdout.write(faults.as_json(outcomes) if options["json"] else faults.table(outcomes))
        if options["report"]:
            Path(options["report"]).write_text(faults.as_json(outcomes))
        if not all(outcome.ok for outcome in outcomes):
            raise CommandError("some faults left clusters unsettled or leaks behind")

from django.core.management.base import BaseCommand

from apps.health.doctor import diagnose


class Command(BaseCommand):
    help = "Explain what this machine lacks to run Platter and how to fix each thing."

    def handle(self, *args, **options):
        findings = diagnose()
        for finding in findings:
            mark = self.style.SUCCESS("ok  ") if finding.ok else self.style.ERROR("FIX ")
            line = f"{mark} {finding.what}"
            if not finding.ok:
                line += f"\n       -> {finding.fix}"
            self.stdout.write(line)
        missing = [f for f in findings if not f.ok]
        self.stdout.write(
            "\nall good" if not missing else f"\n{len(missing)} thing(s) to fix (see above)"
        )
        if missing:
            raise SystemExit(1)

"""manage.py bench_disks [NODE] [--set-kind]: fio on every free disk, one disk at a time."""

from django.core.management.base import BaseCommand, CommandError

from apps.inventory.models import Node


class Command(BaseCommand):
    help = (
        "Benchmark the free disks of NODE (default: every active node) with fio, one at a "
        "time, store MB/s and IOPS on the disks and flag those far below their siblings."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("node", nargs="?", help="node name (default: all active nodes)")
        parser.add_argument(
            "--set-kind",
            action="store_true",
            help="also set each disk's kind (hdd/ssd) from its random read IOPS, for nodes "
            "that do not report it",
        )

    def handle(self, *args, node: str | None, set_kind: bool, **options) -> None:
        from apps.inventory.benchmarks import bench_node
        from apps.nodes import NodeError

        if node:
            nodes = list(Node.objects.filter(name=node))
            if not nodes:
                names = ", ".join(Node.objects.values_list("name", flat=True)) or "none"
                raise CommandError(f"no node named {node!r} (nodes: {names})")
        else:
            nodes = list(Node.objects.filter(state=Node.State.ACTIVE))
        failed = False
        for record in nodes:
            try:
                report = bench_node(record, set_kind, say=self.stdout.write)
            except NodeError as error:
                self.stderr.write(str(error))
                failed = True
                continue
            if report.skipped:
                self.stdout.write(f"{record.name}: skipped (in use): {' '.join(report.skipped)}")
            failed = failed or bool(report.failed)
        from apps.inventory.models import Disk

        for disk in Disk.objects.exclude(slow_reason="").select_related("node"):
            self.stdout.write(self.style.WARNING(f"slow: {disk}: {disk.slow_reason}"))
        if failed:
            raise CommandError("some disks could not be measured (see above)")

"""manage.py discover_disks NODE: record the data disks mounted under a node's disk root."""

from django.core.management.base import BaseCommand, CommandError

from apps.inventory.models import Node


class Command(BaseCommand):
    help = "Find the disks mounted under NODE's disk root and create or update their records."

    def add_arguments(self, parser) -> None:
        parser.add_argument("node", help="node name")

    def handle(self, *args, node: str, **options) -> None:
        from apps.inventory.discovery import discover
        from apps.nodes import NodeError

        try:
            record = Node.objects.get(name=node)
        except Node.DoesNotExist:
            names = ", ".join(Node.objects.values_list("name", flat=True)) or "none"
            raise CommandError(f"no node named {node!r} (nodes: {names})") from None
        try:
            report = discover(record)
        except NodeError as error:
            raise CommandError(str(error)) from None
        for label, paths in (("created", report.created), ("updated", report.updated)):
            self.stdout.write(f"{label}: {len(paths)} {' '.join(paths)}".rstrip())
        if report.missing:
            self.stdout.write(self.style.WARNING(f"no longer mounted: {' '.join(report.missing)}"))

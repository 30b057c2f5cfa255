"""manage.py add_node NAME --endpoint URL: check a node answers, then register it."""

from django.core.management.base import BaseCommand, CommandError

from apps.inventory.models import Node
from apps.inventory.registration import (
    DEFAULT_DISK_ROOT,
    RegistrationError,
    check_name,
    register_node,
)


class Command(BaseCommand):
    help = (
        "Connect to a node's Docker Engine API (tcp:// with mutual TLS, or ssh://), check its "
        "version, read its cores and memory, and register it. New nodes start in maintenance: "
        "nothing is placed on them until their disks are discovered and an admin activates them."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("name", help="node name (lower-case letters, digits, hyphens)")
        parser.add_argument(
            "--endpoint", required=True, help="tcp://HOST:2376 or ssh://USER@HOST[:PORT]"
        )
        parser.add_argument(
            "--tls-dir", default="", help="folder with ca.pem, cert.pem, key.pem (tcp:// only)"
        )
        parser.add_argument(
            "--disk-root",
            default=DEFAULT_DISK_ROOT,
            help=f"where the node mounts its data disks (default {DEFAULT_DISK_ROOT})",
        )
        parser.add_argument(
            "--network-parent", default="", help="host interface the cluster network hangs off"
        )
        parser.add_argument("--cores", type=int, help="cores to offer (default: all the node has)")
        parser.add_argument(
            "--memory-mb", type=int, help="memory to offer (default: all the node has)"
        )
        parser.add_argument(
            "--state",
            choices=[Node.State.MAINTENANCE, Node.State.ACTIVE],
            default=Node.State.MAINTENANCE,
            help="maintenance (default: until disks are discovered and measured) or active",
        )

    def handle(self, *args, name: str, endpoint: str, tls_dir: str, **options) -> None:
        from apps.nodes.probe import ProbeError, probe

        try:
            check_name(name)
            facts = probe(endpoint, tls_dir)
        except (RegistrationError, ProbeError) as error:
            raise CommandError(f"{name}: {error}") from None
        self.stdout.write(
            f"{name}: Docker {facts.server_version} (API {facts.api_version}) on "
            f"{facts.operating_system}, {facts.architecture}, docker root {facts.docker_root}, "
            f"{facts.cores} cores, {facts.memory_mb} MB"
        )
        try:
            node = register_node(
                name,
                endpoint,
                tls_dir=tls_dir if endpoint.startswith("tcp://") else "",
                cores=options["cores"] or facts.cores,
                memory_mb=options["memory_mb"] or facts.memory_mb,
                disk_root=options["disk_root"],
                network_parent=options["network_parent"],
                state=options["state"],
                labels={"arch": facts.architecture},
            )
        except RegistrationError as error:
            raise CommandError(f"{name}: {error}") from None
        self.stdout.write(self.style.SUCCESS(f"registered node {node.name} ({node.state})"))
        if not node.network_parent:
            self.stdout.write(
                self.style.WARNING(
                    "no --network-parent: set the host interface for the cluster network in "
                    "the admin before placing clusters here"
                )
            )
        self.stdout.write(
            "next:\n"
            f"  manage.py discover_disks {name}   # file systems mounted under {node.disk_root}\n"
            f"  manage.py bench_disks {name}      # fio on each disk, flags slow ones\n"
            f"  then activate it: admin > Nodes > {name} > 'Activate', or "
            f"POST /api/v1/nodes/{node.id}/undrain"
        )

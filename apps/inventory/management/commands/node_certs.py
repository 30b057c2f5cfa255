"""manage.py node_certs NODE --address HOST: TLS files for a node's dockerd from the portal CA."""

import json
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from apps.inventory.models import Node
from apps.nodes import pki

# Where the instructions put the files on the node.
NODE_TLS_DIR = "/etc/docker/platter"
DOCKER_TLS_PORT = 2376


def daemon_json() -> str:
    return json.dumps(
        {
            "tlsverify": True,
            "tlscacert": f"{NODE_TLS_DIR}/ca.pem",
            "tlscert": f"{NODE_TLS_DIR}/server-cert.pem",
            "tlskey": f"{NODE_TLS_DIR}/server-key.pem",
            "hosts": ["unix:///var/run/docker.sock", f"tcp://0.0.0.0:{DOCKER_TLS_PORT}"],
        },
        indent=2,
    )


# Debian's docker.service runs `dockerd -H fd://`; a -H flag and "hosts" in daemon.json
# together make dockerd refuse to start, so the unit's command loses its -H.
SYSTEMD_OVERRIDE = """[Service]
ExecStart=
ExecStart=/usr/sbin/dockerd --containerd=/run/containerd/containerd.sock $DOCKER_OPTS"""


INSTRUCTIONS = """Node files for {node} (valid for {addresses}) in {out}:
{listing}
server-key.pem is the node's private key: copy it to the node only, and keep it 0600.

1. Copy them to the node (as root):
  ssh root@{first} install -d -m 0700 {dir}
  scp {files} root@{first}:{dir}/
  ssh root@{first} chmod 0600 {dir}/server-key.pem

2. On the node, /etc/docker/daemon.json:
{daemon_json}

3. On the node, Debian's docker.service starts dockerd with -H fd://, which conflicts with
   "hosts" in daemon.json (dockerd refuses to start); override it in
   /etc/systemd/system/docker.service.d/platter.conf:
{override}
   then: systemctl daemon-reload && systemctl restart docker
   Open port {port}/tcp to the portal's workers only.

4. The portal presents its client certificate from tls_dir {client_dir}"""


class Command(BaseCommand):
    help = (
        "Issue NODE's dockerd server certificate (for the given addresses) from the portal CA, "
        "make sure the portal's client certificate exists, and print how to set up the node."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("node", help="node name")
        parser.add_argument(
            "--address",
            action="append",
            required=True,
            dest="addresses",
            help="an IP address or DNS name the portal reaches the node by (repeat for more)",
        )
        parser.add_argument(
            "--out", help="folder for the node's files (default PKI_DIR/nodes/NODE)"
        )

    def handle(self, *args, node: str, addresses: list[str], out: str | None, **options) -> None:
        out_folder = Path(out) if out else Path(settings.PKI_DIR) / "nodes" / node
        pki.issue_node_certificate(node, addresses, out_folder)
        client_dir = pki.portal_client_dir()
        self.stdout.write(
            INSTRUCTIONS.format(
                node=node,
                addresses=", ".join(addresses),
                first=addresses[0],
                listing="\n".join(f"  {out_folder / name}" for name in pki.NODE_FILES),
                files=" ".join(str(out_folder / name) for name in pki.NODE_FILES),
                out=out_folder,
                dir=NODE_TLS_DIR,
                daemon_json=daemon_json(),
                override=SYSTEMD_OVERRIDE,
                port=DOCKER_TLS_PORT,
                client_dir=client_dir,
            )
        )
        self._point_node_at(node, f"tcp://{addresses[0]}:{DOCKER_TLS_PORT}", client_dir)

    def _point_node_at(self, name: str, endpoint: str, client_dir: Path) -> None:
        """A node in maintenance (being set up) gets the portal's tls_dir now; a node in use
        keeps its own until its dockerd runs with the new files."""
        node = Node.objects.filter(name=name).first()
        if node is None:
            self.stdout.write(
                f"   register it: manage.py add_node {name} --endpoint {endpoint} "
                f"--tls-dir {client_dir}"
            )
        elif node.transport != "tcp":
            self.stdout.write(f"   node {name} is reached over {node.transport}://: unchanged")
        elif node.tls_dir == str(client_dir):
            self.stdout.write(f"   node {name} already uses it")
        elif node.state == Node.State.MAINTENANCE:
            Node.objects.filter(id=node.id).update(tls_dir=str(client_dir))
            self.stdout.write(self.style.SUCCESS(f"   node {name} now uses it"))
        else:
            self.stdout.write(
                f"   node {name} is {node.state} and keeps tls_dir {node.tls_dir}: once its "
                f"dockerd runs with the new files, set tls_dir to {client_dir} in the admin"
            )

"""The lab's image registry, as a site has one: CNCF Distribution (Debian's docker-registry).

The first node builds an image and pushes it once; every other node pulls it, in parallel and
sharing layers, as production nodes do (apps/products/images/publish.py, the same steps as
`manage.py product_images push`).
- **TLS from the lab's CA**, on an address of its own (on a bridge with no ports): not a loopback
  address, because Docker takes any registry on 127.0.0.0/8 as insecure and never checks its
  certificate there. The nodes trust the CA through /etc/docker/certs.d/<host:port>/ca.crt,
  which the daemons read at every pull.
- **A password** (htpasswd, bcrypt), given to the daemons with each pull: a tenant, root in
  its container, that routes its way to the address can neither read nor push.
- **Its storage is a cache that `lab down` keeps** (LAB_IMAGE_CACHE_DIR): images are tagged by
  their recipe's content hash, so a later `lab up` pulls what is unchanged and builds only
  what changed. The registry process, its link and its certs.d folder go with the lab.
"""

from __future__ import annotations

import ipaddress
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import bcrypt
from django.conf import settings

from apps.nodes import pki
from apps.products.images.build import BuildError
from apps.products.images.publish import Registry

from . import host
from .host import LabError
from .nodes import LabSpec

PORT = 5443
USERNAME = "platter-lab"
CERTS_D = Path("/etc/docker/certs.d")  # where every dockerd on the machine looks for a CA
START_SECONDS = 60


@dataclass(frozen=True)
class LabRegistry:
    spec: LabSpec

    @property
    def address(self) -> str:
        """The first address of the last /24 of the lab's segment range (its segments take
        the first ones), so two labs on the machine never share it."""
        pool = ipaddress.IPv4Network(self.spec.segments_subnet)
        return str(list(pool.subnets(new_prefix=24))[-1].network_address + 1)

    @property
    def host(self) -> str:
        return f"{self.address}:{PORT}"

    @property
    def link(self) -> str:
        return f"{self.spec.link_prefix}r00"  # segments.link_pattern covers it

    @property
    def folder(self) -> Path:
        return self.spec.home / "registry"

    @property
    def pidfile(self) -> Path:
        return self.folder / "registry.pid"

    @property
    def certs_d(self) -> Path:
        return CERTS_D / self.host

    @property
    def storage(self) -> Path:
        return Path(settings.LAB_IMAGE_CACHE_DIR) / "registry"

    def stored(self, repository: str, tag: str) -> bool:
        """Whether the storage holds that tag, read from its files (the registry need not
        run: `lab stage` asks before the lab is up, to stage only what must be built)."""
        tags = self.storage / "docker/registry/v2/repositories" / repository / "_manifests/tags"
        return (tags / tag / "current" / "link").is_file()

    def access(self) -> Registry:
        return Registry(
            self.host,
            USERNAME,
            (self.folder / "password").read_text().strip(),
            self.folder / "tls" / "ca.pem",
        )


def ensure_running(spec: LabSpec) -> tuple[Registry, bool]:
    """The lab's registry, started unless it runs; (how to reach it, whether this call
    started it: the caller's undo then stops it)."""
    registry = LabRegistry(spec)
    _ensure_files(registry)
    _ensure_link(registry)
    if host.pid_alive(registry.pidfile):
        _wait(registry, None)
        return registry.access(), False
    process = _start(registry)
    try:
        _wait(registry, process)
    except BaseException:
        stop(spec)  # not left behind by a failed start: no undo step names it yet
        raise
    return registry.access(), True


def _ensure_files(registry: LabRegistry) -> None:
    folder = pki.private_folder(registry.folder)
    tls = folder / "tls"
    if not (tls / "cert.pem").exists():
        pki.issue(
            registry.spec.home / "pki" / "ca", tls, "platter-lab-registry",
            server_names=[registry.address],
        )  # fmt: skip
    password_file = folder / "password"
    if not password_file.exists():
        password_file.write_text(secrets.token_urlsafe(24) + "\n")
        password_file.chmod(0o600)
        # The lowest cost: the registry checks the hash at every request (each layer of each
        # pull), and a random 32-character password needs no slow hash to resist guessing.
        hashed = bcrypt.hashpw(password_file.read_text().strip().encode(), bcrypt.gensalt(rounds=4))
        (folder / "htpasswd").write_text(f"{USERNAME}:{hashed.decode()}\n")
    registry.storage.mkdir(parents=True, exist_ok=True)
    (folder / "config.yml").write_text(
        f"""version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: {registry.storage}
  delete:
    enabled: true
auth:
  htpasswd:
    realm: platter-lab
    path: {folder / "htpasswd"}
http:
  addr: {registry.host}
  tls:
    certificate: {tls / "cert.pem"}
    key: {tls / "key.pem"}
"""
    )
    registry.certs_d.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(tls / "ca.pem", registry.certs_d / "ca.crt")


def _ensure_link(registry: LabRegistry) -> None:
    # A bridge with no ports: this machine kind's kernel has no dummy links.
    host.ensure_bridge(registry.link)
    host.run("ip", "addr", "replace", f"{registry.address}/32", "dev", registry.link)
    host.run("ip", "link", "set", registry.link, "up")


def _start(registry: LabRegistry) -> subprocess.Popen[bytes]:
    program = shutil.which("docker-registry")
    if not program:
        raise LabError("docker-registry is not installed: ./platter installs its Debian package")
    log = open(registry.folder / "registry.log", "ab")  # noqa: SIM115 (handed to the process)
    # Its own session: Ctrl-C in the terminal that ran `lab up` must not stop it. Its command
    # line names the lab's home, so `lab down`'s sweep finds it whatever else is lost.
    process = subprocess.Popen(
        [program, "serve", str(registry.folder / "config.yml")],
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    log.close()
    registry.pidfile.write_text(f"{process.pid}\n")
    return process


def _wait(registry: LabRegistry, process: subprocess.Popen[bytes] | None) -> None:
    """Until it answers. `process`: the one this call started, asked directly whether it
    exited (its pidfile's command line is the parent's until the exec, so reading /proc
    then would take a starting registry for a dead one)."""
    access = registry.access()
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            access.has("platter/probe", "none")
            return
        except BuildError as error:
            exited = process.poll() is not None if process else not host.pid_alive(registry.pidfile)
            if time.monotonic() > deadline or exited:
                said = _log_tail(registry)
                raise LabError(
                    f"the lab's registry did not answer at {registry.host}: {error}; "
                    f"its log ends: {said}"
                ) from error
        time.sleep(0.2)


def _log_tail(registry: LabRegistry) -> str:
    try:
        lines = (registry.folder / "registry.log").read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(lines[-3:])[-600:] or "(nothing)"


def stop(spec: LabSpec) -> None:
    """The registry's process, link and certs.d folder gone (its storage, the cache, stays)."""
    registry = LabRegistry(spec)
    host.stop_process(registry.pidfile, "the lab's registry", seconds=10)
    if host.link_exists(registry.link):
        host.delete_link(registry.link)
    shutil.rmtree(registry.certs_d, ignore_errors=True)

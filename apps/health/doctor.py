"""`manage.py doctor`: what this machine lacks to run Platter, and how to fix each thing."""

import os
import shutil
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from apps.inventory.models import Node
from apps.nodes import pki

from .checks import check_database, check_node, check_redis


@dataclass
class Finding:
    what: str
    ok: bool
    fix: str = ""


# (executable, Debian package) the lab and the local services need.
TOOLS = [
    ("dockerd", "docker.io"),
    ("docker", "docker.io"),
    ("redis-server", "redis-server"),
    ("sshd", "openssh-server"),
    ("ssh", "openssh-client"),
    ("ip", "iproute2"),
    ("losetup", "util-linux"),
    ("mkfs.ext4", "e2fsprogs"),
    ("mkfs.xfs", "xfsprogs"),
    ("mkfs.btrfs", "btrfs-progs"),  # lab data-roots on kernels without XFS quotas
    ("busybox", "busybox-static"),
    ("fio", "fio"),
]


def _which(tool: str) -> str | None:
    return shutil.which(tool) or next(
        (str(p) for d in ("/usr/sbin", "/sbin") if (p := Path(d) / tool).exists()), None
    )


def machine_findings() -> list[Finding]:
    findings = [
        Finding(
            f"Python {sys.version_info.major}.{sys.version_info.minor}",
            sys.version_info >= (3, 11),
            "Python 3.11 or newer is needed (Debian 12's python3)",
        ),
        Finding(
            "running as root",
            os.geteuid() == 0,
            "the lab starts dockerd, loop devices and mounts: run ./platter as root",
        ),
    ]
    for tool, package in TOOLS:
        findings.append(
            Finding(f"{tool} installed", _which(tool) is not None, f"apt-get install -y {package}")
        )
    postgres_ok = any(Path("/usr/lib/postgresql").glob("*/bin/initdb")) or bool(_which("initdb"))
    findings.append(Finding("PostgreSQL server", postgres_ok, "apt-get install -y postgresql"))
    findings.append(
        Finding(
            "loop devices",
            Path("/dev/loop-control").exists(),
            "load the loop module: modprobe loop",
        )
    )
    findings.append(
        Finding(
            "cgroup blkio controller",
            Path("/sys/fs/cgroup/blkio").exists()
            or Path("/sys/fs/cgroup/io.max").exists()
            or Path("/sys/fs/cgroup/cgroup.controllers").exists(),
            "per-disk I/O caps need the blkio (v1) or io (v2) cgroup controller",
        )
    )
    return findings


def service_findings() -> list[Finding]:
    database, redis = check_database(), check_redis()
    return [
        Finding(
            f"database {settings.DATABASES['default']['HOST']}:"
            f"{settings.DATABASES['default']['PORT']}",
            database.ok,
            f"{database.detail} - start it with: .venv/bin/python -m apps.lab.devservers up",
        ),
        Finding(
            f"Redis {settings.REDIS_URL}",
            redis.ok,
            f"{redis.detail} - start it with: .venv/bin/python -m apps.lab.devservers up",
        ),
    ]


def node_findings() -> list[Finding]:

    findings = []
    for node in Node.objects.all():
        result = check_node(node)
        fix = "start the lab: ./platter lab up" if node.labels.get("lab") else result.detail
        findings.append(Finding(f"node {node.name} ({node.endpoint})", result.ok, fix))
    if not findings:
        findings.append(Finding("nodes registered", False, "./platter lab up, or add real nodes"))
    return findings


# A node certificate this close to its end is reported, leaving time to issue new files.
CERTIFICATE_WARN_DAYS = 30


def credential_findings() -> list[Finding]:
    """The TLS files of every tcp:// node: all there, and not about to expire (the files are
    looked at, never shown)."""
    soon = timezone.now() + timedelta(days=CERTIFICATE_WARN_DAYS)
    findings = []
    for node in Node.objects.filter(endpoint__startswith="tcp://"):
        status = pki.tls_status(node.tls_dir)
        renew = (
            "./platter lab down && ./platter lab up"
            if node.labels.get("lab")
            else f"manage.py node_certs {node.name} --address HOST, then copy the files"
        )
        if status.missing:
            where = status.folder or "no tls_dir"
            findings.append(
                Finding(
                    f"node {node.name} TLS files ({where})",
                    False,
                    f"missing {', '.join(status.missing)}: {renew}",
                )
            )
            continue
        until = f"{status.expires:%Y-%m-%d}" if status.expires else "unreadable"
        ok = status.expires is not None and status.expires > soon
        findings.append(
            Finding(
                f"node {node.name} certificates valid until {until}", ok, f"renew them: {renew}"
            )
        )
    return findings


def diagnose() -> list[Finding]:
    services = service_findings()
    database_ok = services[0].ok
    nodes = node_findings() + credential_findings() if database_ok else []
    return machine_findings() + services + nodes

"""The lab's base image (no registry needed) and its cluster network on each node."""

import io
import ipaddress
import shutil
import tarfile
from pathlib import Path

import docker
from django.conf import settings

from workers import drivers

from . import host
from .daemons import local_client
from .nodes import LabNode, bridge_name, state_dir


def build_base_image_tar() -> Path:
    """A busybox-static root file system as a tar, imported into each node with no registry."""
    tar_path = state_dir() / "lab-base.tar"
    if tar_path.exists():
        return tar_path
    busybox = shutil.which("busybox") or "/bin/busybox"
    applets = host.run(busybox, "--list-full").stdout.split()
    tmp = tar_path.with_suffix(".tmp")
    with tarfile.open(tmp, "w") as tar:

        def add_dir(name: str, mode: int = 0o755) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)

        def add_file(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))

        for folder in (
            "bin",
            "sbin",
            "usr",
            "usr/bin",
            "usr/sbin",
            "etc",
            "data",
            "root",
            "var",
            "proc",
            "sys",
            "dev",
        ):
            add_dir(folder)
        add_dir("tmp", 0o1777)
        tar.add(busybox, arcname="bin/busybox")
        for applet in applets:
            if applet != "bin/busybox":
                link = tarfile.TarInfo(applet)
                link.type, link.linkname = tarfile.SYMTYPE, "/bin/busybox"
                tar.addfile(link)
        add_file(
            "etc/passwd", b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n"
        )
        add_file("etc/group", b"root:x:0:\nnogroup:x:65534:\n")
    tmp.rename(tar_path)
    return tar_path


def ensure_image(node: LabNode, tar_path: Path) -> None:
    client = local_client(node, timeout=120)
    try:
        client.images.get(settings.LAB_IMAGE)
        return
    except docker.errors.ImageNotFound:
        pass
    repository, tag = settings.LAB_IMAGE.rsplit(":", 1)
    client.api.import_image(
        src=str(tar_path), repository=repository, tag=tag, changes=['CMD ["/bin/sh"]']
    )


def lab_network_spec() -> dict:
    subnet = ipaddress.ip_network(settings.LAB_SUBNET)
    hosts = list(subnet.hosts())
    return {
        "name": "lab",
        "subnet": str(subnet),
        "gateway": str(hosts[0]),
        "first_address": str(hosts[9]),
        "last_address": str(hosts[-6]),
    }


def ensure_cluster_network(node: LabNode) -> None:
    spec = lab_network_spec()
    drivers.ensure_macvlan_network(
        local_client(node),
        settings.NODE_NETWORK_NAME,
        spec["subnet"],
        spec["gateway"],
        bridge_name(),
    )

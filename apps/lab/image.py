"""The lab's base image (no registry needed) and its cluster network on each node."""

import io
import ipaddress
import shutil
import tarfile
from pathlib import Path

from django.conf import settings

from apps import nodes

from . import host
from .daemons import local_endpoint, local_node
from .nodes import LabNode, state_dir


def build_base_image_tar(folder: Path | None = None) -> Path:
    """A busybox-static root file system as a tar, imported into each node with no registry."""
    tar_path = (folder or state_dir()) / "lab-base.tar"
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

        for name in (
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
            add_dir(name)
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


def shared_libraries(binary: str) -> list[str]:
    """The files `ldd` says a binary loads (the paths it resolves, and the loader itself)."""
    paths = []
    for line in host.run("ldd", binary).stdout.splitlines():
        parts = line.split()
        if "=>" in parts:
            target = parts[parts.index("=>") + 1]
            if target.startswith("/"):
                paths.append(target)
        elif parts and parts[0].startswith("/"):
            paths.append(parts[0])  # the dynamic loader
    return paths


def build_fio_image_tar(folder: Path | None = None) -> Path:
    """The lab's benchmark image: the base image plus the host's fio and the libraries it
    loads, at the same paths (no registry here; production names a public fio image)."""
    return build_tool_image_tar("fio", "lab-fio.tar", folder)


def build_firewall_image_tar(folder: Path | None = None) -> Path:
    """The lab's firewall helper (NODE_FIREWALL_IMAGE): the base image plus the host's nft
    (production builds deploy/images/node-firewall from Debian's nftables)."""
    return build_tool_image_tar("nft", "lab-nft.tar", folder)


def build_tool_image_tar(tool: str, file_name: str, folder: Path | None = None) -> Path:
    """The base image plus one of the host's programs and the libraries it loads, at the same
    paths."""
    tar_path = (folder or state_dir()) / file_name
    if tar_path.exists():
        return tar_path
    program = shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin")
    if not program:
        raise host.LabError(f"{tool} is not installed: ./platter installs its Debian package")
    base = build_base_image_tar(folder)
    tmp = tar_path.with_suffix(".tmp")
    with tarfile.open(base) as source, tarfile.open(tmp, "w") as tar:
        for member in source.getmembers():
            tar.addfile(member, source.extractfile(member) if member.isfile() else None)
        names = {member.name for member in source.getmembers()}
        for path in [program, *shared_libraries(program)]:
            real = Path(path).resolve()
            # Parent folders first (tar readers create them anyway; docker import wants them).
            for parent in reversed(Path(path).parents[:-1]):
                if str(parent).lstrip("/") not in names:
                    info = tarfile.TarInfo(str(parent).lstrip("/"))
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
                    names.add(info.name)
            arcname = path.lstrip("/")
            if arcname not in names:
                tar.add(str(real), arcname=arcname)
                names.add(arcname)
    tmp.rename(tar_path)
    return tar_path


def ensure_image(node: LabNode, tar_path: Path, image: str = "") -> None:
    image = image or settings.LAB_IMAGE
    client = local_node(node, timeout=120)
    if not client.has_image(image):
        client.import_image(tar_path, image, changes=['CMD ["/bin/sh"]'])


# A lab node holds at most LAB_DISKS_PER_NODE instances; 28 addresses cover 4 full nodes.
LAB_FIRST_ADDRESS_INDEX = 9
LAB_ADDRESSES_PER_SLOT = 28


def lab_network_spec() -> dict:
    """The lab's flat network on its main bridge: no portal's clusters use it (they get
    segments, apps/lab/segments.py); bench/ runs raw `docker run` baselines on it."""
    subnet = ipaddress.ip_network(settings.LAB_SUBNET)
    hosts = list(subnet.hosts())
    # Portals sharing the lab (the dev portal, parallel test runs) each hand out their own
    # slice of the subnet, so their containers never claim the same address on the bridge.
    first = LAB_FIRST_ADDRESS_INDEX + settings.LAB_ADDRESS_SLOT * LAB_ADDRESSES_PER_SLOT
    last = first + LAB_ADDRESSES_PER_SLOT - 1
    if last >= len(hosts) - 1:
        raise ValueError(f"PLATTER_LAB_ADDRESS_SLOT={settings.LAB_ADDRESS_SLOT} is past {subnet}")
    return {
        "name": "lab",
        "subnet": str(subnet),
        "gateway": str(hosts[0]),
        "first_address": str(hosts[first]),
        "last_address": str(hosts[last]),
    }


def ensure_cluster_network(node: LabNode) -> None:
    spec = lab_network_spec()
    nodes.client(local_endpoint(node)).ensure_network(
        settings.NODE_NETWORK_NAME, spec["subnet"], spec["gateway"], node.spec.bridge
    )

"""The lab cleans up after itself, proven on tiny labs of their own (one or two nodes, small
disks, no product images) next to the checkout's lab, with addresses and subnets that cannot
meet it. What is left is read from the machine with its own tools (ps, /proc/mounts,
losetup, ip link), never from the lab's records."""

import os
import shutil
import signal
import socket
import tempfile
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from apps.lab import clash, lab
from apps.lab.daemons import local_endpoint
from apps.lab.host import LabError
from apps.lab.nodes import LabSpec, lab_nodes
from apps.lab.tests.machine import machine_holds
from apps.nodes import engine

pytestmark = pytest.mark.lab

SLOT = settings.LAB_ADDRESS_SLOT  # parallel test runs each take their own addresses


def tiny_spec(home: Path, **fields) -> LabSpec:
    defaults = {
        "address_prefix": f"127.0.{40 + SLOT}.",
        "nodes": 1,
        "ssh_node": False,
        "disks_per_node": 2,
        "disk_size_mb": 32,
        "ssd_per_node": 1,
        "segments_subnet": f"10.{240 + SLOT}.0.0/16",
        "segments_per_slot": 1,
        "slots": 1,
        "products": (),
    }
    return LabSpec.at(home, **{**defaults, **fields})


@pytest.fixture
def scratch():
    """Folders for tiny labs, outside pytest's tmp_path (dockerd's overlay needs a real disk);
    whatever a failing test left there is taken down afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="platter-tinylab-", dir="/var/tmp"))
    made: list[LabSpec] = []
    yield folder, made
    for spec in made:
        lab.teardown(spec, log=lambda line: None)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def tiny(scratch):
    """make(name, **fields) -> the spec of a tiny lab under the scratch folder."""
    folder, made = scratch

    def make(name: str = "a", **fields) -> LabSpec:
        spec = tiny_spec(folder / name / "lab", **fields)
        made.append(spec)
        assert machine_holds(spec) == [], "a tiny lab must start from nothing"
        return spec

    return make


def run_container(spec: LabSpec, node_index: int) -> None:
    """A long-running container with the node's first disk bind-mounted, as a cluster has."""
    node = lab_nodes(spec)[node_index]
    disk = node.disk_paths(1)[1]
    engine.connect(local_endpoint(node).endpoint).containers.run(
        settings.LAB_IMAGE,
        ["sh", "-c", f"while :; do sleep 1; done; echo tinylab-{spec.key}"],
        volumes={str(disk): {"bind": "/data/1", "mode": "rw"}},
        network_mode="none",
        detach=True,
        name=f"probe-{uuid.uuid4().hex[:6]}",
    )


@pytest.mark.django_db
@pytest.mark.parametrize("failing", ["the ssh node's network", "the inventory"])
def test_a_failure_midway_through_up_takes_back_everything_it_started(tiny, monkeypatch, failing):
    spec = tiny(ssh_node=True)
    seen = {}

    def fail(*args, **kwargs):
        seen["held"] = machine_holds(spec)
        raise LabError("forced failure")

    if failing == "the inventory":
        monkeypatch.setattr(lab, "register", fail)
    else:
        real = lab.ensure_cluster_network
        monkeypatch.setattr(
            lab, "ensure_cluster_network", lambda n: fail() if n.over_ssh else real(n)
        )

    with pytest.raises(LabError, match=r"lab up failed: forced failure\. What this run had"):
        lab.up(log=lambda line: None, spec=spec)

    # It had started real things (two daemons with their containerd, mounted disks, links)...
    started = "\n".join(seen["held"])
    assert started.count("dockerd --host") == 2 and "loop" in started and "link" in started
    if failing == "the inventory":
        assert "sshd" in started and "ssh config" in started
    # ...and nothing of it is left.
    assert machine_holds(spec) == []
    assert not spec.home.exists() and not spec.run_dir.exists()


@pytest.mark.django_db
def test_down_removes_a_lab_whose_daemon_was_killed_and_whose_socket_is_gone(tiny):
    spec = tiny(nodes=2, ssh_node=True)
    lab.up(log=lambda line: None, spec=spec)
    first, second, _ = lab_nodes(spec)
    run_container(spec, 0)
    run_container(spec, 1)
    os.kill(int(first.pidfile.read_text()), signal.SIGKILL)
    second.socket.unlink()

    # The killed daemon's containerd, shim and container still run, its mounts stay mounted.
    held = "\n".join(machine_holds(spec))
    assert f"tinylab-{spec.key}" in held and f"{first.exec_root}/containerd" in held

    lab.down(log=lambda line: None, spec=spec)

    assert machine_holds(spec) == []


@pytest.mark.django_db
def test_down_of_a_lab_that_never_came_up_is_quiet(tiny):
    spec = tiny()
    lab.down(log=lambda line: None, spec=spec)
    assert machine_holds(spec) == []


@pytest.mark.django_db
def test_a_second_lab_on_the_same_addresses_or_subnets_is_named_with_what_to_do(tiny):
    first = tiny("first")
    lab.up(log=lambda line: None, spec=first)
    pid = int(lab_nodes(first)[0].pidfile.read_text())

    same_addresses = tiny("second", segments_subnet=f"10.{230 + SLOT}.0.0/16")
    with pytest.raises(LabError) as refused:
        lab.up(log=lambda line: None, spec=same_addresses)
    assert str(refused.value) == (
        f"the lab addresses {first.address_prefix}1 are held by the lab of {first.home} "
        f"(pid {pid}); run ./platter lab down there, or give this lab addresses of its own "
        "with PLATTER_LAB_ADDRESS_PREFIX"
    )
    assert machine_holds(same_addresses) == []

    same_subnets = tiny("third", address_prefix=f"127.0.{50 + SLOT}.")
    with pytest.raises(LabError) as refused:
        lab.up(log=lambda line: None, spec=same_subnets)
    assert str(refused.value) == (
        f"10.{240 + SLOT}.0.0/24 is already routed through {first.link_prefix}h00, a link of "
        f"the lab of {first.home}: run ./platter lab down there, or give this lab a "
        "PLATTER_LAB_SEGMENTS_SUBNET of its own"
    )
    assert machine_holds(same_subnets) == []

    assert lab.is_up(first)  # the first lab was not touched
    lab.down(log=lambda line: None, spec=first)
    assert machine_holds(first) == []


def test_a_lab_address_held_by_another_program_is_named():
    spec = tiny_spec(Path("/var/tmp/platter-never-made/lab"), address_prefix="127.0.39.")
    with socket.socket() as listener:
        listener.bind(("127.0.39.1", 2376))
        listener.listen()
        with pytest.raises(LabError) as refused:
            clash.refuse_foreign_labs(spec)
    assert str(refused.value).startswith(
        f"127.0.39.1:2376, where a node of this lab listens, is held by pid {os.getpid()} ("
    )
    assert str(refused.value).endswith(
        "stop it, or give this lab addresses of its own with PLATTER_LAB_ADDRESS_PREFIX"
    )

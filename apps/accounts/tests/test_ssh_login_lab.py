"""A real ssh login into a real Spark cluster on the lab, with a key set in the profile, and a
key added (then removed) while the cluster runs reaching it. The host reaches the cluster's
address through the lab's shim, as a user's machine reaches a site's cluster networks."""

import subprocess
import time
from pathlib import Path

import pytest

from apps.accounts import ssh
from apps.clusters import access
from workers.tests.lab_products import destroy_and_check, instance, launch_default

from .keys import ed25519_pair

pytestmark = pytest.mark.django_db(transaction=True)
SYNC_SECONDS = 60  # a key change to the worker, then an exec in the master


def key_file(folder: Path, name: str, private: str) -> Path:
    path = folder / name
    path.write_text(private)
    path.chmod(0o600)
    return path


def ssh_run(key: Path, login: dict, *command: str) -> subprocess.CompletedProcess:
    """ssh as the cluster page says, with a fresh known_hosts and none of ~/.ssh/config."""
    argv = [
        "ssh",
        "-F",
        "/dev/null",
        "-i",
        str(key),
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=10",
        "-o",
        "LogLevel=ERROR",
        "-p",
        str(login["port"]),
        f"{login['user']}@{login['address']}",
        *command,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def wait_until(check, what: str, seconds: float = SYNC_SECONDS):
    deadline = time.monotonic() + seconds
    while True:
        result = check()
        if result:
            return result
        assert time.monotonic() < deadline, f"{what} within {seconds} s"
        time.sleep(1)


def test_the_owner_logs_into_spark_with_profile_keys_added_before_and_after_launch(
    dispatching, lab_cleanup, alice, tmp_path
):
    first_private, first_public = ed25519_pair("alice@laptop")
    second_private, second_public = ed25519_pair("alice@desktop")
    first = key_file(tmp_path, "laptop", first_private)
    second = key_file(tmp_path, "desktop", second_private)
    laptop = ssh.add_key(alice, first_public, "laptop")

    cluster = launch_default(alice, "spark", "ssh-spark")
    master = instance(cluster, "master")
    login = access.ssh_login(cluster)
    assert login["command"] == f"ssh -i <your key> root@{master.address.ip}"
    route = subprocess.run(["ip", "route", "get", login["address"]], capture_output=True, text=True)
    assert " via " not in route.stdout, f"no lab shim routes {login['address']}: {route.stdout}"

    answer = ssh_run(first, login, "hostname")
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.strip() == master.hostname == login["hostname"]
    # A login has the product's environment: spark-submit on the PATH, the cluster's master.
    answer = ssh_run(first, login, "spark-submit --version 2>&1 | grep -c 4.3.0; echo $SPARK_HOME")
    assert answer.stdout.split() == ["1", "/opt/spark"], answer.stdout + answer.stderr
    assert ssh_run(second, login, "hostname").returncode == 255  # not in the profile yet

    # A key added while the cluster runs opens it within seconds; a deleted one stops working.
    ssh.add_key(alice, second_public, "desktop")
    answer = wait_until(
        lambda: (r := ssh_run(second, login, "hostname")).returncode == 0 and r,
        "the key added later opens the running cluster",
    )
    assert answer.stdout.strip() == master.hostname
    ssh.delete_key(alice, laptop.id)
    wait_until(
        lambda: ssh_run(first, login, "true").returncode == 255,
        "the deleted key is refused by the running cluster",
    )
    assert ssh_run(second, login, "true").returncode == 0
    destroy_and_check(cluster)

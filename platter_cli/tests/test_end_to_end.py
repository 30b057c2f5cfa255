"""Done-when of the command line: a new user logs in, launches the demo cluster with
`platter launch demo 1.0 --size 2 --wait`, follows its events and logs, stops and starts it,
and destroys it, all with the installed console script against the live server, a real
Celery worker and the lab."""

import json
import subprocess
import time
import urllib.request

import pytest
from django.contrib.auth import get_user_model

from apps.accounts.models import Quota
from apps.accounts.tests.keys import ed25519_pair
from apps.clusters.models import Cluster, DiskAllocation
from apps.clusters.tests.waiting import open_to_the_host
from apps.lab.management.commands.seed_demo import DEMO_QUOTA

from .conftest import PLATTER, token_for, user_environment

pytestmark = pytest.mark.django_db(transaction=True)


def follower(home, *args: str) -> subprocess.Popen:
    """`platter ARGS` running in the background, as in a second terminal."""
    return subprocess.Popen(
        [str(PLATTER), *args],
        env=user_environment(home),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def ended(process: subprocess.Popen, seconds: float = 120) -> tuple[str, str]:
    """The follower's output once it ended by itself (it must, when the cluster goes)."""
    try:
        stdout, stderr = process.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        pytest.fail(f"`platter {process.args[1:]}` did not end by itself:\n{stdout}\n{stderr}")
    assert process.returncode == 0, f"{process.args}: exit {process.returncode}\n{stderr}"
    assert "Traceback" not in stderr
    return stdout, stderr


def test_a_new_user_launches_follows_and_destroys_the_demo_cluster_from_the_terminal(
    dispatching, lab_cleanup, live_server, catalog_loaded, platter, home
):
    newcomer = get_user_model().objects.create_user("newcomer", password="new-pass-123")
    token = token_for(newcomer, name="laptop")  # as the portal's Tokens page issues it

    login = platter("login", "--url", live_server.url, "--token", "-", input=token)
    assert login.returncode == 0, login
    assert "as newcomer" in login.stdout

    launched = platter("launch", "demo", "1.0", "--size", "2", "--wait", timeout=300)
    assert launched.returncode == 0, launched
    cluster = Cluster.objects.get(owner=newcomer)
    assert cluster.state == Cluster.State.RUNNING
    master = cluster.instances.select_related("address").get(role="master")
    members = {i.address.ip for i in cluster.instances.select_related("address")}
    # The progress display printed the events on the way, then how to connect.
    assert f"Cluster {cluster.id} ({cluster.name}) is running after " in launched.stdout
    assert f"Web page (master-0): http://{master.address.ip}:80" in launched.stdout
    shown_text = " ".join(launched.stdout.split())  # lines rich wrapped, joined again
    for event in cluster.events.all():
        assert " ".join(event.message.split()) in shown_text, f"{event.message!r} not shown"

    rows = platter("ls", "--json").json()
    assert [(c["id"], c["state"]) for c in rows] == [(cluster.id, "running")]
    shown = platter("show", cluster.name)
    assert "master-0" in shown.stdout and "worker-1" in shown.stdout and "running" in shown.stdout
    events = platter("events", str(cluster.id), "--json").json()
    assert [e["message"] for e in events["events"]] == [
        e.message for e in cluster.events.order_by("id")
    ]

    logs = platter("logs", cluster.name, "--instance", "master-0", "--json").json()
    assert any("serving /data/1/www on port 80" in row["line"] for row in logs["lines"]), logs

    # Two more terminals follow the events and the master's log until the cluster is gone.
    events_follower = follower(home, "events", str(cluster.id), "-f", "--json")
    logs_follower = follower(home, "logs", str(cluster.id), "-i", "master-0", "-f")
    time.sleep(2)  # both made their first request; the page below is a later log line
    assert open_to_the_host(cluster.id) == []  # its owner lets this host in (the perimeter)
    with urllib.request.urlopen(f"http://{master.address.ip}/", timeout=10) as page:
        assert b"master-0" in page.read()

    stopped = platter("stop", str(cluster.id), "--wait", timeout=300)
    assert stopped.returncode == 0, stopped
    assert f"Cluster {cluster.id} ({cluster.name}) is stopped" in stopped.stdout
    started = platter("start", cluster.name, "--wait", "--json", timeout=300)
    assert started.returncode == 0, started
    assert started.json()["state"] == "running"

    destroyed = platter("destroy", cluster.name, "--yes", "--wait", timeout=300)
    assert destroyed.returncode == 0, destroyed
    assert f"Cluster {cluster.id} ({cluster.name}) is destroyed" in destroyed.stdout

    followed, _ = ended(events_follower)
    messages = [json.loads(line)["message"] for line in followed.splitlines()]
    assert messages == [e.message for e in cluster.events.order_by("id")]
    logged, _ = ended(logs_follower)
    assert "serving /data/1/www on port 80" in logged
    ours = [
        line
        for line in logged.splitlines()
        if "response:200" in line and not any(f"[::ffff:{ip}]" in line for ip in members)
    ]
    assert ours, f"the request from this host is not in the followed log:\n{logged}"

    assert platter("ls", "--json").json() == []
    assert not DiskAllocation.objects.filter(instance__cluster=cluster, active=True).exists()


def test_platter_ssh_logs_into_spark_with_a_key_added_from_the_terminal(
    dispatching, lab_cleanup, live_server, logged_in, alice, home
):
    Quota.objects.update_or_create(user=alice, defaults=DEMO_QUOTA)  # the demo user's limits
    private, public = ed25519_pair("alice@laptop")
    key = home / "id_ed25519"
    key.write_text(private)
    key.chmod(0o600)
    (home / "id_ed25519.pub").write_text(public + "\n")

    added = logged_in("keys", "add", str(home / "id_ed25519.pub"), "--json")
    assert added.returncode == 0, added
    assert [k["id"] for k in logged_in("keys", "ls", "--json").json()] == [added.json()["id"]]
    assert logged_in("keys", "add", str(home / "id_ed25519")).returncode == 1  # the private one

    launched = logged_in(
        "launch", "spark", "4.3.0", "--size", "1", "--name", "sparky", "--wait", timeout=600
    )
    assert launched.returncode == 0, launched
    assert "ssh: platter ssh " in launched.stdout

    ran = logged_in("ssh", "sparky", "-i", str(key), "hostname; echo $SPARK_HOME", timeout=120)
    assert ran.returncode == 0, ran
    assert ran.stdout.split() == ["master-0", "/opt/spark"]
    known = home / ".config" / "platter" / "known_hosts"
    assert len(list(known.iterdir())) == 1  # this cluster's host key, trusted on first use
    # ssh's own exit code comes back: a script can tell a failed remote command.
    assert logged_in("ssh", "sparky", "-i", str(key), "exit 7", timeout=120).returncode == 7

    assert logged_in("destroy", "sparky", "--yes", "--wait", timeout=300).returncode == 0

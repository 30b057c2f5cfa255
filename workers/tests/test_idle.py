"""Idle stop on the node fake: the rules of apps/clusters/idle.py and the probes of
workers/idle.py (connections read from /proc/net/tcp, applications, portal jobs)."""

import threading
import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from apps.catalog.models import ProductRevision, ProductVersion
from apps.clusters import idle as rules
from apps.clusters.models import Cluster, IdlePolicy, Instance
from apps.clusters.reservation import reserve
from apps.clusters.tests.factories import make_cluster, make_network, make_node, wants
from apps.clusters.transitions import transition
from apps.nodes.fake import FakeContainer, FakeNodeClient, FakeNodes
from apps.products import registry
from apps.products.base import UsageProbe
from apps.products.registry import PLUGINS
from workers import idle

pytestmark = pytest.mark.django_db
S = Cluster.State

# /proc/net/tcp as the kernel prints it: sshd listening on 22, a session from 10.1.2.3 (not a
# member), and a connection from 10.9.0.3 (a member of the cluster) to 7077.
TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid
   0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0
   1: 00000000:1BA5 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0
   2: 0200090A:0016 0302010A:C350 01 00000000:00000000 00:00000000 00000000     0
   3: 0200090A:1BA5 0300090A:D431 01 00000000:00000000 00:00000000 00000000     0
   4: 0100007F:1BA5 0100007F:D432 01 00000000:00000000 00:00000000 00000000     0
"""


@pytest.fixture
def running(alice) -> Cluster:
    make_network()
    make_node()
    cluster = make_cluster(alice, wants(1, cores=1, memory_mb=64, disks=1))
    reserve(cluster.id)
    transition(cluster.id, S.PLACING, S.CONFIGURING)
    transition(cluster.id, S.CONFIGURING, S.RUNNING)
    return Cluster.objects.get(id=cluster.id)


def hex_ipv4(address: str) -> str:
    return bytes(int(part) for part in address.split("."))[::-1].hex().upper()


def member_table(cluster: Cluster) -> str:
    """TCP with the member's connection coming from the cluster's own instance."""
    address = Instance.objects.get(cluster=cluster).address
    assert address is not None
    own = address.ip
    return TCP.replace("0300090A", hex_ipv4(own))


def containers_of(cluster: Cluster, nodes: FakeNodes) -> None:
    for i in Instance.objects.filter(cluster=cluster).select_related("node"):
        assert i.node is not None
        name = i.container_id or i.hostname
        nodes.on(i.node.name)[name] = FakeContainer(name, name, {}, state="running")


def aged(cluster: Cluster, minutes: float) -> Cluster:
    """As if it started running `minutes` ago and nothing used it since."""
    Cluster.objects.filter(id=cluster.id).update(
        running_at=timezone.now() - timedelta(minutes=minutes), active_at=None, active_signal=""
    )
    return Cluster.objects.get(id=cluster.id)


def test_the_kernels_table_gives_connections_from_outside_only():
    listening, clients = idle.connections(TCP, members={"10.9.0.2", "10.9.0.3"})
    assert listening == {22, 7077}
    assert clients == [(22, "10.1.2.3")]  # the member's and the loopback ones are no use


def test_without_a_limit_nothing_happens_and_a_group_default_applies(running, alice):
    assert rules.verdict(aged(running, 600), timezone.now()).action == "keep"
    team = Group.objects.create(name="team")
    alice.groups.add(team)
    IdlePolicy.objects.create(group=team, idle_limit_minutes=60)
    judged = rules.verdict(aged(running, 61), timezone.now())
    assert (judged.action, judged.limit) == ("stop", timedelta(minutes=60))


def test_it_warns_once_before_and_stops_after_the_limit_with_the_reason(running):
    rules.set_limit(running.id, 30)
    with FakeNodes() as nodes:
        containers_of(running, nodes)
        aged(running, 25)
        assert idle.check_idle_clusters() == {"warned": [running.id], "stopped": []}
        assert idle.check_idle_clusters() == {"warned": [], "stopped": []}  # once
        aged(running, 31)
        Cluster.objects.filter(id=running.id).update(idle_warned_at=timezone.now())
        assert idle.check_idle_clusters() == {"warned": [], "stopped": [running.id]}
    stopped = Cluster.objects.get(id=running.id)
    assert stopped.state == S.STOPPING  # the stop operation does the rest, data kept
    assert stopped.reason.startswith("idle stop: nothing used it for 31 min")
    warning = stopped.events.get(level="warning")
    assert "it stops (data kept) in about" in warning.message


def test_an_ssh_session_from_outside_keeps_it_running_and_is_named(running):
    rules.set_limit(running.id, 30)
    with FakeNodes() as nodes:
        containers_of(running, nodes)
        nodes.exec_results["cat"] = (0, member_table(running))
        aged(running, 45)
        assert idle.check_idle_clusters() == {"warned": [], "stopped": []}
    kept = Cluster.objects.get(id=running.id)
    assert kept.state == S.RUNNING
    assert kept.active_signal.startswith("10.1.2.3 connected to ")
    assert rules.status(kept)["last_signal"] == kept.active_signal


def named_plugin(cluster: Cluster, plugin: str) -> Cluster:
    """The cluster's version (and the revision it launched with) naming `plugin`."""
    ProductVersion.objects.filter(id=cluster.version_id).update(plugin=plugin)
    if cluster.revision_id is not None:
        revisions = ProductRevision.objects.filter(id=cluster.revision_id)
        definition = revisions.get().definition  # immutable by save(): a test's own edit
        revisions.update(definition={**definition, "plugin": plugin})
    return Cluster.objects.get(id=cluster.id)


@pytest.mark.parametrize("plugin", ["spark", "generic"])
def test_a_running_application_keeps_it_running(running, plugin):
    """On 8080 a Spark version's master is asked for its applications; a version of another
    plugin serving there is not asked (its port means nothing to Spark's probe)."""
    running = named_plugin(running, plugin)
    rules.set_limit(running.id, 30)
    spark_master = TCP.replace("1BA5", "1F90")  # listening on 8080, the master UI
    with FakeNodes() as nodes:
        containers_of(running, nodes)
        address = Instance.objects.get(cluster=running).address
        assert address is not None
        own = hex_ipv4(address.ip)
        inside = spark_master.replace("0302010A", own).replace("0300090A", own)
        nodes.exec_results["cat"] = (0, inside)  # no connection from outside at all
        nodes.exec_results["python3"] = (0, "1\n")
        aged(running, 45)
        done = idle.check_idle_clusters()
    signal = Cluster.objects.get(id=running.id).active_signal
    if plugin == "spark":
        assert done["stopped"] == [] and "a Spark application running" in signal
    else:
        assert done["stopped"] == [running.id] and "Spark" not in signal


def test_keep_running_resets_the_clock(running):
    rules.set_limit(running.id, 30)
    aged(running, 45)
    rules.keep_running(running.id)
    kept = Cluster.objects.get(id=running.id)
    assert rules.verdict(kept, timezone.now()).action == "keep"
    assert kept.active_signal == "kept running by its owner"


@pytest.mark.parametrize(
    "minutes, problem",
    [(0, "between 1 and 43200 minutes, got 0"), ("5", "whole minutes, got '5'")],
)
def test_a_bad_limit_is_named(minutes, problem):
    with pytest.raises(rules.IdleLimitError, match=problem):
        rules.check_limit(minutes)


@pytest.fixture
def json_server():
    """A tiny HTTP server on loopback answering each path with the JSON put in `pages`."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    pages: dict[str, object] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps(pages.get(self.path, {})).encode()
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], pages
    server.shutdown()


def probe_on(port: int) -> UsageProbe:
    """The probe a shipped plugin asks on `port` (Spark's 8080 and 8888, YARN's 8088)."""
    return next(p for plugin in PLUGINS.values() for p in plugin.usage_probes if p.port == port)


def test_only_the_versions_own_plugin_says_what_a_port_means():
    """8080 is Spark's master for a Spark version only: a product without a plugin of its
    own (or another one's) serving on 8080 is not probed as Spark."""
    assert [p.port for p in registry.get("spark").usage_probes] == [8080, 8888]
    assert [p.port for p in registry.get("hadoop").usage_probes] == [8088]
    for name in ("generic", "demo", "cassandra", "ferretdb"):
        assert registry.get(name).usage_probes == ()


def run_probe(port: int, real_port: int, **env: str) -> int:
    """The probe as the container runs it (python3 -c), against the local server."""
    import os
    import subprocess

    argv = idle.app_count_argv(probe_on(port))
    argv[3] = str(real_port)  # the server's port instead of the product's
    done = subprocess.run(
        argv, capture_output=True, text=True, env={**os.environ, **env}, timeout=30, check=True
    )
    return int(done.stdout)


def test_the_application_probes_count_what_is_use(json_server):
    port, pages = json_server
    pages["/json/"] = {
        "activeapps": [{"name": "wordcount"}, {"name": "notebook on notebook-0"}],
    }
    assert run_probe(8080, port) == 1  # the notebook's own session is judged by its kernels
    pages["/ws/v1/cluster/apps?states=RUNNING,ACCEPTED"] = {"apps": None}
    assert run_probe(8088, port) == 0
    pages["/clusters/7/ui/notebook-0/8888/api/kernels"] = [
        {"execution_state": "idle"},
        {"execution_state": "busy"},
    ]
    env = {"PLATTER_WEB_UI_ROOT": "/clusters/7/ui", "PLATTER_HOSTNAME": "notebook-0"}
    assert run_probe(8888, port, **env) == 1


def test_a_hung_container_costs_only_its_own_clusters_budget(running, alice, settings, monkeypatch):
    """A tenant's container whose execs never answer: the other cluster's probe still sees its
    ssh session, and the pass ends within the budget, not with the hung exec."""
    settings.IDLE_PROBE_BUDGET_SECONDS = 1
    hung = make_cluster(alice, wants(1, cores=1, memory_mb=64, disks=1))
    reserve(hung.id)
    transition(hung.id, S.PLACING, S.CONFIGURING)
    transition(hung.id, S.CONFIGURING, S.RUNNING)
    Instance.objects.filter(cluster=hung).update(container_id=f"hung-{hung.id}")
    for cluster in (running, hung):
        rules.set_limit(cluster.id, 30)
        aged(cluster, 25)
    released = threading.Event()
    answer = FakeNodeClient.exec

    def exec_hanging(self, container: str, argv: list[str], timeout: float):
        if container.startswith("hung-"):
            released.wait(60)  # far beyond the budget: as a container that never answers
        return answer(self, container, argv, timeout)

    monkeypatch.setattr(FakeNodeClient, "exec", exec_hanging)
    try:
        with FakeNodes() as nodes:
            for cluster in (running, hung):
                containers_of(cluster, nodes)
            nodes.exec_results["cat"] = (0, member_table(running))
            began = time.monotonic()
            done = idle.check_idle_clusters()
            took = time.monotonic() - began
    finally:
        released.set()
    assert took < 1 + 3, f"the pass waited {took:.1f} s on the hung container"
    assert Cluster.objects.get(id=running.id).active_signal.startswith("10.1.2.3 connected to ")
    # The hung one saw nothing: its clock runs on as if a probe had failed.
    assert done == {"warned": [hung.id], "stopped": []}

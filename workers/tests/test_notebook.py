"""Adding a notebook to a running Spark cluster (apps/clusters/notebook.py, a grow of the
notebook role by workers/resize.py) over fake nodes, its refusals, and its state in words
(the reconciler's probe of JupyterLab records when it answers)."""

import json
import re

import pytest

from apps.audit.models import AuditEvent
from apps.clusters import notebook, services
from apps.clusters.models import Cluster, DiskAllocation, Instance
from apps.clusters.quotas import QuotaExceeded
from apps.inventory.models import Disk
from workers import operations, reconciler
from workers.tests.fake_launch import running

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State
I = Instance.State  # noqa: E741


def spark(owner, **options) -> Cluster:
    return running(owner, "spark", size=1, mem=1024, **options)


def page(client, cluster: Cluster, polled: str = "") -> str:
    """The cluster page, or (with a query) its poller's fragment as htmx asks for it."""
    headers = {"HX-Request": "true"} if polled else {}
    answer = client.get(f"/clusters/{cluster.id}/{polled}", headers=headers)
    assert answer.status_code == 200
    return answer.content.decode()


def test_a_notebook_is_grown_on_fake_nodes_with_its_disk_and_the_option_recorded(
    fake_nodes, pool, alice, catalog, client
):
    cluster = spark(alice)
    assert notebook.state_of(cluster) is None
    assert services.request_notebook(cluster.id, actor=alice) == S.RESIZING
    cluster.refresh_from_db()
    assert notebook.state_of(cluster).state == "adding"
    assert operations.run("resize", cluster.id) == S.RUNNING

    added = Instance.objects.get(cluster=cluster, role="notebook")
    assert (added.hostname, added.state, added.active) == ("notebook-0", I.RUNNING, True)
    assert (added.cores, added.memory_mb, added.disks) == (1, 2048, 1)
    assert DiskAllocation.objects.filter(instance=added, active=True).count() == 1
    assert any(name.endswith("notebook-0") for name in fake_nodes.running(added.node.name))
    cluster.refresh_from_db()
    assert cluster.options["notebook"] is True and cluster.resize_to is None
    assert cluster.events.filter(message__contains="notebook added").exists()
    audit = AuditEvent.objects.get(action="cluster.resize")
    assert audit.detail["role"] == "notebook" and audit.detail["workers"] == 1

    # Not ready until JupyterLab answers the reconciler's probe of /api/status; meanwhile
    # the page keeps asking, and swaps the notebook's area in once its state changed.
    assert notebook.state_of(cluster).state == "starting"
    client.force_login(alice)
    poller = re.search(r'<div id="cluster-poll"[^>]*>', page(client, cluster))[0]
    assert 'hx-trigger="every 1s"' in poller and "notebook=starting" in poller
    fake_nodes.exec_results["spark-admin"] = (0, json.dumps({"ready": True}) + "\n")
    assert reconciler.probe_notebooks() == ["notebook-0"]
    assert notebook.state_of(cluster).words == "ready: JupyterLab answers"
    since = re.search(r"since=(\d+)", poller)[1]
    fragment = page(client, cluster, f"?state=running&notebook=starting&since={since}")
    assert 'id="cluster-connect"' in fragment and "ready: JupyterLab answers" in fragment
    unchanged = page(client, cluster, f"?state=running&notebook=ready&since={since}")
    assert 'id="cluster-connect"' not in unchanged
    poller = re.search(r'<div id="cluster-poll"[^>]*>', page(client, cluster))[0]
    assert "hx-trigger" not in poller, "the page rests once the notebook is ready"

    services.request_stop(cluster.id, actor=alice)
    operations.run("stop", cluster.id)
    cluster.refresh_from_db()
    assert notebook.state_of(cluster).state == "stopped"
    reconciler.probe_notebooks()  # a stopped notebook forgets it answered
    assert Instance.objects.get(id=added.id).answered_at is None


def test_a_notebook_with_no_room_fails_and_says_why(fake_nodes, pool, alice, catalog):
    cluster = spark(alice)
    services.request_notebook(cluster.id, actor=alice)
    Disk.objects.filter(state=Disk.State.AVAILABLE).update(state=Disk.State.FAILED)
    assert operations.run("resize", cluster.id) == S.RUNNING
    cluster.refresh_from_db()
    assert not cluster.instances.filter(role="notebook", active=True).exists()
    assert not cluster.options.get("notebook")
    assert cluster.events.filter(message__startswith="resize failed: needs").exists()


def test_refusals_name_why(fake_nodes, pool, alice, catalog, settings):
    demo = running(alice, "demo", size=1, mem=64)
    with pytest.raises(notebook.NotebookRefused, match="only Spark clusters"):
        services.request_notebook(demo.id, actor=alice)

    already = spark(alice, notebook=True)
    with pytest.raises(notebook.NotebookRefused, match="has a notebook already"):
        services.request_notebook(already.id, actor=alice)

    stopped = spark(alice)
    services.request_stop(stopped.id, actor=alice)
    with pytest.raises(notebook.NotebookRefused, match="a running cluster only"):
        services.request_notebook(stopped.id, actor=alice)
    assert not AuditEvent.objects.filter(action="cluster.resize").exists()

    full = spark(alice)
    in_use = Instance.objects.filter(cluster__owner=alice, active=True).count()
    settings.SCHEDULER_DEFAULT_QUOTA = {"max_instances": in_use}
    with pytest.raises(QuotaExceeded, match="instances"):
        services.request_notebook(full.id, actor=alice)
    full.refresh_from_db()
    assert full.state == S.RUNNING and not full.instances.filter(role="notebook").exists()

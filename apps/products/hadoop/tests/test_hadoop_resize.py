"""Hadoop's resize on fake nodes: HDFS replication bounds a shrink, and a leaving worker goes
only once HDFS decommissioned it and YARN ran its last task there (hadoop-admin's answers
stand in for the NameNode's and the ResourceManager's). For real:
test_hadoop_lab.py."""

import pytest

from apps.clusters import services
from apps.clusters.models import Cluster, Instance
from apps.clusters.resize import ResizeRefused
from workers import operations
from workers.tests.fake_launch import running, workers_of

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State


def test_hadoop_is_not_shrunk_below_its_hdfs_replication(fake_nodes, pool, alice, catalog):
    cluster = running(alice, "hadoop", size=2, mem=1536)
    with pytest.raises(ResizeRefused, match=r"HDFS keeps 2 copies .*dfs.replication 2.*asked 1"):
        services.request_resize(cluster.id, 1, actor=alice)
    # A grow pins "auto" to what the NameNode has, so new workers write 2 copies too.
    services.request_resize(cluster.id, 3, actor=alice)
    cluster.refresh_from_db()
    assert cluster.options["replication"] == 2


def test_a_chosen_replication_of_one_allows_a_single_worker(fake_nodes, pool, alice, catalog):
    cluster = running(alice, "hadoop", size=2, mem=1536, replication=1)
    Cluster.objects.filter(id=cluster.id).update(state=S.RUNNING)
    from apps.clusters.resize import plan

    cluster.refresh_from_db()
    assert plan(cluster, 1).target == 1


def namenode(states: dict[str, tuple[str, int, int, int]]) -> dict:
    """What NameNodeInfo says, by hostname: (adminState, used, remaining, blocks left); the
    workers that stay are in service with room."""
    states = {"worker-0": ("In Service", 0, 100, 0), "worker-1": ("In Service", 0, 100, 0)} | states
    return {
        "LiveNodes": {
            f"{host}:9866": {"adminState": s, "usedSpace": used, "remaining": free}
            for host, (s, used, free, _left) in states.items()
        },
        "DecomNodes": {
            f"{host}:9866": {"underReplicatedBlocks": left}
            for host, (s, _used, _free, left) in states.items()
            if s != "In Service"
        },
    }


@pytest.fixture
def hadoop3(fake_nodes, pool, alice, catalog, settings, monkeypatch):
    settings.RESIZE_POLL_SECONDS = 0
    return running(alice, "hadoop", size=3, mem=1536, replication=2)


def script(
    monkeypatch, answers: list[dict], yarn: list[dict[str, int]] | None = None
) -> list[list[str]]:
    """The NameNode answers these in turn (the last one for ever), and the ResourceManager's
    decommissioning nodes those of `yarn` (none by default); returns the exclude lists
    written (hdfs part of each _set_excluded call)."""
    from apps.products.hadoop import decommission as step

    draining = iter(yarn or [{}])
    last_yarn: list[dict[str, int]] = [{}]

    def yarn_draining(_op, _master):
        last_yarn[0] = next(draining, last_yarn[0])
        return last_yarn[0]

    monkeypatch.setattr(step, "yarn_draining", yarn_draining)
    seen = iter(answers)
    last: list[dict] = []
    written: list[list[str]] = []

    def hdfs_nodes(_op, _master):
        last[:] = [next(seen, last[0] if last else answers[-1])]
        return last[0]

    def set_excluded(_op, _master, ips, _names, add):
        written.append(list(ips) if add else [])

    monkeypatch.setattr(step, "hdfs_nodes", hdfs_nodes)
    monkeypatch.setattr(step, "set_excluded", set_excluded)
    return written


def test_hadoop_shrinks_once_the_datanode_is_decommissioned(hadoop3, monkeypatch, fake_nodes):
    gone = workers_of(hadoop3)[2]
    written = script(
        monkeypatch,
        [
            namenode({"worker-2": ("In Service", 10, 100, 0)}),
            namenode({"worker-2": ("Decommission In Progress", 10, 100, 7)}),
            namenode({"worker-2": ("Decommissioned", 10, 100, 0)}),
        ],
    )
    services.request_resize(hadoop3.id, 2)
    assert operations.run("resize", hadoop3.id) == S.RUNNING
    assert len(workers_of(hadoop3)) == 2
    assert written == [[gone.address.ip]]  # excluded, and stays so once stopped
    messages = list(hadoop3.events.values_list("message", flat=True))
    assert "HDFS decommission: 7 blocks left to replicate (Decommission In Progress)" in messages
    assert any("worker-2 decommissioned" in m for m in messages)


def test_a_worker_leaves_only_once_yarn_ran_its_last_task_there(hadoop3, monkeypatch, fake_nodes):
    """HDFS may be done first: the worker still runs YARN containers (graceful decommission
    lets them end), so it is stopped only once the ResourceManager no longer drains it."""
    gone = workers_of(hadoop3)[2]
    decommissioned = namenode({"worker-2": ("Decommissioned", 10, 100, 0)})
    script(
        monkeypatch,
        [decommissioned],
        yarn=[{gone.hostname: 2}, {gone.hostname: 1}, {gone.hostname: 0}, {}],
    )
    services.request_resize(hadoop3.id, 2)
    assert operations.run("resize", hadoop3.id) == S.RUNNING
    assert len(workers_of(hadoop3)) == 2
    messages = list(hadoop3.events.order_by("id").values_list("message", flat=True))
    yarn_said = [m for m in messages if "YARN:" in m]
    assert yarn_said == [
        "HDFS decommission: 0 blocks left to replicate (Decommissioned); YARN: 2 containers "
        "still running on them",
        "HDFS decommission: 0 blocks left to replicate (Decommissioned); YARN: 1 containers "
        "still running on them",
        "HDFS decommission: 0 blocks left to replicate (Decommissioned); YARN: 0 containers "
        "still running on them",
    ]
    done = next(i for i, m in enumerate(messages) if "decommissioned: their blocks" in m)
    assert done > messages.index(yarn_said[-1]), "stopped only after YARN let it go"


def test_the_resource_manager_decommissions_gracefully_for_the_drain_time(
    hadoop3, fake_nodes, settings
):
    """The exclude edit asks YARN for a graceful decommission bounded by the drain time; the
    way back into service is a plain refresh."""
    from apps.products.hadoop import decommission as step
    from workers.resize import NodeOperator

    settings.RESIZE_DRAIN_SECONDS = 77
    op = NodeOperator(hadoop3)
    master = step.master(op)
    fake_nodes.execs.clear()
    fake_nodes.exec_results["hadoop-admin"] = (0, '{"changed": true}')
    step.set_excluded(op, master, ["10.0.0.9"], ["worker-9"], True)
    step.set_excluded(op, master, ["10.0.0.9"], ["worker-9"], False)
    edits = [argv for argv in fake_nodes.execs if argv[:2] == ["hadoop-admin", "exclude"]]
    named = ["--ips", "10.0.0.9", "--names", "worker-9", "--graceful", "77"]
    assert edits == [
        ["hadoop-admin", "exclude", "add", *named],
        ["hadoop-admin", "exclude", "remove", *named],
    ]


def test_a_refused_exclude_edit_fails_the_step_in_hadoop_admins_words(hadoop3, fake_nodes):
    from apps.products.base import ResizeFailed
    from apps.products.hadoop import decommission as step
    from workers.resize import NodeOperator

    op = NodeOperator(hadoop3)
    said = '{"error": "exclude: hdfs dfsadmin exited with 255: refreshNodes: Connection refused"}'
    fake_nodes.exec_results["hadoop-admin"] = (1, said)
    with pytest.raises(ResizeFailed, match=r"^exclude: hdfs dfsadmin exited with 255: refresh"):
        step.set_excluded(op, step.master(op), ["10.0.0.9"], ["worker-9"], True)


def test_a_decommission_past_its_time_puts_the_worker_back_and_fails_the_resize(
    hadoop3, monkeypatch, settings, fake_nodes
):
    settings.RESIZE_DRAIN_SECONDS = 0
    written = script(monkeypatch, [namenode({"worker-2": ("Decommission In Progress", 1, 9, 3)})])
    services.request_resize(hadoop3.id, 2)
    assert operations.run("resize", hadoop3.id) == S.RUNNING
    assert [w.index for w in workers_of(hadoop3)] == [0, 1, 2]  # never half removed
    assert all(w.state == Instance.State.RUNNING for w in workers_of(hadoop3))
    assert written[-1] == []  # back into service
    failed = hadoop3.events.get(message__startswith="resize failed")
    assert "did not end in 0 s (3 blocks left to replicate, 0 YARN" in failed.message
    assert "back in service" in failed.message


def test_a_shrink_whose_data_would_not_fit_is_refused(hadoop3, monkeypatch, fake_nodes):
    big = 3 * 2**30
    script(
        monkeypatch,
        [
            namenode(
                {
                    "worker-0": ("In Service", 0, 2**30, 0),
                    "worker-1": ("In Service", 0, 2**30, 0),
                    "worker-2": ("In Service", big, 2**30, 0),
                }
            )
        ],
    )
    services.request_resize(hadoop3.id, 2)
    assert operations.run("resize", hadoop3.id) == S.RUNNING
    assert len(workers_of(hadoop3)) == 3
    failed = hadoop3.events.get(message__startswith="resize failed")
    assert "(3.00 GiB) would not fit on the 2 that stay (2.00 GiB free)" in failed.message


def test_an_image_older_than_its_admin_command_is_a_refusal_saying_what_to_do(hadoop3, fake_nodes):
    """A cluster launched before hadoop-admin was in its image (the shell's 127)."""
    from apps.products.base import ResizeFailed
    from apps.products.hadoop import decommission as step
    from workers.resize import NodeOperator

    op = NodeOperator(hadoop3)
    fake_nodes.exec_results["hadoop-admin"] = (127, "platter-exec: 1: hadoop-admin: not found")
    master = step.master(op)
    with pytest.raises(ResizeFailed) as refused:
        step.hdfs_nodes(op, master)
    assert str(refused.value) == (
        f"{master.hostname}'s image has no hadoop-admin: it is older than this portal's "
        "hadoop-admin; launch the cluster again reusing its data, on the current image, to "
        "resize it"
    )

"""Cluster names are unique among one owner's clusters that are not destroyed: checked before
the insert, and the database constraint turns a concurrent launch's clash into the same error."""

import threading

import pytest
from django.db import connection, connections, transaction

from apps.catalog.services import load_catalog
from apps.clusters.models import Cluster
from apps.clusters.names import NameTaken, create_named, default_name, free_name
from apps.clusters.services import create_cluster, launch

from .factories import make_roomy_node, make_version, wants
from .parallel import run_together


def _with_state(cluster: Cluster, state: str) -> Cluster:
    Cluster.objects.filter(id=cluster.id).update(state=state)
    return cluster


@pytest.mark.django_db
def test_a_second_cluster_of_the_same_name_is_refused_naming_it(alice):
    create_cluster(alice, make_version(), "web", wants(1))
    with pytest.raises(NameTaken, match="you already have a cluster named web"):
        create_cluster(alice, make_version(), "web", wants(1))
    assert Cluster.objects.filter(owner=alice, name="web").count() == 1


@pytest.mark.django_db
def test_a_destroyed_cluster_frees_its_name_a_failed_one_keeps_it(alice):
    _with_state(create_cluster(alice, make_version(), "web", wants(1)), "destroyed")
    again = create_cluster(alice, make_version(), "web", wants(1))
    _with_state(again, "failed")
    with pytest.raises(NameTaken):
        create_cluster(alice, make_version(), "web", wants(1))
    assert Cluster.objects.filter(owner=alice, name="web").count() == 2


@pytest.mark.django_db
def test_two_owners_may_use_the_same_name(alice, bob):
    create_cluster(alice, make_version(), "web", wants(1))
    assert create_cluster(bob, make_version(), "web", wants(1)).name == "web"


@pytest.mark.django_db
def test_free_and_default_names_skip_the_names_in_use(alice):
    version = make_version()
    create_cluster(alice, version, "demo-1", wants(1))
    create_cluster(alice, version, "demo-3", wants(1))  # named by hand, the default's next pick
    # Two clusters of the product: the default starts at 3, which is taken, so 4.
    assert default_name(alice, version) == "demo-4"
    assert free_name(alice.id, "demo") == "demo-2"
    _with_state(Cluster.objects.get(name="demo-3"), "destroyed")
    assert default_name(alice, version) == "demo-3"
    long = "x" * 63
    create_cluster(alice, version, free_name(alice.id, long), wants(1))
    assert free_name(alice.id, long) == "x" * 61 + "-2"


def _insert_while_uncommitted(owner, name: str, ours):
    """Run ours() while another transaction has inserted `owner`'s cluster `name` but not
    committed, so ours' check cannot see it; the other commits once ours waits on the unique
    index with its insert. Returns what ours() returned or raised.

    Both insert rows directly (create_named, as create_cluster does, without its quota check):
    launches through create_cluster hold the owner's row lock from their quota check on, which
    serializes them before the name check, so only an insert outside that lock reaches the
    constraint."""
    version = make_version()
    inserted, release, done = threading.Event(), threading.Event(), threading.Event()
    outcome: list = []

    def other() -> None:
        try:
            with transaction.atomic():
                Cluster.objects.create(owner=owner, version=version, name=name)
                inserted.set()
                release.wait(60)
        finally:
            connection.close()

    def mine() -> None:
        try:
            outcome.append(ours())
        except Exception as error:  # noqa: BLE001 (asserted by the callers)
            outcome.append(error)
        finally:
            connection.close()
            done.set()

    first = threading.Thread(target=other)
    first.start()
    assert inserted.wait(60)
    second = threading.Thread(target=mine)
    second.start()
    waited = False
    with connections["default"].cursor() as cursor:
        while not done.is_set():
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO \"clusters_cluster\"%%'"
            )
            if cursor.fetchone()[0]:
                waited = True
                break
            done.wait(0.05)
    release.set()
    first.join(60)
    second.join(60)
    assert waited, "ours never waited on the other's row: the constraint path was not taken"
    return outcome[0]


def insert(owner, name: str) -> Cluster:
    version = make_version()
    return create_named(
        owner.id, name, lambda free: Cluster.objects.create(owner=owner, version=version, name=free)
    )


def test_the_constraint_refuses_a_name_the_check_did_not_see(transactional_db, alice):
    """The IntegrityError path: another insert of the same name is not committed when ours
    checks; ours gets NameTaken once the other commits."""
    outcome = _insert_while_uncommitted(alice, "web", lambda: insert(alice, "web"))
    assert isinstance(outcome, NameTaken), outcome
    assert str(outcome) == "you already have a cluster named web"
    assert Cluster.objects.filter(owner=alice, name="web").count() == 1


def test_a_default_name_taken_at_the_insert_moves_on_to_the_next(transactional_db, alice):
    version = make_version()
    chosen = default_name(alice, version)
    assert chosen == "demo-1"
    outcome = _insert_while_uncommitted(alice, "demo-1", lambda: insert(alice, chosen))
    assert isinstance(outcome, Cluster), outcome
    assert outcome.name == "demo-2"
    assert sorted(Cluster.objects.values_list("name", flat=True)) == ["demo-1", "demo-2"]


def test_two_parallel_launches_of_one_name_one_wins(transactional_db, alice):
    """Real launches at the same instant (they serialize on the owner's quota lock, so the
    loser's check sees the winner; the constraint path is the tests' above)."""
    load_catalog()
    make_roomy_node()
    from apps.catalog.models import ProductVersion

    demo = ProductVersion.objects.get(product__name="demo", version="1.0")
    results = run_together([lambda: launch(alice, demo, "twin", {"size": 1})] * 2)
    won = [r for r in results if isinstance(r, Cluster)]
    lost = [r for r in results if not isinstance(r, Cluster)]
    assert len(won) == 1 and len(lost) == 1, results
    assert isinstance(lost[0], NameTaken) and lost[0].name == "twin"
    assert list(Cluster.objects.filter(owner=alice).values_list("name", flat=True)) == ["twin"]


def test_the_migration_renames_older_duplicates_before_adding_the_constraint(
    transactional_db, alice, bob
):
    from django.db.migrations.executor import MigrationExecutor

    # Made with today's models, before going back (that unapplies the catalog's later
    # migrations too, which depend on the clusters').
    version_id = make_version().id
    executor = MigrationExecutor(connection)
    executor.migrate([("clusters", "0006_diskallocation_handed_over")])
    try:
        old = (
            MigrationExecutor(connection)
            .loader.project_state(("clusters", "0006_diskallocation_handed_over"))
            .apps
        )
        OldCluster = old.get_model("clusters", "Cluster")
        rows = [
            (alice, "web", "running"),
            (alice, "web", "failed"),
            (alice, "web-2", "queued"),
            (alice, "web", "destroyed"),
            (alice, "web", "queued"),
            (bob, "web", "running"),
        ]
        ids = [
            OldCluster.objects.create(
                owner_id=owner.id, version_id=version_id, name=name, state=state
            ).id
            for owner, name, state in rows
        ]
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
    names = dict(Cluster.objects.values_list("id", "name"))
    # The oldest keeps its name; later ones take the first free number; destroyed ones and
    # other owners' clusters are left alone.
    assert [names[i] for i in ids] == ["web", "web-3", "web-2", "web", "web-4", "web"]


def test_parallel_launches_without_a_name_each_get_a_free_one(transactional_db, alice):
    """As a script launching a batch with {} at once: none is refused for a name it never
    chose; each moves on to the next free number."""
    load_catalog()
    make_roomy_node()
    from apps.api.launching import launch_from_body
    from apps.catalog.models import ProductVersion

    demo = ProductVersion.objects.get(product__name="demo", version="1.0")
    results = run_together([lambda: launch_from_body(alice, demo, {"size": 1})] * 4)
    assert all(isinstance(r, Cluster) for r in results), results
    assert sorted(r.name for r in results) == ["demo-1", "demo-2", "demo-3", "demo-4"]

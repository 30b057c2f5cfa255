"""The life cycle's two tables (apps.clusters.states) agree with each other, with the model
and with what is derived from them; the API publishes them."""

import itertools
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.accounts.models import Quota
from apps.api.cesga.status import WORDS
from apps.clusters import states
from apps.clusters.models import LIVE_STATES, Cluster
from apps.clusters.provisioning import PHASES
from apps.clusters.states import OPERATIONS, STATES, Containers
from apps.clusters.transitions import ALLOWED
from apps.web.views.clusters import MOVING, WITH_CONTAINERS
from workers import operations, reconciler

from .factories import make_cluster, wants

S = Cluster.State


def test_it_has_one_row_per_state_of_the_model():
    assert Cluster.State is states.State
    assert list(STATES) == list(S)
    assert all(row.state == state for state, row in STATES.items())


def test_every_move_ends_in_a_state_and_every_state_is_reached_from_queued():
    reached, todo = {S.QUEUED}, [S.QUEUED]
    while todo:
        for target in STATES[todo.pop()].to:
            assert target in STATES
            if target not in reached:
                reached.add(target)
                todo.append(target)
    assert reached == set(STATES)


def test_each_operation_is_a_path_of_allowed_moves():
    for op in OPERATIONS.values():
        path = [*op.through, op.ends_in]
        for source in op.requested_in:
            assert path[0] in ALLOWED[source], (op.name, source)
        for here, there in itertools.pairwise(path):
            assert there in ALLOWED[here], (op.name, here, there)
        assert not STATES[op.ends_in].moving, op.name  # it stays there


def test_moving_states_are_the_states_operations_carry_clusters_through():
    carried = {state for op in OPERATIONS.values() for state in op.through}
    assert set(states.MOVING) == carried
    # A worker carries each but queued (the admission queue's), and each has its stamp,
    # which resume_stalled reads.
    assert set(operations.BY_STATE) == carried - {S.QUEUED}
    for state in operations.BY_STATE:
        Cluster._meta.get_field(f"{state}_at")


def test_the_columns_agree_with_each_other():
    for row in STATES.values():
        if row.watched:  # the reconciler's: containers that should run, no task at work
            assert row.containers == Containers.HELD and not row.moving and row.logs
        if row.logs:
            assert row.containers != Containers.GONE
        if not row.live:  # over: nothing held, nothing moves, only a destroy leaves it
            assert not (row.resources or row.moving or row.leased or row.logs)
            assert row.to <= {S.DESTROYING, S.DESTROYED}
        if row.phase:
            assert row.state in OPERATIONS["launch"].through
        assert row.label and row.meaning and row.cesga


def test_derived_sets_come_from_the_table():
    assert set(LIVE_STATES) == {s for s, row in STATES.items() if row.live}
    assert set(states.ENDED) == {S.DESTROYED, S.FAILED}
    assert set(states.LEASED) == set(states.LIVE) - {S.DESTROYING}
    assert set(states.MOVING) == MOVING
    assert {s for s, row in STATES.items() if row.containers == "held"} == WITH_CONTAINERS
    assert set(reconciler.WATCHED) == {S.RUNNING, S.DEGRADED}
    assert OPERATIONS["launch"].through == PHASES
    assert WORDS[S.RUNNING] == "ready" and WORDS[S.DEGRADED] == "degraded"
    assert set(WORDS) == set(STATES)
    for name, op in operations.OPERATIONS.items():
        assert op.works_in == OPERATIONS[name].through
    # A destroy is taken in every state that may move to destroying.
    assert set(states.requested_in("destroy")) == {s for s in STATES if S.DESTROYING in ALLOWED[s]}


@pytest.mark.django_db
def test_resume_stalled_hands_back_clusters_in_every_working_state_and_only_those(alice):
    Quota.objects.create(user=alice, max_clusters=20)
    long_ago = timezone.now() - timedelta(hours=1)
    by_state = {}
    for state in S:
        cluster = make_cluster(alice, wants(1))
        stamp = {} if state == S.QUEUED else {f"{state}_at": long_ago}
        Cluster.objects.filter(id=cluster.id).update(state=state, **stamp)
        by_state[state] = cluster.id
    recent = make_cluster(alice, wants(1))
    Cluster.objects.filter(id=recent.id).update(state=S.STOPPING, stopping_at=timezone.now())

    resumed = operations.resume_stalled(older_than=60)

    assert sorted(resumed) == sorted(by_state[s] for s in operations.BY_STATE)
    assert recent.id not in resumed


def test_the_api_publishes_both_tables(client, alice):
    client.force_login(alice)
    body = client.get("/api/v1/states").json()
    assert [s["name"] for s in body["states"]] == [str(s) for s in S]
    running = next(s for s in body["states"] if s["name"] == "running")
    assert running["live"] and running["logs"] and running["cesga"] == "ready"
    assert running["label"] == "Running" and set(running["to"]) == set(ALLOWED[S.RUNNING])
    assert {op["name"] for op in body["operations"]} == set(OPERATIONS)
    schema = client.get("/api/v1/schema/?format=json").json()
    assert "/api/v1/states" in schema["paths"]


def test_the_api_asks_callers_to_sign_in(client, db):
    assert client.get("/api/v1/states").status_code in (401, 403)

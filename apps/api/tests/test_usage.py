"""The usage API and its CSV: the same figures, each user their own, staff everyone's."""

import csv
import io
from datetime import timedelta

import pytest

from apps.clusters.models import Cluster
from apps.usage.tests.test_usage import T0, live, set_times

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_clusters(alice, bob, network):
    for owner, cores in ((alice, 2), (bob, 3)):
        cluster = live(owner, cores=cores, disks=1)
        set_times(cluster, dict.fromkeys(["queued", "placing", "configuring", "running"], T0))
        # Stopped an hour later: its cores stop counting, its disk does not.
        Cluster.objects.filter(id=cluster.id).update(state="stopped")
        cluster.events.create(message="stopped", state="stopped", at=T0)
        cluster.events.filter(state="stopped").update(at=T0 + timedelta(hours=1))


@pytest.fixture
def network(db):
    from apps.clusters.tests.factories import make_network

    return make_network()


def day(**extra) -> dict:
    return {"from": T0.date().isoformat(), "to": T0.date().isoformat(), **extra}


def test_a_user_reads_their_own_usage_by_cluster(api, two_clusters):
    answer = api("owner").get("/api/v1/usage", day(group_by="cluster"))
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert [t["key"].split("/")[0] for t in body["totals"]] == ["alice"]
    assert body["total"]["core_h"] == pytest.approx(2.0)  # 2 cores for one hour
    assert body["total"]["hdd_h"] == pytest.approx(14.0)  # the disk until midnight UTC


def test_another_users_usage_is_refused_and_staff_read_everyones(api, two_clusters):
    refused = api("owner").get("/api/v1/usage", day(user="bob"))
    assert refused.status_code == 403
    assert "only staff read other users'" in refused.json()["message"]
    everyone = api("admin").get("/api/v1/usage", day(group_by="user")).json()
    assert [(t["key"], t["core_h"]) for t in everyone["totals"]] == [("alice", 2.0), ("bob", 3.0)]
    bob = api("admin").get("/api/v1/usage", day(user="bob")).json()
    assert bob["total"]["core_h"] == pytest.approx(3.0)


def test_the_csv_has_fixed_columns_and_its_totals_equal_the_apis(api, two_clusters):
    answer = api("admin").get("/api/v1/usage.csv", day())
    assert answer.status_code == 200
    assert answer["Content-Type"].startswith("text/csv")
    lines = list(csv.DictReader(io.StringIO(answer.content.decode())))
    assert list(lines[0]) == [
        "date",
        "user",
        "group",
        "cluster",
        "product",
        "state",
        "core_h",
        "mem_gb_h",
        "hdd_h",
        "ssd_h",
    ]
    total = api("admin").get("/api/v1/usage", day()).json()["total"]
    for figure in ("core_h", "mem_gb_h", "hdd_h", "ssd_h"):
        assert sum(float(line[figure]) for line in lines) == pytest.approx(total[figure])


@pytest.mark.parametrize(
    "query, problem",
    [
        ({"from": "2026-03-10", "to": "2026-03-09"}, "must not be after 'to'"),
        ({"from": "2025-01-01", "to": "2026-03-09"}, "a range is at most 366 days"),
        ({"from": "yesterday"}, "Date has wrong format"),
        ({"group_by": "colour"}, "is not a valid choice"),
    ],
)
def test_a_bad_range_or_grouping_gets_a_400_naming_it(api, query, problem):
    answer = api("owner").get("/api/v1/usage", query)
    assert answer.status_code == 400
    assert problem in answer.content.decode()


def test_a_launch_by_a_member_of_a_group_past_its_budget_gets_a_403_naming_it(
    api, alice, demo, network
):
    from django.contrib.auth.models import Group

    from apps.usage.models import Budget

    team = Group.objects.create(name="team")
    alice.groups.add(team)
    Budget.objects.create(group=team, disk_hours_per_month=0)
    refused = api("owner").post("/api/v1/products/demo/1.0", {"size": 1}, format="json")
    assert refused.status_code == 403, refused.content
    assert refused.json()["message"].startswith("the budget of group team is 0 disk-hours")
    assert not Cluster.objects.filter(owner=alice).exists()


def test_a_client_that_asks_for_csv_gets_the_csv(api, two_clusters):
    """As a spreadsheet's or a script's `Accept: text/csv` (refused with 406 before)."""
    admin = api("admin")
    asked = admin.get("/api/v1/usage.csv", day(), HTTP_ACCEPT="text/csv")
    assert asked.status_code == 200, asked.content
    assert asked["Content-Type"] == "text/csv; charset=utf-8"
    name = f"platter-usage-{T0.date()}-{T0.date()}.csv"
    assert asked["Content-Disposition"] == f'attachment; filename="{name}"'
    lines = list(csv.DictReader(io.StringIO(asked.content.decode())))
    assert sorted(line["user"] for line in lines) == ["alice", "bob"]
    anything = admin.get("/api/v1/usage.csv", day(), HTTP_ACCEPT="*/*")
    assert anything.content == asked.content


def test_a_client_that_accepts_only_json_gets_the_same_lines_as_json(api, two_clusters):
    admin = api("admin")
    as_csv = list(
        csv.DictReader(io.StringIO(admin.get("/api/v1/usage.csv", day()).content.decode()))
    )
    as_json = admin.get("/api/v1/usage.csv", day(), HTTP_ACCEPT="application/json").json()
    assert [line["cluster"] for line in as_json] == [line["cluster"] for line in as_csv]
    for line, row in zip(as_json, as_csv, strict=True):
        assert line["core_h"] == pytest.approx(float(row["core_h"]))


def test_a_refused_csv_says_why_in_csv(api):
    answer = api("owner").get(
        "/api/v1/usage.csv", {"from": "2026-03-10", "to": "2026-03-09"}, HTTP_ACCEPT="text/csv"
    )
    assert answer.status_code == 400
    assert answer["Content-Type"].startswith("text/csv")
    lines = list(csv.reader(io.StringIO(answer.content.decode())))
    assert lines[0] == ["error", "message"] and lines[1][0] == "invalid"
    assert ["from", "must not be after 'to'"] in lines[2:]

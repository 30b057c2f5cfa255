"""The Usage page: the user's own figures, a chart stacked by product, a table by cluster, the
CSV; staff see everyone's."""

from datetime import timedelta

import pytest

from apps.usage.tests.test_usage import T0, live, set_times

pytestmark = pytest.mark.django_db


@pytest.fixture
def running(alice, bob, pool):
    for owner in (alice, bob):
        cluster = live(owner, cores=2, disks=1)
        set_times(cluster, dict.fromkeys(["queued", "placing", "configuring", "running"], T0))


def day() -> dict:
    return {"start": T0.date().isoformat(), "end": T0.date().isoformat()}


def test_a_user_sees_their_clusters_usage_in_a_chart_and_a_table(as_alice, running):
    page = as_alice.get("/usage/", day())
    assert page.status_code == 200
    html = page.content.decode()
    assert "<svg" in html and "demo: " in html  # a bar segment titled with the product
    assert "alice/" in html and "bob/" not in html
    assert "28.00</strong> core-hours" in html  # 2 cores from 10:00 to midnight UTC


def test_staff_see_everyone_and_may_narrow_to_a_user(client, admin_user, running):
    client.force_login(admin_user)
    everyone = client.get("/usage/", day()).content.decode()
    assert "alice/" in everyone and "bob/" in everyone
    assert "56.00</strong> core-hours" in everyone
    only_bob = client.get("/usage/", {**day(), "user": "bob"}).content.decode()
    assert "alice/" not in only_bob and "28.00</strong> core-hours" in only_bob


def test_a_user_cannot_narrow_to_someone_else(as_alice, running):
    html = as_alice.get("/usage/", {**day(), "user": "bob"}).content.decode()
    assert "bob/" not in html and "alice/" in html


def test_the_page_csv_totals_equal_the_page(as_alice, running):
    csv = as_alice.get("/usage/", {**day(), "format": "csv"})
    assert csv["Content-Type"].startswith("text/csv")
    lines = csv.content.decode().splitlines()
    assert lines[0] == "date,user,group,cluster,product,state,core_h,mem_gb_h,hdd_h,ssd_h"
    assert sum(float(line.split(",")[6]) for line in lines[1:]) == pytest.approx(28.0)


def test_a_backwards_range_is_named(as_alice):
    start = T0.date()
    html = as_alice.get(
        "/usage/", {"start": start.isoformat(), "end": (start - timedelta(days=1)).isoformat()}
    ).content.decode()
    assert "“From” must not be after “To”." in html

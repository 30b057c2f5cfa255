"""The cluster page in a real browser while it polls: news arrives (events, a new state) and
nothing the user opened or typed is reset."""

import os
import re

import pytest
from django.contrib.auth import get_user_model

from apps.clusters.reservation import reserve
from apps.clusters.tests import fake_logs
from apps.clusters.tests.factories import make_cluster, make_network, make_node, wants
from apps.clusters.transitions import record_event
from apps.web.tests.browsing import sign_in

pytestmark = pytest.mark.django_db(transaction=True)


def test_polling_keeps_an_open_instance_a_typed_lease_and_the_logs_panel(seeded, page, monkeypatch):
    demo = get_user_model().objects.get(username="demo")
    make_network()
    make_node(cores=16, memory_mb=16384, disks={"hdd": 6})
    cluster = make_cluster(
        demo, wants(2, cores=1, memory_mb=64, disks=1), name="polled", lease_hours=24
    )
    sign_in(page, "demo", "demo-platter")
    page.goto(f"/clusters/{cluster.id}/")
    assert "1 of 1 in the queue" in page.locator("#cluster-state").inner_text()

    page.locator("details.instance summary", has_text="worker-0").click()  # its details
    page.get_by_label("Extend by (hours)").fill("7")
    page.get_by_label("Instance", exact=True).select_option("worker-1")
    page.get_by_label("Lines", exact=True).fill("55")
    page.get_by_role("button", name="Show").click()
    page.locator("#log-output").get_by_text("worker-1 has no container yet").wait_for()

    record_event(cluster.id, "news from the test")
    page.locator("#events").get_by_text("news from the test").wait_for()
    reserve(cluster.id)  # queued -> placing: state, actions, instances and connection change
    page.locator("#cluster-state [data-testid=state]").filter(has_text="placing").wait_for()
    node = page.locator(f"#instance-{cluster.instances.get(hostname='worker-0').id}-node")
    node.filter(has_text=re.compile(r"^n\d+$")).wait_for()
    page.wait_for_timeout(2500)  # a few more polls

    assert page.locator("details.instance[open]").count() == 1
    assert "/data/1" in page.locator("details.instance[open]").inner_text()  # its facts, fresh
    assert page.get_by_label("Extend by (hours)").input_value() == "7"
    assert page.get_by_label("Instance", exact=True).input_value() == "worker-1"
    assert page.get_by_label("Lines", exact=True).input_value() == "55"
    assert "worker-1 has no container yet" in page.locator("#log-output").inner_text()
    assert page.locator("#events li").filter(has_text="news from the test").count() == 1
    assert page.locator("#cluster-queue").is_hidden()  # placing: no queue any more

    # Follow: the last lines, then new ones appended every 2 s (a fake node log here).
    fake_logs.install(monkeypatch)
    page.get_by_label("Follow").check()
    lines = page.locator("#log-lines")
    lines.get_by_text("line 29").wait_for()
    later = ("2026-11-24T17:01:00.000000000Z", "a line written later")
    fake_logs.install(monkeypatch, lines=[*fake_logs.LINES, later])
    lines.get_by_text("a line written later").wait_for(timeout=5_000)
    page.wait_for_timeout(2500)  # another poll: nothing twice
    text = lines.inner_text()
    assert text.count("line 29") == 1 and text.count("a line written later") == 1
    assert page.get_by_label("Extend by (hours)").input_value() == "7"
    if os.environ.get("PLATTER_SHOTS"):
        page.screenshot(path="artifacts/web/cluster-logs.png", full_page=True)

"""The cluster page shows what the version's product plugin does: the Jobs section only on a
product whose plugin runs jobs, and, while a shrink drains, that plugin's own words about the
leaving members (and the same words in the resize preview)."""

import pytest
from django.utils.html import escape

from apps.catalog.options import resolve
from apps.clusters import services
from apps.clusters.models import Cluster
from apps.clusters.tests.factories import make_network, make_node
from apps.nodes.fake import FakeNodes
from apps.products.registry import plugin_for
from workers.tests.fake_launch import running, version

pytestmark = pytest.mark.django_db(transaction=True)
JOBS_SECTION = 'hx-get="/clusters/{id}/jobs"'


@pytest.fixture
def site(client, alice):
    from django.core.management import call_command

    call_command("load_catalog", verbosity=0)
    make_network()
    for _ in range(3):
        make_node(disks={"hdd": 4, "ssd": 4})
    client.force_login(alice)
    with FakeNodes():
        yield client


def queued(owner, product: str) -> Cluster:
    """A cluster of the catalog's `product`, launched (queued): the page is all it needs."""
    spec = resolve(version(product), {})
    return services.create_cluster(
        owner, version(product), f"{product}-{Cluster.objects.count()}", spec.instances, {}
    )


@pytest.mark.parametrize(
    ("product", "offered"), [("cassandra", False), ("spark", True), ("hadoop", True)]
)
def test_the_jobs_section_is_on_the_page_only_when_the_plugin_runs_jobs(
    site, alice, product, offered
):
    cluster = queued(alice, product)
    html = site.get(f"/clusters/{cluster.id}/").content.decode()
    assert (JOBS_SECTION.format(id=cluster.id) in html) is offered
    assert (">Jobs</a>" in html) is offered


def test_the_jobs_form_offers_only_the_plugins_kinds(site, alice):
    hadoop = queued(alice, "hadoop")
    Cluster.objects.filter(id=hadoop.id).update(state=Cluster.State.RUNNING)
    section = site.get(f"/clusters/{hadoop.id}/jobs").content.decode()
    assert 'value="mapreduce"' in section
    assert 'value="pyspark"' not in section and 'value="spark-jar"' not in section


def test_a_version_without_jobs_says_so_instead_of_a_form_and_refuses_a_submit(site, alice):
    cassandra = queued(alice, "cassandra")
    Cluster.objects.filter(id=cassandra.id).update(state=Cluster.State.RUNNING)
    section = site.get(f"/clusters/{cassandra.id}/jobs").content.decode()
    assert "runs no jobs" in section and "Submit a job" not in section
    asked = {"kind": "pyspark", "main_path": "/opt/app.py"}
    refused = site.post(f"/clusters/{cassandra.id}/jobs", asked, follow=True)
    assert "whose version runs no jobs" in refused.content.decode()
    assert not cassandra.jobs.exists()


@pytest.mark.parametrize(
    ("product", "options", "role", "other"),
    [
        ("spark", {"size": 2, "mem": 1024}, "worker", "cassandra"),
        ("cassandra", {"size": 3}, "node", "hadoop"),
    ],
)
def test_a_shrink_shows_the_plugins_own_drain_words_while_it_drains(
    site, alice, product, options, role, other
):
    cluster = running(alice, product, **options)
    size = options["size"]
    words = escape(plugin_for(cluster.definition).drain_words)
    others = escape(plugin_for(version(other)).drain_words)
    assert words and others and words != others

    preview = site.get(f"/clusters/{cluster.id}/resize/preview", {"workers": size - 1})
    assert words in preview.content.decode()

    assert services.request_resize(cluster.id, size - 1, actor=alice) == Cluster.State.RESIZING
    html = site.get(f"/clusters/{cluster.id}/").content.decode()
    assert f"Shrinking from {size} to {size - 1} {role}s: {words}." in html
    assert others not in html


def test_a_grow_shows_no_drain_words(site, alice):
    cluster = running(alice, "spark", size=1, mem=1024)
    assert services.request_resize(cluster.id, 2, actor=alice) == Cluster.State.RESIZING
    html = site.get(f"/clusters/{cluster.id}/").content.decode()
    assert "Shrinking" not in html
    assert escape(plugin_for(cluster.definition).drain_words) not in html

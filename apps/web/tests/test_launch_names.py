"""The launch form refuses a name the user already uses, on the name field, and proposes a
free one."""

import pytest

from apps.catalog.models import ProductVersion
from apps.catalog.services import load_catalog
from apps.clusters.models import Cluster
from apps.clusters.services import launch
from apps.clusters.tests.factories import make_roomy_node
from apps.web.forms import LaunchForm

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(db) -> ProductVersion:
    load_catalog()
    make_roomy_node()
    return ProductVersion.objects.get(product__name="demo", version="1.0")


def test_the_form_refuses_a_name_in_use_on_the_name_field(as_alice, alice, demo):
    launch(alice, demo, "web", {"size": 1})
    data = {"name": "web", "size": 1}
    response = as_alice.post("/catalog/demo/1.0/launch", data)
    assert response.status_code == 400
    form = response.context["form"]
    assert form.errors["name"] == ["You already have a cluster named web"]
    assert "You already have a cluster named web" in response.content.decode()
    assert Cluster.objects.filter(owner=alice).count() == 1


def test_the_form_proposes_a_name_not_in_use(alice, demo):
    launch(alice, demo, "demo-1", {"size": 1})
    launch(alice, demo, "demo-2", {"size": 1})
    launch(alice, demo, "demo-3", {"size": 1})
    Cluster.objects.filter(name="demo-3").update(state="destroyed")
    launch(alice, demo, "demo-4", {"size": 1})
    # Four clusters of demo (one destroyed): demo-5 is next and free.
    assert LaunchForm(demo, alice).initial["name"] == "demo-5"
    Cluster.objects.filter(name="demo-3").update(state="running")
    launch(alice, demo, "demo-5", {"size": 1})
    assert LaunchForm(demo, alice).initial["name"] == "demo-6"

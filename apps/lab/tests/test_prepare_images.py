"""`lab images` (./platter run's preparation behind the portal), above the node boundary: the
images some node lacks are marked as being prepared, each step reaches the catalog, the nodes'
images reach the inventory as they land, and each image ends ready or failed; an interrupted
preparation fails what had not landed, naming the interruption, and the queue is woken either
way. On the real lab: workers/tests/test_image_wait_lab.py and `./platter run`."""

import pytest

from apps.catalog.models import ImagePreparation
from apps.clusters.tests.factories import make_node
from apps.inventory.models import Node
from apps.lab import products
from apps.lab.nodes import LabNode, current

pytestmark = pytest.mark.django_db

SPARK, KAFKA = "platter/spark:4.3.0", "platter/kafka:4.3.1"


@pytest.fixture
def lab(monkeypatch, settings):
    """Two lab nodes: lab-1 holds Spark already, lab-2 nothing; what ensure_product_images
    puts on them lands in `held`."""
    settings.LAB_PRODUCTS = ["spark", "kafka"]
    spec = current()
    nodes = [
        LabNode("lab-1", spec.address(1), spec=spec),
        LabNode("lab-2", spec.address(2), spec=spec),
    ]
    for node, made in zip(nodes, (make_node(), make_node()), strict=True):
        Node.objects.filter(id=made.id).update(name=node.name)
    held = {"lab-1": {SPARK}, "lab-2": set()}
    monkeypatch.setattr(products, "node_images", lambda node: sorted(held[node.name]))
    woken: list[bool] = []
    monkeypatch.setattr(products, "capacity_freed", lambda: woken.append(True))
    return nodes, held, woken


def states() -> dict[str, tuple[str, str]]:
    return {p.image: (p.state, p.step) for p in ImagePreparation.objects.all()}


def test_what_a_node_lacks_is_prepared_step_by_step_and_lands_in_the_inventory(lab, monkeypatch):
    nodes, held, woken = lab
    seen: list[dict] = []

    def ensure(nodes_, log, progress):
        progress.step([SPARK, KAFKA], "building on lab-1", 0)
        seen.append(states())
        held["lab-1"].add(KAFKA)
        progress.landed(nodes_[:1])
        progress.step([SPARK, KAFKA], "pulling from the registry", 1)
        held["lab-2"].update({SPARK, KAFKA})
        progress.landed(nodes_[1:])

    monkeypatch.setattr(products, "ensure_product_images", ensure)
    products.prepare_product_images(nodes, log=lambda line: None)
    # Both were prepared (lab-2 lacked both); while building, each said so.
    assert seen == [
        {SPARK: ("preparing", "building on lab-1"), KAFKA: ("preparing", "building on lab-1")}
    ]
    assert states() == {SPARK: ("ready", ""), KAFKA: ("ready", "")}
    assert Node.objects.get(name="lab-2").images == [KAFKA, SPARK]
    assert woken == [True]


def test_an_interrupted_preparation_fails_what_had_not_landed_naming_why(lab, monkeypatch):
    nodes, held, woken = lab

    def interrupted(nodes_, log, progress):
        held["lab-1"].add(KAFKA)  # built on the first node, then Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(products, "ensure_product_images", interrupted)
    with pytest.raises(KeyboardInterrupt):
        products.prepare_product_images(nodes, log=lambda line: None)
    # Spark and Kafka are each on some node: a launch may use them; nothing is left waiting.
    assert states() == {SPARK: ("ready", ""), KAFKA: ("ready", "")}
    assert woken == [True]

    def interrupted_at_once(nodes_, log, progress):
        raise KeyboardInterrupt

    held["lab-1"].discard(KAFKA)
    monkeypatch.setattr(products, "ensure_product_images", interrupted_at_once)
    with pytest.raises(KeyboardInterrupt):
        products.prepare_product_images(nodes, log=lambda line: None)
    assert states()[KAFKA] == ("failed", "interrupted before the image was on the nodes")


def test_nothing_is_marked_when_every_node_holds_every_image(lab, monkeypatch):
    nodes, held, _woken = lab
    held["lab-2"].add(SPARK)
    held["lab-1"].add(KAFKA)
    held["lab-2"].add(KAFKA)
    said: list[str] = []
    monkeypatch.setattr(products, "ensure_product_images", lambda *a: pytest.fail("nothing to do"))
    products.prepare_product_images(nodes, log=said.append)
    assert said == ["product images: on every node already"]
    assert not ImagePreparation.objects.exists()

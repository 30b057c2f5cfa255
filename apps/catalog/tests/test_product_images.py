"""Product image builds on a real lab node: staged once, built once per content, rebuilt when
a file of its deploy/images folder changes, copied to another node instead of built again; and
the reconciler records what each node holds."""

from pathlib import Path

import pytest
from django.conf import settings

from apps import nodes
from apps.inventory.models import Node
from apps.nodes import engine
from apps.products.images import recipe as recipe_module
from apps.products.images.build import BuildError, ensure_built, ensure_copied, stage
from apps.products.images.recipe import Recipe
from workers import reconciler

pytestmark = pytest.mark.django_db


def output_of(client, image: str) -> str:
    # Wait for the exit before reading the log: run(remove=True) once read it empty under load.
    container = client.containers.run(image, ["cat", "/opt/hello", "/opt/fetched"], detach=True)
    try:
        assert container.wait(timeout=60)["StatusCode"] == 0
        return container.logs().decode()
    finally:
        container.remove(force=True)


def tiny_recipe(tmp_path, monkeypatch, fetches: list) -> tuple[Recipe, Path]:
    """A recipe of one file downloaded and one of its folder, in a folder of the test's own."""
    folder = tmp_path / "images" / f"tiny-{settings.PLATTER_SITE}"
    (folder / "rootfs" / "opt").mkdir(parents=True)
    (folder / "Dockerfile").write_text("ARG BASE\nFROM ${BASE}\nCOPY fetched/ /\nCOPY rootfs/ /\n")
    (folder / "rootfs" / "opt" / "hello").write_text("one ")
    monkeypatch.setattr(recipe_module, "IMAGES_DIR", tmp_path / "images")

    def fetch(dest, cache):
        fetches.append(dest)
        (dest / "opt").mkdir(parents=True)
        (dest / "opt" / "fetched").write_text("fetched")

    return Recipe(folder.name, "1", ("nothing to download",), fetch), folder


def test_it_builds_once_per_content_and_again_when_a_script_changes(
    tmp_path, monkeypatch, lab_inventory
):
    fetches = []
    tiny, folder = tiny_recipe(tmp_path, monkeypatch, fetches)
    cache = tmp_path / "cache"
    lab1 = Node.objects.get(name="lab-1")
    client, raw = nodes.client(lab1), engine.cached(lab1)
    try:
        staged = stage(tiny, cache)
        assert ensure_built(client, staged, settings.LAB_IMAGE) is True
        assert output_of(raw, tiny.reference) == "one fetched"

        assert stage(tiny, cache) == staged and len(fetches) == 1  # cached by content
        assert ensure_built(client, staged, settings.LAB_IMAGE) is False  # nothing to build

        (folder / "rootfs" / "opt" / "hello").write_text("two ")
        changed = stage(tiny, cache)
        assert changed.content != staged.content and not staged.context.exists()
        assert ensure_built(client, changed, settings.LAB_IMAGE) is True
        assert output_of(raw, tiny.reference) == "two fetched"
    finally:
        raw.images.remove(tiny.reference, force=True)


def test_another_node_gets_the_built_image_by_copy_with_its_content_label(
    tmp_path, monkeypatch, lab_inventory
):
    tiny, _ = tiny_recipe(tmp_path, monkeypatch, [])
    lab1, lab2 = Node.objects.get(name="lab-1"), Node.objects.get(name="lab-2")
    source, target = nodes.client(lab1), nodes.client(lab2)
    raw1, raw2 = engine.cached(lab1), engine.cached(lab2)
    staged = stage(tiny, tmp_path / "cache")
    try:
        with pytest.raises(BuildError, match="does not have it"):
            ensure_copied(source, target, staged)  # nothing built yet: nothing to copy
        assert ensure_built(source, staged, settings.LAB_IMAGE) is True
        assert ensure_copied(source, target, staged) is True
        assert output_of(raw2, tiny.reference) == "one fetched"
        assert ensure_copied(source, target, staged) is False  # it has that content now
        assert ensure_built(target, staged, settings.LAB_IMAGE) is False  # so nothing to build
    finally:
        for raw in (raw1, raw2):
            if raw.images.list(name=tiny.reference):
                raw.images.remove(tiny.reference, force=True)


def test_the_reconciler_records_the_images_each_node_holds(lab_inventory):
    Node.objects.update(images=[])
    reconciler.reconcile()
    for node in Node.objects.filter(name__startswith="lab-"):
        assert settings.LAB_IMAGE in node.images

"""Product image builds on real lab nodes: staged once, built once per content, rebuilt when
a file of its deploy/images folder changes; pushed to the lab's registry (TLS from the lab's
CA, a password) and pulled by another node instead of built again; the registry's storage a
cache that a later lab up pulls from; and the reconciler records what each node holds."""

import dataclasses
import io
import secrets
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from apps import nodes
from apps.inventory.models import Node
from apps.lab import products
from apps.lab import registry as lab_registry
from apps.lab.nodes import current, lab_nodes
from apps.nodes import engine
from apps.products import images as product_images
from apps.products.images import recipe as recipe_module
from apps.products.images.build import BuildError, ensure_built, holds, stage
from apps.products.images.publish import Registry, content_tag, pull, push
from apps.products.images.recipe import Recipe
from apps.products.images.sources import FetchError
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


def tiny_recipe(
    tmp_path, monkeypatch, fetches: list, nonce: bool = False, name: str = "a"
) -> tuple[Recipe, Path]:
    """A recipe of one file downloaded and one of its folder, in a folder of the test's own
    (``nonce``: a content no earlier run made, for tests of the registry, whose storage is a
    cache that outlives the lab)."""
    folder = tmp_path / "images" / f"tiny-{name}-{settings.PLATTER_SITE}"
    (folder / "rootfs" / "opt").mkdir(parents=True)
    (folder / "Dockerfile").write_text(
        f"FROM {settings.LAB_IMAGE}\nCOPY fetched/ /\nCOPY rootfs/ /\n"
    )
    (folder / "rootfs" / "opt" / "hello").write_text("one ")
    if nonce:
        (folder / "nonce").write_text(secrets.token_hex(8))
    monkeypatch.setattr(recipe_module, "IMAGES_DIR", tmp_path / "images")

    def fetch(dest, cache):
        fetches.append(dest)
        (dest / "opt").mkdir(parents=True)
        (dest / "opt" / "fetched").write_text("fetched")

    return Recipe(folder.name, "1", ("nothing to download",), fetch, on_base=False), folder


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
        assert ensure_built(client, staged, None) is True
        assert output_of(raw, tiny.reference) == "one fetched"

        assert stage(tiny, cache) == staged and len(fetches) == 1  # cached by content
        assert ensure_built(client, staged, None) is False  # nothing to build

        (folder / "rootfs" / "opt" / "hello").write_text("two ")
        changed = stage(tiny, cache)
        assert changed.content != staged.content and not staged.context.exists()
        assert ensure_built(client, changed, None) is True
        assert output_of(raw, tiny.reference) == "two fetched"
    finally:
        raw.images.remove(tiny.reference, force=True)


def test_a_node_pulls_what_another_pushed_to_the_lab_registry_over_tls_with_a_password(
    tmp_path, monkeypatch, lab_inventory
):
    tiny, _ = tiny_recipe(tmp_path, monkeypatch, [], nonce=True)
    lab1, lab2 = Node.objects.get(name="lab-1"), Node.objects.get(name="lab-2")
    source, target = nodes.client(lab1), nodes.client(lab2)
    raw1, raw2 = engine.cached(lab1), engine.cached(lab2)
    registry, _ = lab_registry.ensure_running(current())
    staged = stage(tiny, tmp_path / "cache")
    tag = content_tag(staged.content)
    try:
        assert not registry.has(tiny.repository, tag)
        assert ensure_built(source, staged, None) is True
        pushed = push(source, tiny.reference, staged.content, registry)
        assert pushed == [registry.reference(tiny.repository, t) for t in ("1", tag)]
        assert registry.has(tiny.repository, tag)
        assert lab_registry.LabRegistry(current()).stored(tiny.repository, tag)

        # Anonymous, or trusting only the system's CAs: refused, by the registry and by TLS.
        with pytest.raises(BuildError, match="no basic auth credentials"):
            pull(target, tiny.reference, staged.content, Registry(registry.host))
        plain = Registry(registry.host, registry.username, registry.password)
        with pytest.raises(BuildError, match="CERTIFICATE_VERIFY_FAILED"):
            plain.has(tiny.repository, tag)

        pull(target, tiny.reference, staged.content, registry)
        assert holds(target, tiny.reference, staged.content)
        assert output_of(raw2, tiny.reference) == "one fetched"
        # Each node keeps the catalog's name only: the registry's names were dropped.
        for client in (source, target):
            assert not [name for name in client.images() if name.startswith(registry.host)]
    finally:
        for raw in (raw1, raw2):
            if raw.images.list(name=tiny.reference):
                raw.images.remove(tiny.reference, force=True)


def test_a_node_refuses_the_registry_when_its_ca_is_not_trusted(
    tmp_path, monkeypatch, lab_inventory
):
    """The daemons check the registry's certificate (it is on no loopback address, where
    Docker would not): without the lab CA in certs.d a pull fails on the certificate."""
    tiny, _ = tiny_recipe(tmp_path, monkeypatch, [], nonce=True)
    lab1 = Node.objects.get(name="lab-1")
    client = nodes.client(lab1)
    registry, _ = lab_registry.ensure_running(current())
    staged = stage(tiny, tmp_path / "cache")
    trusted = lab_registry.LabRegistry(current()).certs_d / "ca.crt"
    kept = trusted.read_bytes()
    try:
        ensure_built(client, staged, None)
        push(client, tiny.reference, staged.content, registry)
        engine.cached(lab1).images.remove(tiny.reference, force=True)
        trusted.unlink()
        with pytest.raises(BuildError, match="certificate signed by unknown authority"):
            pull(client, tiny.reference, staged.content, registry)
    finally:
        trusted.write_bytes(kept)
        if engine.cached(lab1).images.list(name=tiny.reference):
            engine.cached(lab1).images.remove(tiny.reference, force=True)


def test_the_sites_push_command_builds_what_the_registry_lacks_and_pushes_it(
    tmp_path, monkeypatch, lab_inventory
):
    """`manage.py product_images push`, as a site runs it against its registry (here the
    lab's, with its CA and password), building on lab-1's engine as its $DOCKER_HOST."""
    tiny, _ = tiny_recipe(tmp_path, monkeypatch, [], nonce=True)
    monkeypatch.setattr(product_images, "PRODUCTS", (tiny.product,))
    monkeypatch.setattr(product_images, "recipes", lambda names: [tiny])
    node = lab_nodes()[0]
    monkeypatch.setenv("DOCKER_HOST", f"unix://{node.socket}")
    lab = lab_registry.LabRegistry(current())
    registry, _ = lab_registry.ensure_running(current())
    arguments = [
        "push",
        "--registry", registry.host,
        "--username", registry.username,
        "--password-file", str(lab.folder / "password"),
        "--ca-file", str(lab.folder / "tls" / "ca.pem"),
        "--cache", str(tmp_path / "cache"),
    ]  # fmt: skip
    raw = engine.cached(Node.objects.get(name=node.name))
    try:
        first, again = io.StringIO(), io.StringIO()
        call_command("product_images", *arguments, stdout=first)
        content = stage(tiny, tmp_path / "cache").content
        assert f"built {tiny.reference} ({content})" in first.getvalue()
        assert f"pushed {registry.reference(tiny.repository, '1')}" in first.getvalue()
        assert registry.has(tiny.repository, "1")
        assert registry.has(tiny.repository, content_tag(content))
        call_command("product_images", *arguments, stdout=again)
        assert again.getvalue() == f"unchanged: {tiny.reference} ({content}) is there\n"
    finally:
        if raw.images.list(name=tiny.reference):
            raw.images.remove(tiny.reference, force=True)


def test_a_later_lab_up_pulls_what_did_not_change_and_builds_only_what_did(
    tmp_path, monkeypatch, lab_inventory
):
    """ensure_product_images on two real nodes, twice, with the nodes' images and the
    registry's process gone between (as `lab down` leaves them: its storage stays). A third
    recipe whose download is gone is said and skipped; the others still land everywhere."""
    one, _ = tiny_recipe(tmp_path, monkeypatch, [], nonce=True)
    two, two_folder = tiny_recipe(tmp_path, monkeypatch, [], nonce=True, name="b")

    def gone(dest, cache):
        raise FetchError("could not download https://example.org/c.tgz: HTTP Error 404")

    broken = dataclasses.replace(
        tiny_recipe(tmp_path, monkeypatch, [], nonce=True, name="c")[0], fetch=gone
    )
    monkeypatch.setattr(products, "lab_recipes", lambda: [one, broken, two])
    monkeypatch.setattr(products, "cache_dir", lambda: tmp_path / "cache")
    lab_nodes_ = lab_nodes()[:2]
    raws = [engine.cached(Node.objects.get(name=node.name)) for node in lab_nodes_]
    said: list[str] = []

    def forget_everything_but_the_cache() -> None:
        for raw in raws:
            for recipe in (one, two):
                if raw.images.list(name=recipe.reference):
                    raw.images.remove(recipe.reference, force=True)
        lab_registry.stop(current())

    try:
        products.ensure_product_images(lab_nodes_, said.append)
        assert any(f"built and pushed: {one.reference}, {two.reference}" in line for line in said)
        assert any(f"{broken.reference}: NOT built, could not download" in line for line in said)
        for raw in raws:
            assert output_of(raw, two.reference) == "one fetched"
            assert not raw.images.list(name=broken.reference)
        forget_everything_but_the_cache()
        (two_folder / "rootfs" / "opt" / "hello").write_text("changed ")
        said.clear()
        products.ensure_product_images(lab_nodes_, said.append)
        assert f"product images in the lab's registry already: {one.reference}" in said
        assert any(f"built and pushed: {two.reference} " in line for line in said)
        for raw in raws:
            assert output_of(raw, one.reference) == "one fetched"
            assert output_of(raw, two.reference) == "changed fetched"
    finally:
        forget_everything_but_the_cache()
        lab_registry.ensure_running(current())  # as the lab had it


def test_the_reconciler_records_the_images_each_node_holds(lab_inventory):
    Node.objects.update(images=[])
    reconciler.reconcile()
    for node in Node.objects.filter(name__startswith="lab-"):
        assert settings.LAB_IMAGE in node.images

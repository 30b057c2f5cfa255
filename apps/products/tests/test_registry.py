"""The registry and the generic plugin: a version names its plugin, an unknown name is refused
with the catalog, and a version without one resizes no role that keeps state."""

import pytest
from django.core.exceptions import ValidationError

from apps.catalog.definition import definition_fields
from apps.catalog.spec import DefinitionError, parse_definition
from apps.catalog.tests.factories import make_version
from apps.products import registry
from apps.products.base import BasePlugin, Member, ProductPlugin, ResizeAsk, ResizeFailed


def test_an_unknown_plugin_name_is_refused_naming_the_known_ones():
    data = {**definition_fields(make_version()), "plugin": "hdfs-magic"}
    with pytest.raises(DefinitionError) as caught:
        parse_definition(data)
    [problem] = [str(p) for p in caught.value.problems]
    assert problem.startswith("plugin: no plugin named 'hdfs-magic': one of ")
    assert "generic" in problem


def test_the_admin_refuses_an_unknown_plugin_on_its_field():
    version = make_version()
    version.plugin = "nope"
    with pytest.raises(ValidationError) as caught:
        version.full_clean()
    assert "no plugin named 'nope'" in str(caught.value.message_dict["plugin"])


def test_a_known_plugin_and_none_both_parse():
    data = definition_fields(make_version())
    assert parse_definition({**data, "plugin": "generic"}).plugin == "generic"
    assert parse_definition({**data, "plugin": ""}).plugin == ""


def test_a_version_is_given_its_plugin_by_its_definition_never_by_its_product_name():
    version = make_version()  # its product is called whatever the factory says
    version.plugin = ""
    assert registry.plugin_for(version).name == "generic"
    assert registry.plugin_for({"plugin": "generic"}).name == "generic"
    # A revision naming a plugin this site lacks falls back to the one that refuses.
    assert registry.plugin_for({"plugin": "from-the-future"}).name == "generic"


def test_every_registered_plugin_has_the_interface():
    for name, plugin in registry.PLUGINS.items():
        assert isinstance(plugin, ProductPlugin), name
        assert plugin.name == name


def test_the_generic_plugin_refuses_to_resize_a_role_that_keeps_state_saying_why():
    generic = registry.get("")
    refusal = generic.resize_refusal(ResizeAsk("worker", 3, 2, stateful=True))
    assert refusal is not None
    assert "workers keep data on their disks" in refusal and "cannot be resized" in refusal
    assert generic.resize_refusal(ResizeAsk("worker", 3, 4, stateful=True)) is not None
    assert generic.resize_refusal(ResizeAsk("web", 3, 2, stateful=False)) is None
    assert generic.resizable_roles({"master": True, "worker": True, "web": False}) == ["web"]
    assert generic.job_kinds == () and generic.notebook_probe is None


def test_the_generic_drain_refuses_a_stateful_member_even_past_the_rules():
    leaving = [Member(1, "worker", 2, "worker-2", "10.0.0.3", "c-worker-2")]
    with pytest.raises(ResizeFailed, match="no drain for workers"):
        registry.get("generic").drain(None, leaving)


def test_a_plugin_that_names_its_roles_resizes_them():
    class Own(BasePlugin):
        name = "own"
        resizable = ("worker",)

    assert Own().resize_refusal(ResizeAsk("worker", 3, 2, stateful=True)) is None
    assert Own().resizable_roles({"master": True, "worker": True}) == ["worker"]


@pytest.mark.parametrize("name", registry.PRODUCTS)
def test_each_products_slice_of_the_catalog_holds_only_its_own_plugins_versions(name):
    import json

    path = registry.HOME / name / "catalog.json"
    assert path in registry.catalog_slices()
    versions = [v for p in json.loads(path.read_text())["products"] for v in p["versions"]]
    assert versions and {v["plugin"] for v in versions} == {name}
    assert registry.get(name).name == name

"""A bool launch option may add one instance of a role or one disk (true is 1, false 0): Spark's
notebook instance."""

import pytest

from apps.catalog import options
from apps.catalog.definition import definition_fields
from apps.catalog.services import default_catalog
from apps.catalog.spec import DefinitionError, parse_definition

from .factories import make_version

EXTRA = {
    "name": "extra",
    "min": 0,
    "max": 1,
    "default": 0,
    "cores": {"default": 1, "max": 1},
    "memory_mb": {"default": 512, "max": 512},
    "disks": {"default": 1, "min": 1, "max": 1},
}


def with_extra(option: dict) -> dict:
    data = definition_fields(make_version())
    data["roles"].append(dict(EXTRA))
    data["options_schema"]["optional"]["extra"] = option
    return data


def extra_option(**changes) -> dict:
    option = {
        "type": "bool",
        "default": False,
        "description": "One more",
        "sets": "count",
        "roles": ["extra"],
    }
    return {**option, **changes}


def roles_of(spec: options.ClusterSpec) -> list[str]:
    return [i.role for i in spec.instances]


def test_a_bool_option_adds_its_roles_instance_when_true():
    parsed = parse_definition(with_extra(extra_option()))
    assert "extra" not in roles_of(options.resolve(parsed, {}))
    for given in (True, "true"):  # JSON, or a form's checkbox
        spec = options.resolve(parsed, {"extra": given})
        assert roles_of(spec).count("extra") == 1
        assert spec.options["extra"] is True
    assert "extra" not in roles_of(options.resolve(parsed, {"extra": "false"}))


def test_a_bool_option_sets_only_a_count_or_disks():
    with pytest.raises(DefinitionError) as caught:
        parse_definition(with_extra(extra_option(sets="cores")))
    assert [str(p) for p in caught.value.problems] == [
        "options_schema.optional.extra.sets: a bool option sets only count or disks, not cores"
    ]


def spark_definition():
    spark = next(p for p in default_catalog() if p["name"] == "spark")
    return parse_definition(spark["versions"][0])


def test_spark_with_notebook_has_a_notebook_instance_with_a_disk_and_its_uis():
    parsed = spark_definition()
    plain = options.resolve(parsed, {})
    assert "notebook" not in roles_of(plain)
    spec = options.resolve(parsed, {"notebook": True, "size": 1})
    (notebook,) = [i for i in spec.instances if i.role == "notebook"]
    assert (notebook.disks, notebook.memory_mb) == (1, 2048)
    uis = {p.port: p.name for p in parsed.ports if p.role == "notebook" and p.ui}
    assert uis == {8888: "JupyterLab", 4040: "Spark application UI of the notebook's session"}

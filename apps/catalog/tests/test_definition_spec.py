"""The typed definition (apps.catalog.spec): parsed once, each problem named by its path."""

import pytest
from django.core.exceptions import ValidationError

from apps.catalog.definition import definition_fields
from apps.catalog.spec import DefinitionError, ProductDefinition, Role, parse_definition

from .factories import make_version


def fields(**changes) -> dict:
    found = definition_fields(make_version())
    found.update(changes)
    return found


def problems(data: dict) -> list[str]:
    with pytest.raises(DefinitionError) as caught:
        parse_definition(data)
    return [str(p) for p in caught.value.problems]


def test_it_parses_a_definition_into_typed_objects():
    parsed = parse_definition(fields())
    assert isinstance(parsed, ProductDefinition)
    worker = parsed.role("worker")
    assert isinstance(worker, Role) and worker.bounds("cores") == (1, 2, 4)
    assert parsed.role("master").bounds("count") == (1, 1, 1)
    assert list(parsed.options) == ["size", "cpu", "disks", "mem", "replication", "secure", "label"]
    assert parsed.option_sections["replication"] == "advanced"
    assert parsed.options["size"].sets == "count" and parsed.options["size"].roles == ["worker"]
    assert [r.name for r in parsed.targeted_roles(parsed.options["disks"])] == ["master", "worker"]
    assert "worker_hosts" in parsed.known_placeholders()


def test_a_missing_field_is_named_by_its_path():
    data = fields()
    del data["roles"][1]["max"]
    assert problems(data) == ["roles[1].max: required"]


def test_a_missing_option_default_is_named_by_its_path():
    data = fields()
    del data["options_schema"]["optional"]["cpu"]["default"]
    assert problems(data) == ["options_schema.optional.cpu.default: required"]


def test_a_wrong_type_is_named_by_its_path():
    data = fields()
    data["roles"][1]["cores"]["max"] = "4"  # JSON as written: "4" is not 4
    data["ports"] = [{"role": "master", "port": 80, "name": "UI", "ui": "yes"}]
    assert problems(data) == [
        "roles[1].cores.max: must be an integer, got '4'",
        "ports[0].ui: must be true or false",
    ]


def test_a_bool_is_not_a_count():
    data = fields()
    data["roles"][0]["max"] = True
    assert problems(data) == ["roles[0].max: must be an integer, got True"]


def test_a_default_out_of_range_is_named_by_its_path():
    data = fields()
    data["roles"][1]["cores"] = {"default": 8, "max": 4}
    assert problems(data) == ["roles[1].cores: needs min <= default <= max, got 1 <= 8 <= 4"]

    data = fields()
    data["options_schema"]["optional"]["cpu"]["default"] = 20
    assert problems(data) == [
        "options_schema.optional.cpu.default: must be between 1 and 12, got 20"
    ]


def test_an_unknown_key_names_the_keys_allowed_there():
    data = fields()
    data["options_schema"]["optional"]["cpu"]["maximum"] = 3
    (problem,) = problems(data)
    assert problem.startswith("options_schema.optional.cpu: unknown key 'maximum' (allowed: ")
    assert "max_length" in problem


def test_an_unknown_option_type_names_the_types():
    data = fields()
    data["options_schema"]["advanced"]["replication"]["type"] = "float"
    assert problems(data) == [
        "options_schema.advanced.replication.type: must be one of 'int', 'str', 'bool' or "
        "'choice', got 'float'"
    ]


def test_cross_field_checks_name_their_paths():
    data = fields(
        ports=[{"role": "ghost", "port": 80, "name": "x"}],
        configure=[{"role": "master", "command": ["echo", "{{nope}}"]}],
    )
    data["options_schema"]["optional"]["cpu"]["roles"] = ["worker", "phantom"]
    found = problems(data)
    assert "ports[0].role: no role named 'ghost'" in found
    assert "configure[0].command[1]: unknown placeholder {{nope}}" in found
    assert any(
        p.startswith("options_schema.optional.cpu.roles: no role named 'phantom'") for p in found
    )


def test_the_error_groups_problems_by_model_field():
    data = fields(disk_kind="tape", capabilities=["net_admin"])
    with pytest.raises(DefinitionError) as caught:
        parse_definition(data)
    grouped = caught.value.by_field()
    assert set(grouped) == {"disk_kind", "capabilities"}
    assert grouped["disk_kind"] == ["disk_kind: must be one of 'hdd', 'ssd' or 'nvme', got 'tape'"]


def test_the_version_parses_its_definition_once_and_clean_parses_it_afresh():
    version = make_version()
    assert version.definition is version.definition  # cached
    version.roles[1]["max"] = 4
    version.clean()
    assert version.definition.role("worker").max == 4


def test_clean_puts_each_problem_on_its_model_field():
    version = make_version()
    version.roles[0]["memory_mb"] = {"default": 32}
    with pytest.raises(ValidationError) as caught:
        version.clean()
    assert caught.value.message_dict == {
        "roles": ["roles[0].memory_mb: needs min <= default <= max, got 64 <= 32 <= 32"]
    }


def test_every_product_of_the_shipped_catalog_parses():
    from apps.catalog.services import default_catalog

    for product in default_catalog():
        for version in product["versions"]:
            parsed = parse_definition(version)
            assert parsed.roles and parsed.options, (product["name"], version["version"])


def test_a_default_of_no_scalar_type_is_one_problem_not_one_per_type():
    data = fields()
    data["options_schema"]["advanced"]["label"]["default"] = ["x"]
    data["options_schema"]["advanced"]["replication"]["choices"] = [1, {"two": 2}]
    assert sorted(problems(data)) == [
        "options_schema.advanced.label.default: must be a number, a string or true/false, "
        "got ['x']",
        "options_schema.advanced.replication.choices[1]: must be a number, a string or "
        "true/false, got {'two': 2}",
    ]


def test_an_environment_variable_named_like_a_type_keeps_its_name_in_the_path():
    data = fields(environment={"int": 5})
    assert problems(data) == ["environment.int: must be a string, got 5"]


def test_check_value_words_a_broken_option_definition():
    from apps.catalog.options import check_value

    value, problem = check_value({"type": "int", "default": [1], "description": "x"}, 3)
    assert value is None
    assert problem == (
        "the option's definition is broken: option.default: must be a number, a string or "
        "true/false, got [1]"
    )
    assert check_value({"type": "int", "default": 1, "description": "x", "max": 2}, "2") == (
        2,
        None,
    )


@pytest.mark.django_db
def test_the_admin_shows_each_problem_on_its_field_naming_the_path(client, admin_user):
    import json

    from django.urls import reverse

    from apps.catalog.models import ProductVersion
    from apps.catalog.services import load_catalog

    load_catalog()
    client.force_login(admin_user)
    version = ProductVersion.objects.get(product__name="demo")
    schema = json.loads(json.dumps(version.options_schema))
    schema["required"]["size"]["default"] = 99
    form = {
        "product": version.product_id,
        "version": version.version,
        "image": version.image,
        "description": version.description,
        "disk_kind": version.disk_kind,
        "enabled": "on",
        "roles": json.dumps(version.roles),
        "options_schema": json.dumps(schema),
        "ports": json.dumps([{"role": "master", "port": 80, "name": "UI", "ui": "yes"}]),
        "environment": "{}",
        "configure": "[]",
        "capabilities": "[]",
    }
    page = client.post(reverse("admin:catalog_productversion_change", args=[version.pk]), form)

    assert page.status_code == 200  # the form again, nothing saved
    errors = page.context["adminform"].form.errors
    assert set(errors) == {"options_schema", "ports"}
    assert errors["options_schema"][0].startswith("options_schema.required.size.default: must be")
    assert errors["ports"] == ["ports[0].ui: must be true or false"]

import pytest
from django.core.exceptions import ValidationError

from apps.catalog.options import validate_definition

from .factories import make_version


def problems_of(version) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as caught:
        validate_definition(version)
    return caught.value.message_dict


def test_it_accepts_a_valid_definition():
    validate_definition(make_version())  # raises on any problem
    make_version().clean()


def test_it_rejects_a_role_whose_min_exceeds_its_max():
    version = make_version()
    version.roles[1].update(min=5, max=3, default=4)
    problems = problems_of(version)
    assert problems == {"roles": ["roles[1]: count needs min <= default <= max, got 5 <= 4 <= 3"]}


def test_it_rejects_an_option_default_outside_its_bounds():
    version = make_version()
    version.options_schema["optional"]["cpu"]["default"] = 20
    problems = problems_of(version)
    assert problems["options_schema"] == [
        "options_schema.optional.cpu.default: must be between 1 and 12, got 20"
    ]


def test_it_rejects_an_option_default_beyond_a_role_maximum():
    version = make_version()
    version.options_schema["required"]["size"]["default"] = 10  # worker role max is 8
    problems = problems_of(version)
    assert problems["options_schema"] == [
        "options_schema.required.size.default: 10 is outside role worker's count range 1..8"
    ]


def test_it_rejects_options_reaching_unknown_roles_and_launch_key_names():
    version = make_version()
    version.options_schema["optional"]["cpu"]["roles"] = ["ghost"]
    version.options_schema["advanced"]["lease"] = {
        "type": "int",
        "default": 1,
        "description": "clashes with a launch key",
    }
    problems = problems_of(version)["options_schema"]
    assert any("cpu.roles: no role named 'ghost'" in p for p in problems)
    assert any(p.startswith("options_schema.advanced.lease:") for p in problems)


def test_it_reports_problems_in_every_field_at_once():
    version = make_version(
        disk_kind="floppy",
        ports=[{"role": "nobody", "port": 70000, "name": "x"}],
        environment={"BAD": "{{nope}}"},
        configure=[{"role": "master", "command": "not a list"}],
        capabilities=["net_admin"],
    )
    version.options_schema["advanced"]["replication"]["type"] = "float"
    problems = problems_of(version)
    assert set(problems) == {
        "disk_kind",
        "ports",
        "environment",
        "configure",
        "capabilities",
        "options_schema",
    }
    assert "ports[0].role: no role named 'nobody'" in problems["ports"]
    assert any("70000" in p for p in problems["ports"])
    assert problems["environment"] == ["environment.BAD: unknown placeholder {{nope}}"]
    assert problems["configure"] == ["configure[0].command: must be a list, got 'not a list'"]


def test_it_rejects_typos_in_keys():
    version = make_version()
    version.roles[0]["coers"] = {"default": 1}
    problems = problems_of(version)
    assert any("unknown key 'coers'" in p for p in problems["roles"])


def test_it_rejects_an_empty_role_list():
    problems = problems_of(make_version(roles=[]))
    assert problems["roles"] == ["roles: must be a non-empty list of role definitions"]
    assert problems["ports"] == ["ports[0].role: no role named 'master'"]


BAD_SETTINGS = [["dfs.data.dir"], {"dfs.data.dir": ""}, {"": "{{data_dirs}}"}]


@pytest.mark.parametrize("settings", BAD_SETTINGS)
def test_it_rejects_data_settings_that_are_not_a_map_of_names_to_templates(settings):
    version = make_version()
    version.roles[1]["data_settings"] = settings
    problems = problems_of(version)
    assert len(problems["roles"]) == 1
    assert problems["roles"][0].startswith("roles[1].data_settings")


def test_it_accepts_data_settings():
    version = make_version()
    version.roles[1]["data_settings"] = {"dfs.datanode.data.dir": "{{data_dirs_csv}}"}
    validate_definition(version)

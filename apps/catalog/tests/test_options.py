import pytest

from apps.catalog.options import LAUNCH_KEYS, OptionsError, describe, resolve

from .factories import make_version


def errors_of(version, options) -> dict[str, str]:
    with pytest.raises(OptionsError) as caught:
        resolve(version, options)
    return caught.value.errors


def test_it_resolves_empty_options_to_the_defaults():
    spec = resolve(make_version(), {})
    assert [(i.role, i.index) for i in spec.instances] == [
        ("master", 0),
        ("worker", 0),
        ("worker", 1),
    ]
    master, worker = spec.instances[0], spec.instances[1]
    # cpu and mem reach only the workers; disks reaches every role.
    assert (master.cores, master.memory_mb, master.disks) == (1, 512, 1)
    assert (worker.cores, worker.memory_mb, worker.disks) == (2, 1024, 1)
    assert spec.options == {
        "size": 2,
        "cpu": 2,
        "disks": 1,
        "mem": 1024,
        "replication": 2,
        "secure": False,
        "label": "x",
    }


def test_it_uses_the_role_image_else_the_version_image():
    spec = resolve(make_version(), {})
    assert spec.instances[0].image == "example/base:1"
    assert spec.instances[1].image == "example/worker:1"


def test_it_applies_size_cpu_mem_and_disks():
    spec = resolve(make_version(), {"size": 5, "cpu": 4, "mem": 4096, "disks": 2})
    workers = [i for i in spec.instances if i.role == "worker"]
    assert len(workers) == 5 and spec.count("master") == 1
    assert {(w.cores, w.memory_mb, w.disks) for w in workers} == {(4, 4096, 2)}
    assert spec.disks == 6 * 2 and spec.cores == 1 + 5 * 4


def test_it_accepts_numbers_sent_as_form_strings():
    spec = resolve(make_version(), {"size": "3", "replication": "3", "secure": "true"})
    assert spec.count("worker") == 3
    assert spec.options["replication"] == 3 and spec.options["secure"] is True


def test_it_treats_none_as_the_default():
    assert resolve(make_version(), {"size": None}).count("worker") == 2


def test_it_rejects_unknown_options_by_name():
    errors = errors_of(make_version(), {"colour": "red"})
    assert list(errors) == ["colour"]
    assert "unknown option 'colour'" in errors["colour"]
    assert "size" in errors["colour"] and "disk_kind" in errors["colour"]


def test_it_accepts_and_ignores_launch_keys():
    options = {
        "name": "mine",
        "lease": "2h",
        "reuse_data_from": 7,
        "idle_minutes": 30,
        "allowed_sources": ["10.8.0.0/16"],
    }
    keys = {"name", "lease", "reuse_data_from", "disk_kind", "idle_minutes", "allowed_sources"}
    assert keys == LAUNCH_KEYS
    assert resolve(make_version(), options) == resolve(make_version(), {})


def test_it_lets_disk_kind_override_the_version_kind():
    spec = resolve(make_version(), {"disk_kind": "ssd"})
    assert spec.disk_kind == "ssd"
    assert {i.disk_kind for i in spec.instances} == {"ssd"}


def test_it_rejects_an_unknown_disk_kind():
    errors = errors_of(make_version(), {"disk_kind": "floppy"})
    assert errors == {"disk_kind": "must be one of hdd, ssd, nvme, got 'floppy'"}


def test_it_names_the_bounds_of_an_out_of_range_value():
    assert errors_of(make_version(), {"size": 40}) == {"size": "must be between 1 and 16, got 40"}
    assert errors_of(make_version(), {"size": 0}) == {"size": "must be between 1 and 16, got 0"}


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("size", "many", "must be an integer, got 'many'"),
        ("size", True, "must be an integer, got True"),
        ("size", 2.5, "must be an integer, got 2.5"),
        ("secure", "yes", "must be true or false, got 'yes'"),
        ("replication", 5, "must be one of 1, 2, 3, got 5"),
        ("label", 3, "must be a string, got 3"),
        ("label", "UPPER", "must match [a-z]+, got 'UPPER'"),
        ("label", "abcdefghij", "must be at most 8 characters, got 10"),
    ],
)
def test_it_rejects_wrong_types_naming_the_field(name, value, message):
    assert errors_of(make_version(), {name: value}) == {name: message}


def test_it_caps_an_option_by_the_roles_own_maximum():
    # size allows 16 but the worker role at most 8 instances.
    errors = errors_of(make_version(), {"size": 9})
    assert errors == {"size": "role worker allows at most 8 instances, got 9"}
    # disks reaches both roles: the master allows 2, the workers 6.
    errors = errors_of(make_version(), {"disks": 7})
    assert errors == {
        "disks": "master instances allow at most 2 disks, got 7; "
        "worker instances allow at most 6 disks, got 7"
    }


def test_it_reports_every_bad_field_at_once():
    errors = errors_of(
        make_version(),
        {"size": 40, "cpu": "lots", "colour": 1, "disk_kind": "tape", "mem": 100},
    )
    assert set(errors) == {"size", "cpu", "colour", "disk_kind", "mem"}
    assert errors["mem"] == "must be between 256 and 65536, got 100"
    assert "size: must be between 1 and 16" in str(OptionsError(errors))


def test_it_rejects_options_that_are_not_an_object():
    assert errors_of(make_version(), ["size"]) == {"options": "must be an object, got list"}


def test_it_describes_options_in_the_cesga_shape():
    described = describe(make_version())
    assert described["required"] == {"size": 2}
    assert described["optional"] == {"cpu": 2, "disks": 1, "mem": 1024}
    assert described["advanced"] == {"replication": 2, "secure": False, "label": "x"}
    assert described["descriptions"]["size"] == "Number of workers"
    assert described["fields"]["replication"]["choices"] == [1, 2, 3]
    assert described["fields"]["cpu"]["section"] == "optional"
    assert described["launch_keys"] == sorted(LAUNCH_KEYS)

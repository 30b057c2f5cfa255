"""Where an instance sees its disks: the one rule both catalog definitions and CESGA
registrations go through (apps/catalog/disk_paths.py)."""

import pytest

from apps.catalog import disk_paths
from apps.catalog.spec import DefinitionError, parse_definition


def test_it_defaults_to_data_1_to_n():
    assert disk_paths.destinations([], 3) == ["/data/1", "/data/2", "/data/3"]


def test_a_numbered_list_goes_on_in_its_own_numbering():
    assert disk_paths.destinations(["/data/0"], 3) == ["/data/0", "/data/1", "/data/2"]
    assert disk_paths.destinations(["/srv/disk7", "/srv/disk8"], 1) == ["/srv/disk7"]


def test_a_list_of_names_cannot_go_on():
    with pytest.raises(ValueError, match="only 1 disk paths are defined, for 2 disks"):
        disk_paths.destinations(["/srv/db"], 2)


@pytest.mark.parametrize(
    "path, problem",
    [
        ("data/1", "must be an absolute path"),
        ("/data/./1", "must be a normalised path"),
        ("/data/1/", "must be a normalised path"),
        ("/etc", "would hide the container's /etc"),
        ("/usr", "would hide the container's /usr"),
        ("/sys/fs/x", "lies inside /sys"),
        ("/data:ro", "must be a plain path"),
    ],
)
def test_a_bad_path_is_named(path, problem):
    assert problem in disk_paths.path_problem(path)


@pytest.mark.parametrize("path", ["/data/0", "/srv/db", "/var/lib/cassandra", "/opt/data"])
def test_ordinary_data_folders_are_fine(path):
    assert disk_paths.path_problem(path) is None


def test_repeated_and_nested_paths_are_named_by_position():
    assert disk_paths.list_problems(["/srv/db", "/srv/db", "/srv/db/x"]) == [
        (1, "/srv/db is used by another disk"),
        (2, "/srv/db/x and /srv/db are nested: one would hide the other"),
        (2, "/srv/db/x and /srv/db are nested: one would hide the other"),
    ]


def definition(**role) -> dict:
    return {
        "image": "x:1",
        "disk_kind": "hdd",
        "roles": [{"name": "db", "max": 3, **role}],
        "options_schema": {},
    }


def test_a_definition_carries_the_destination_per_disk():
    parsed = parse_definition(definition(disks={"max": 2}, disk_paths=["/srv/a", "/srv/b"]))
    assert parsed.disk_destinations("db", 2) == ["/srv/a", "/srv/b"]
    assert parsed.disk_destinations("other", 1) == ["/data/1"]


def test_a_definition_with_too_few_or_bad_paths_names_each_by_its_path():
    with pytest.raises(DefinitionError) as raised:
        parse_definition(definition(disks={"max": 3}, disk_paths=["/srv/a", "proc"]))
    text = str(raised.value)
    assert "roles[0].disk_paths[1]: must be an absolute path in the container" in text
    assert "roles[0].disk_paths: names 2 paths but an instance may have 3 disks" in text

"""A checkout's lab takes a place (node addresses, segments' subnet) no other lab on the machine
holds, keeps it, and the settings read it: CI's fresh clone beside a running or killed lab."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from apps.lab import place
from apps.lab.place import PLACES, Place

OWN = "aaaaaaaa"
OTHER_LINK = "plbbbbbbh00"  # a shim of another lab (its key starts bbbbbb)
OWN_LINK = "plaaaaaah03"


def test_a_lone_checkout_takes_the_first_place():
    assert place.choose(OWN, [("default", "eth0")], {"127.0.0.1"}) == Place.number(0)


def test_another_labs_routes_push_a_new_lab_to_the_next_place():
    routes = [("10.214.0.0/24", OTHER_LINK), ("10.214.7.0/24", "plbbbbbbh07")]
    assert place.choose(OWN, routes, set()) == Place.number(1)


def test_a_route_overlapping_the_subnet_in_any_way_takes_it():
    assert place.choose(OWN, [("10.214.0.0/15", "wg0")], set()) == Place.number(2)


def test_addresses_something_listens_on_take_the_place():
    assert place.choose(OWN, [], {"127.0.1.1", "127.0.2.4"}) == Place.number(2)


def test_a_lab_whose_own_links_route_a_place_keeps_it():
    """A lab made before places were kept finds itself again, and not another lab's place."""
    routes = [("10.214.0.0/24", OTHER_LINK), ("10.215.3.0/24", OWN_LINK)]
    assert place.choose(OWN, routes, {"127.0.2.1"}) == Place.number(1)


def test_a_full_machine_is_refused_naming_the_way_out():
    routes = [(f"10.{214 + n}.0.0/24", f"plbbbbbbh{n:02}") for n in range(PLACES)]
    with pytest.raises(RuntimeError, match="lab down"):
        place.choose(OWN, routes, set())


def test_the_choice_is_kept_once_made(tmp_path, monkeypatch):
    monkeypatch.setattr(place.host, "listeners", lambda: [])  # whatever this machine runs
    monkeypatch.setattr(place, "_routes", lambda: [("10.214.0.0/24", OTHER_LINK)])
    assert place.saved(tmp_path) == place.DEFAULT  # nothing chosen yet
    assert place.ensure(tmp_path) == Place.number(1)
    monkeypatch.setattr(place, "_routes", lambda: [])  # the other lab went down meanwhile
    assert place.ensure(tmp_path) == Place.number(1)
    assert place.saved(tmp_path) == Place.number(1)
    assert json.loads((tmp_path / place.PLACE_FILE).read_text())["address_prefix"] == "127.0.2."


def test_the_settings_read_the_checkouts_place(tmp_path):
    (tmp_path / place.PLACE_FILE).write_text(json.dumps(vars(Place.number(5))))
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("PLATTER_LAB_") and key != "DJANGO_SETTINGS_MODULE"
    }
    env.update(PLATTER_STATE_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="portal.settings.dev")
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.LAB_ADDRESS_PREFIX, s.LAB_SEGMENTS_SUBNET)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[3],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split() == ["127.0.6.", "10.219.0.0/16"]

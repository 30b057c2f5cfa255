"""One launch parser (apps.clusters.launch_requests.parse_launch) for the three front doors:
the web form, the REST API and CESGA's launch call give the same answer to the same bad
request."""

import pytest

from apps.catalog.models import ProductVersion
from apps.catalog.services import load_catalog
from apps.clusters.launch_requests import LEASE_MIN_HOURS, LaunchError, parse_launch
from apps.clusters.models import Cluster

from .conftest import make_cluster

pytestmark = pytest.mark.django_db


def errors_of(version, data, owner) -> dict[str, str]:
    with pytest.raises(LaunchError) as caught:
        parse_launch(version, data, owner)
    return caught.value.errors


def test_it_fills_in_the_defaults_and_keeps_what_was_given(demo, alice):
    request = parse_launch(demo, {}, alice)
    assert request.name is None and request.lease_hours is None
    assert request.reuse_data_from is None and request.options == {}
    assert request.disk_kind == demo.disk_kind
    assert [(i.role, i.index) for i in request.spec.instances] == [
        ("master", 0),
        ("worker", 0),
        ("worker", 1),
    ]


def test_it_reads_form_strings_as_their_types(demo, alice):
    request = parse_launch(
        demo, {"name": "web", "size": "3", "lease": "1.5", "disk_kind": "ssd", "cpu": ""}, alice
    )
    assert (request.name, request.lease_hours, request.disk_kind) == ("web", 1.5, "ssd")
    assert request.options == {"size": 3, "disk_kind": "ssd"}  # "" is the default, not given
    assert request.spec.count("worker") == 3
    assert {i.disk_kind for i in request.spec.instances} == {"ssd"}


def test_it_names_every_bad_field_at_once(demo, alice):
    errors = errors_of(
        demo,
        {"name": "not a slug!", "lease": "soon", "disk_kind": "tape", "size": 99, "colour": 1},
        alice,
    )
    assert set(errors) == {"name", "lease", "disk_kind", "size", "colour"}
    assert errors["size"] == "must be between 1 and 8, got 99"
    assert errors["disk_kind"] == "must be one of hdd, ssd, nvme, got 'tape'"
    assert errors["name"].startswith("must be letters, digits, dashes and underscores")
    assert errors["colour"].startswith("unknown option 'colour'")


@pytest.mark.parametrize(
    "lease", [0, -1, LEASE_MIN_HOURS / 2, "nan", float("inf"), True, "9" * 5000, 10**400]
)
def test_a_lease_below_the_minimum_or_not_a_number_is_refused(demo, alice, lease):
    assert set(errors_of(demo, {"lease": lease}, alice)) == {"lease"}


def test_a_lease_beyond_the_sites_cap_is_refused_by_the_parser(demo, alice, settings):
    settings.SCHEDULER_MAX_LEASE_HOURS = 10
    assert errors_of(demo, {"lease": 11}, alice) == {
        "lease": "must be a number of hours from 0.01 to 10; got 11"
    }
    assert parse_launch(demo, {"lease": 10}, alice).lease_hours == 10


def test_only_a_destroyed_cluster_of_yours_of_the_same_product_is_reused(demo, alice, bob):
    theirs = make_cluster(bob, demo, state="destroyed")
    running = make_cluster(alice, demo, state="running")
    mine = make_cluster(alice, demo, state="destroyed")
    assert errors_of(demo, {"reuse_data_from": theirs.id}, alice) == {
        "reuse_data_from": f"you have no cluster {theirs.id}"
    }
    assert (
        "is running" in errors_of(demo, {"reuse_data_from": running.id}, alice)["reuse_data_from"]
    )
    for bad in ("x", -1, 2**70, 1.5):
        assert set(errors_of(demo, {"reuse_data_from": bad}, alice)) == {"reuse_data_from"}
    assert parse_launch(demo, {"reuse_data_from": str(mine.id)}, alice).reuse_data_from == mine

    spark = ProductVersion.objects.get(product__name="spark")
    problem = errors_of(spark, {"reuse_data_from": mine.id}, alice)["reuse_data_from"]
    assert "another product" in problem


def test_a_body_that_is_not_an_object_is_refused(demo, alice):
    assert errors_of(demo, [1, 2], alice) == {"options": "must be a JSON object, got list"}


# ---------------------------------------------------------------- the three front doors

BAD = [
    ({"size": 99}, "size"),
    ({"lease": "0.001"}, "lease"),
    ({"disk_kind": "tape"}, "disk_kind"),
    ({"message": "$(reboot)"}, "message"),
]


@pytest.mark.parametrize(("bad", "field"), BAD)
def test_the_web_form_the_api_and_cesga_give_the_same_error(
    api, cesga, client, alice, demo, bad, field
):
    body = {"name": "same", **bad}
    rest = api("owner").post("/api/v1/products/demo/1.0", body, format="json")
    cesgas = cesga("owner").post("/bigdata/api/v1/products/demo/1.0", body, format="json")
    client.force_login(alice)
    web = client.post("/catalog/demo/1.0/launch", body)

    assert (rest.status_code, cesgas.status_code, web.status_code) == (400, 400, 400)
    message = rest.json()["fields"][field]
    assert cesgas.json()["fields"][field] == message
    assert cesgas.json()["error"] == "bad request"  # CESGA's error shape kept
    assert web.context["form"].errors[field] == [message]
    assert message in web.content.decode().replace("&#x27;", "'").replace("&quot;", '"')
    assert not Cluster.objects.exists()


def test_the_cluster_list_launch_goes_through_the_same_parser(api, demo):
    body = {"product": "demo", "version": "1.0", "lease": "0.001"}
    response = api("owner").post("/api/v1/clusters", body, format="json")
    assert response.status_code == 400
    single = api("owner").post("/api/v1/products/demo/1.0", {"lease": "0.001"}, format="json")
    assert response.json()["fields"] == single.json()["fields"]


def test_every_catalog_version_parses_its_own_defaults(alice):
    load_catalog()
    for version in ProductVersion.objects.all():
        request = parse_launch(version, {}, alice)
        assert request.spec.instances, str(version)

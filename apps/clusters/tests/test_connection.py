"""The connection selector and the per-cluster credentials: what each viewer is shown, and
that every connection template of the catalog fills."""

import pytest

from apps.catalog.models import ProductVersion
from apps.catalog.options import resolve
from apps.catalog.services import load_catalog
from apps.clusters import access, credentials
from apps.clusters.connection import ConnectTemplateError, connection_details, render
from apps.clusters.models import Cluster, ClusterCredentials
from apps.clusters.names import free_name
from apps.clusters.services import create_cluster
from apps.inventory.models import Address

from .factories import make_network

pytestmark = pytest.mark.django_db


@pytest.fixture
def catalog(db):
    load_catalog()


def launched(owner, product: str, version: str, state: str = "running", **kwargs) -> Cluster:
    """A cluster of the catalog's default shape with addresses, as placement leaves it."""
    found = ProductVersion.objects.get(product__name=product, version=version)
    spec = resolve(found, {})
    name = free_name(owner.id, product)  # names are unique per owner
    cluster = create_cluster(owner, found, name, spec.instances, {}, **kwargs)
    network = make_network()
    free = iter(Address.objects.filter(network=network).order_by("id"))
    for instance in cluster.instances.all():
        instance.address = next(free)
        instance.save(update_fields=["address"])
    Cluster.objects.filter(id=cluster.id).update(state=state)
    cluster.refresh_from_db()
    return cluster


def values(details) -> list[str]:
    return [s.value for s in details.strings]


def test_it_shows_the_owner_the_spark_master_url_and_the_secret(catalog, alice):
    cluster = launched(alice, "spark", "4.3.0")
    made = credentials.ensure_credentials(cluster)
    master = cluster.instances.get(role="master").address.ip

    details = connection_details(cluster, alice)

    assert f"spark://{master}:7077" in values(details)
    submit = next(v for v in values(details) if v.startswith("spark-submit"))
    assert f"--conf spark.authenticate.secret={made.secret}" in submit
    assert details.credentials == {
        "username": "alice",
        "password": made.password,
        "secret": made.secret,
    }
    assert not details.credentials_hidden


def test_it_hides_credentials_from_anyone_but_the_owner_and_staff(catalog, alice, bob, admin_user):
    cluster = launched(alice, "cassandra", "5.0")
    made = credentials.ensure_credentials(cluster)

    seen_by_bob = connection_details(cluster, bob)
    assert seen_by_bob.credentials is None and seen_by_bob.credentials_hidden
    text = repr(seen_by_bob.as_dict())
    assert made.password not in text and made.secret not in text
    assert any("-u <user> -p <password>" in v for v in values(seen_by_bob))

    seen_by_staff = connection_details(cluster, admin_user)
    assert seen_by_staff.credentials["password"] == made.password
    assert any(f"-p {made.password}" in v for v in values(seen_by_staff))


def test_it_lists_every_cassandra_node_as_a_contact_point(catalog, alice):
    cluster = launched(alice, "cassandra", "5.0")
    credentials.ensure_credentials(cluster)
    ips = [i.address.ip for i in cluster.instances.all()]

    contact = next(v for v in values(connection_details(cluster, alice)) if "contact" in v)

    assert contact == (
        f"contact points {','.join(f'{ip}:9042' for ip in ips)}, local datacenter dc1, user alice"
    )


def test_it_gives_one_mongodb_url_per_ferretdb_member_with_the_login(catalog, alice):
    cluster = launched(alice, "mongodb", "ferretdb-1.24")
    made = credentials.ensure_credentials(cluster)
    member = cluster.instances.get()

    (url,) = [v for v in values(connection_details(cluster, alice)) if v.startswith("mongodb")]

    assert url == (
        f"mongodb://alice:{made.password}@{member.address.ip}:27017/"
        "?directConnection=true&authSource=admin"
    )


def test_a_destroyed_cluster_has_endpoints_but_nothing_to_connect_with(catalog, alice):
    cluster = launched(alice, "hadoop", "3.4.2", state="destroyed")
    credentials.ensure_credentials(cluster)

    details = connection_details(cluster, alice)

    assert details.endpoints and details.strings == [] and details.credentials is None


@pytest.mark.parametrize(
    "product, version",
    [
        (v["product__name"], v["version"])
        for v in [
            {"product__name": "spark", "version": "4.3.0"},
            {"product__name": "hadoop", "version": "3.4.2"},
            {"product__name": "cassandra", "version": "5.0"},
            {"product__name": "mongodb", "version": "ferretdb-1.24"},
            {"product__name": "mongodb", "version": "7.0"},
        ]
    ],
)
def test_every_catalog_connection_template_fills(catalog, alice, product, version):
    cluster = launched(alice, product, version)
    credentials.ensure_credentials(cluster)

    strings = values(connection_details(cluster, alice))

    assert strings, f"{product} {version} declares no connection string"
    assert not [s for s in strings if "{{" in s or "<" in s]


def test_an_unknown_placeholder_is_named():
    with pytest.raises(ConnectTemplateError, match="nope"):
        render("x://{{nope}}", {})


def test_credentials_are_made_once_and_reach_every_container(catalog, alice):
    cluster = launched(alice, "spark", "4.3.0", state="placing")
    master = cluster.instances.get(role="master")

    first = access.credential_environment(cluster, master)
    again = access.credential_environment(cluster, master)

    assert first == again
    assert set(first) == {"PLATTER_AUTH_USER", "PLATTER_AUTH_PASSWORD", "PLATTER_AUTH_SECRET"}
    assert len(first["PLATTER_AUTH_PASSWORD"]) >= 32 and len(first["PLATTER_AUTH_SECRET"]) == 64
    assert ClusterCredentials.objects.filter(cluster=cluster).count() == 1


def test_two_clusters_never_share_a_password(catalog, alice):
    one = credentials.ensure_credentials(launched(alice, "spark", "4.3.0"))
    two = credentials.ensure_credentials(launched(alice, "spark", "4.3.0"))
    assert one.password != two.password and one.secret != two.secret


def test_a_cluster_reusing_data_gets_the_same_login_back(catalog, alice):
    old = launched(alice, "cassandra", "5.0", state="destroyed")
    before = credentials.ensure_credentials(old)
    new = launched(alice, "cassandra", "5.0", state="placing", reuse_data_of=old)

    after = credentials.ensure_credentials(new)

    assert (after.username, after.password, after.secret) == (
        before.username,
        before.password,
        before.secret,
    )


@pytest.mark.parametrize(
    "owner, login",
    [
        ("alice", "alice"),
        ("Jane.Doe@example.org", "jane_doe_example_org"),
        ("cassandra", "cassandra_user"),
        ("42", "u_42"),
        ("---", "u"),
    ],
)
def test_usernames_are_plain_identifiers_no_product_keeps(owner, login):
    assert credentials.username_for(owner) == login


def test_redact_masks_the_password_and_the_secret(catalog, alice):
    made = credentials.ensure_credentials(launched(alice, "spark", "4.3.0"))
    text = f"failed: password {made.password}, secret {made.secret}"
    assert credentials.redact(text, made) == "failed: password ********, secret ********"

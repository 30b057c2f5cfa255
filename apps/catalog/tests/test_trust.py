"""A product gets no more than Docker's defaults unless an admin trusts it, and a definition
has no way to ask for privileges, the host's network or namespaces, devices or host paths."""

import json

import pytest
from django.core.exceptions import ValidationError

from apps.catalog.models import ProductVersion
from apps.catalog.services import (
    CatalogFileError,
    is_launchable,
    launchable_versions,
    load_catalog,
    needs_trust,
)

from .factories import make_version

# What `docker run` flags would give a container more than its product needs.
HOST_ACCESS = {
    "privileged": True,
    "network_mode": "host",
    "pid_mode": "host",
    "ipc_mode": "host",
    "devices": ["/dev/sda:/dev/sda"],
    "binds": ["/:/host"],
    "volumes": ["/var/run/docker.sock:/var/run/docker.sock"],
    "cap_add": ["SYS_ADMIN"],
    "security_opt": ["apparmor=unconfined"],
}


@pytest.mark.parametrize("key", sorted(HOST_ACCESS))
def test_a_role_cannot_ask_for_host_access(key):
    version = make_version()
    version.roles[0][key] = HOST_ACCESS[key]
    with pytest.raises(ValidationError) as refused:
        version.clean()
    assert f"unknown key {key!r}" in str(refused.value.message_dict["roles"])


@pytest.mark.parametrize("key", sorted(HOST_ACCESS))
def test_a_catalog_file_cannot_ask_for_host_access(db, tmp_path, key):
    path = tmp_path / "catalog.json"
    item = {"version": "1.0", "image": "x:1", "roles": make_version().roles, key: HOST_ACCESS[key]}
    product = {"name": "sneaky", "title": "S", "versions": [item]}
    path.write_text(json.dumps({"products": [product]}))
    with pytest.raises(CatalogFileError, match=f"unknown keys {key}"):
        load_catalog(path)
    assert not ProductVersion.objects.filter(product__name="sneaky").exists()


def test_capabilities_beyond_dockers_defaults_need_an_admins_trust(db):
    load_catalog()
    version = ProductVersion.objects.get(product__name="demo")
    version.capabilities = ["CHOWN", "NET_RAW", "SYS_ADMIN", "NET_ADMIN"]
    version.full_clean()  # saving is allowed: the version waits for an admin's review
    version.save()
    # NET_RAW too, though Docker grants it: raw sockets forge ARP on a cluster's segment.
    assert needs_trust(version) == ["NET_ADMIN", "NET_RAW", "SYS_ADMIN"]
    assert not is_launchable(version)
    assert not launchable_versions().filter(pk=version.pk).exists()
    version.trusted = True
    version.save()
    assert is_launchable(version)
    assert launchable_versions().filter(pk=version.pk).exists()


def test_capability_names_are_plain_names():
    version = make_version(capabilities=["ALL"])
    version.clean()  # "ALL" is a name, but never one of Docker's defaults:
    assert needs_trust(version) == ["ALL"]
    with pytest.raises(ValidationError, match="NET_ADMIN"):
        make_version(capabilities=["cap_sys_admin; id"]).clean()

"""CESGA product registration: the four calls, staff only, and what they refuse."""

import json

import pytest

from apps.api.cesga.models import CesgaRegistration
from apps.catalog.models import ProductRevision, ProductVersion
from apps.clusters.models import Cluster

from .cesga_product import BASE, OPTIONS, ORCHESTRATOR, TEMPLATE, register


def test_staff_registers_a_product_with_cesgas_four_calls_and_a_user_launches_it(cesga, catalog):
    admin = cesga("admin")
    created, options, template, orchestrator = register(admin)

    assert created.status_code == 201, created.content
    assert created.json()["enabled"] is False
    assert created.json()["missing"] == ["template", "options"]
    assert options.status_code == 200 and options.json()["missing"] == ["template"]
    assert template.status_code == 200, template.content
    body = template.json()
    assert body["enabled"] is True and body["missing"] == []
    assert body["roles"] == [
        {"name": "master", "count": 1, "image": "platter/lab-base:1"},
        {"name": "worker", "count": 2, "image": "platter/lab-base:1"},
    ]
    assert "node master: docker_opts ignored: -t; --hostname master" in body["warnings"]
    assert orchestrator.status_code == 200

    version = ProductVersion.objects.get(product__name="tiny", version="1.0")
    master, worker = version.roles
    assert worker["disks"]["default"] == 2 and master["disks"] == {"min": 1, "default": 1, "max": 1}
    assert worker["environment"] == {"ROLE": "worker", "GREETING": "hello"}
    size = version.options_schema["required"]["size"]
    assert (size["sets"], size["roles"], size["default"]) == ("count", ["worker"], 2)
    assert version.options_schema["optional"]["cpu"]["sets"] == "cores"
    assert version.options_schema["optional"]["mem"]["sets"] == "memory_mb"
    assert version.options_schema["advanced"]["disks"]["sets"] == "disks"
    assert "sets" not in version.options_schema["advanced"]["greeting"]
    assert version.configure == []  # the orchestrator is the admin's to convert
    assert version.cesga_registration.orchestrator == ORCHESTRATOR
    assert ProductRevision.objects.filter(version=version).count() == 1

    shown = admin.get(f"{BASE}/products/tiny/1.0/orchestrator")
    assert shown.json() == {"orchestrator": ORCHESTRATOR}
    described = cesga("owner").get(f"{BASE}/products/tiny/1.0/options").json()
    assert described["required"] == {"size": 2}
    assert described["descriptions"]["disks"] == "Disks per worker"

    launched = cesga("owner").post(f"{BASE}/products/tiny/1.0", {"size": 3}, format="json")
    assert launched.status_code == 202, launched.content
    cluster = Cluster.objects.get(id=int(launched.json()["url"].rstrip("/").split("/")[-1]))
    instances = cluster.instances.order_by("role", "index")
    assert [(i.role, i.disks, i.image) for i in instances] == [
        ("master", 1, "platter/lab-base:1"),
        *[("worker", 2, "platter/lab-base:1")] * 3,
    ]


def test_a_version_is_not_launchable_until_template_and_options_are_put(cesga, catalog):
    admin = cesga("admin")
    admin.post(f"{BASE}/products", {"name": "half", "version": "2"}, format="json")
    admin.put(f"{BASE}/products/half/2/template", TEMPLATE, content_type="application/json")
    response = cesga("owner").post(f"{BASE}/products/half/2", {"size": 1}, format="json")
    assert response.status_code == 409
    assert response.json() == {
        "status": 409,
        "error": "conflict",
        "message": "half 2 is registered but not launchable yet: its options must be PUT first",
    }
    assert "half" not in cesga("owner").get(f"{BASE}/products").json()["products"]


@pytest.mark.parametrize(
    "persona, code", [("owner", 403), ("other", 403), ("anonymous", 401), ("read_only", 403)]
)
def test_only_staff_register(cesga, catalog, persona, code):
    client = cesga(persona)
    answers = register(client)
    assert [a.status_code for a in answers] == [code] * 4
    if code == 403 and persona != "read_only":
        assert answers[0].json()["message"] == "only staff register products"
    assert not CesgaRegistration.objects.exists()
    assert not ProductVersion.objects.filter(product__name="tiny").exists()


HOSTILE = {
    "a loop of a billion": (
        TEMPLATE.replace("range(opts.size)", "range(1000000000)", 1),
        "range(1000000000) has 1000000000 items; a template may loop at most 10000 times",
    ),
    "a privileged node": (
        TEMPLATE.replace("-e ROLE=master -t", "--privileged -e ROLE=master"),
        "node master: docker_opts --privileged refused: gives the container every device",
    ),
    "a missing cpu": (
        TEMPLATE.replace('"cpu": 1, "mem": 64,', '"mem": 64,'),
        "node master: missing field 'cpu'",
    ),
    "a host path": (
        TEMPLATE.replace("-e ROLE=worker", "-v /etc:/host-etc -e ROLE=worker"),
        "node worker0: docker_opts -v /etc:/host-etc refused: mounts a path or volume of the",
    ),
    "the host network": (
        TEMPLATE.replace("-e ROLE=master", "--net=host -e ROLE=master"),
        "node master: docker_opts --net=host refused: shares a namespace of the node",
    ),
    "a recursion of 2**40 calls": (
        "{% macro f(n) %}{% if n %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}{{ f(40) }}",
        "template: rendering needs more than 5 s of CPU or 512 MB of memory; refused",
    ),
    "a string doubled to gigabytes": (
        '{% set s = "x" * 1000000 %}{% set a = s~s~s~s~s~s~s~s %}{% set b = a~a~a~a~a~a~a~a %}'
        "{% set c = b~b~b~b~b~b~b~b %}{{ c }}",
        "template: the template needs more than 512 MB to render",
    ),
    "a disk outside /data": (
        TEMPLATE.replace('"destination": "/data/1"', '"destination": "/var"'),
        "node master: disk1 destination: /var would hide the container's /var",
    ),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_a_hostile_template_is_refused_naming_the_problem_and_registers_nothing(
    cesga, catalog, case
):
    template, problem = HOSTILE[case]
    *_, refused, _ = register(cesga("admin"), template=template)
    assert refused.status_code == 400, refused.content
    body = refused.json()
    assert (body["status"], body["error"]) == (400, "bad request")
    assert problem in body["message"]

    version = ProductVersion.objects.get(product__name="tiny")
    assert (version.enabled, version.roles, version.options_schema) == (False, [], {})
    assert version.cesga_registration.template == ""  # the refused text is not kept
    assert not ProductRevision.objects.filter(version=version).exists()
    launch = cesga("owner").post(f"{BASE}/products/tiny/1.0", {"size": 1}, format="json")
    assert launch.status_code == 409


def test_options_platter_cannot_name_are_refused(cesga, catalog):
    options = {**OPTIONS, "advanced": {"slaves.number": 2}}
    _, refused, _, _ = register(cesga("admin"), options=options)
    assert refused.status_code == 400
    assert "option 'slaves.number': not a valid Platter option name" in refused.json()["message"]


def test_options_that_are_not_json_are_refused(cesga, catalog):
    admin = cesga("admin")
    admin.post(f"{BASE}/products", {"name": "tiny", "version": "1.0"}, format="json")
    refused = admin.put(
        f"{BASE}/products/tiny/1.0/options", "{size: 2", content_type="application/json"
    )
    assert refused.status_code == 400
    assert refused.json()["message"].startswith("options: not JSON")


def test_an_option_that_changes_nodes_some_other_way_is_kept_at_its_default(cesga, catalog):
    template = TEMPLATE.replace('"mem": 64,', '"mem": {{ 64 * opts.scale }},', 1)
    options = {**OPTIONS, "advanced": {**OPTIONS["advanced"], "scale": 1}}
    *_, converted, _ = register(cesga("admin"), template=template, options=options)
    assert converted.status_code == 200, converted.content
    assert any(
        w.startswith("option scale: another value changes the nodes")
        for w in converted.json()["warnings"]
    )
    version = ProductVersion.objects.get(product__name="tiny")
    scale = version.options_schema["advanced"]["scale"]
    assert (scale["type"], scale["choices"]) == ("choice", [1])


def test_a_catalog_version_is_not_taken_over(cesga, catalog):
    response = cesga("admin").post(
        f"{BASE}/products", {"name": "demo", "version": "1.0"}, format="json"
    )
    assert response.status_code == 409
    assert response.json()["message"] == "demo 1.0 is already in the catalog"


def test_a_new_template_makes_a_new_revision(cesga, catalog):
    admin = cesga("admin")
    register(admin)
    again = admin.put(
        f"{BASE}/products/tiny/1.0/template",
        TEMPLATE.replace('"mem": 64,', '"mem": 96,', 1),
        content_type="application/json",
    )
    assert again.status_code == 200, again.content
    version = ProductVersion.objects.get(product__name="tiny")
    assert version.roles[0]["memory_mb"]["default"] == 96
    assert ProductRevision.objects.filter(version=version).count() == 2
    assert json.loads(json.dumps(version.cesga_registration.rendered))["dnsname"] == "registration"


@pytest.mark.parametrize(
    "part, body, problem",
    [
        (
            "products",
            {"name": "tiny", "version": "1", "description": "a\x00b"},
            "body: contains a NUL character",
        ),
        (
            "options",
            '{"required": {"size": 1}, "descriptions": {"size": "a\\u0000"}}',
            "options: contains a NUL character",
        ),
        ("options", '{"required": {"size": 1' + "0" * 5000 + "}}", "options: Exceeds the limit"),
        ("template", TEMPLATE.replace("storage", "\x00"), "template: contains a NUL character"),
        (
            "template",
            TEMPLATE.replace('"cpu": 1,', '"cpu": 10000000000000000000000,'),
            "node master: cpu must be between 1 and 1024",
        ),
        ("orchestrator", "run('\x00')", "orchestrator: contains a NUL character"),
    ],
)
def test_hostile_bodies_get_a_400_naming_the_part(cesga, catalog, part, body, problem):
    admin = cesga("admin")
    if part == "products":
        response = admin.post(f"{BASE}/products", body, format="json")
    else:
        register(admin)
        response = admin.put(f"{BASE}/products/tiny/1.0/{part}", body, content_type="text/plain")
    assert response.status_code == 400, response.content
    assert problem in response.json()["message"]


def test_admins_see_the_orchestrator_on_the_version_and_the_registration(
    cesga, catalog, client, admin_user
):
    register(cesga("admin"))
    version = ProductVersion.objects.get(product__name="tiny")
    client.force_login(admin_user)
    page = client.get(f"/admin/catalog/productversion/{version.id}/change/")
    assert page.status_code == 200
    assert (
        b"CESGA orchestrator" in page.content
        and b"run(&#x27;echo configured&#x27;)" in page.content
    )
    registration = version.cesga_registration
    shown = client.get(f"/admin/api/cesgaregistration/{registration.id}/change/")
    assert shown.status_code == 200
    assert b"template rendered with the defaults" in shown.content.lower()
    assert b"services head, workers: kept with the registration" in shown.content


def test_disks_numbered_from_0_as_cesgas_own_templates_do_keep_their_destinations(cesga, catalog):
    template = TEMPLATE.replace(
        '"destination": "/data/{{ k }}"', '"destination": "/data/{{ k - 1 }}"'
    )
    *_, converted, _ = register(cesga("admin"), template=template)
    assert converted.status_code == 200, converted.content
    assert not any("/data/0" in warning for warning in converted.json()["warnings"])
    roles = {r.name: r for r in ProductVersion.objects.get(product__name="tiny").definition.roles}
    assert roles["worker"].disk_paths == ["/data/0", "/data/1"]
    # The disks option goes on in the template's own numbering.
    assert roles["worker"].disk_destinations(3) == ["/data/0", "/data/1", "/data/2"]
    assert roles["master"].disk_paths == []  # /data/1, Platter's own default


@pytest.mark.parametrize(
    "destination, problem",
    [
        ("data/1", "disk1 destination: must be an absolute path in the container, got 'data/1'"),
        ("/data/../etc", "disk1 destination: must be a normalised path"),
        ("/proc/x", "disk1 destination: /proc/x lies inside /proc, which the kernel provides"),
        ("/usr", "disk1 destination: /usr would hide the container's /usr"),
        ("/", "disk1 destination: / would hide the container's whole file system"),
    ],
)
def test_a_disk_destination_that_is_relative_or_hides_a_system_directory_gets_a_400_naming_it(
    cesga, catalog, destination, problem
):
    template = TEMPLATE.replace('"destination": "/data/1"', f'"destination": "{destination}"')
    *_, converted, _ = register(cesga("admin"), template=template)
    assert converted.status_code == 400, converted.content
    assert f"node master: {problem}" in json.dumps(converted.json())


def test_a_repeated_disk_destination_gets_a_400_naming_the_disk(cesga, catalog):
    template = TEMPLATE.replace('"destination": "/data/{{ k }}"', '"destination": "/srv/db"')
    *_, converted, _ = register(cesga("admin"), template=template)
    assert converted.status_code == 400, converted.content
    assert "node worker0: disk2 destination: /srv/db is used by another disk" in json.dumps(
        converted.json()
    )

"""What each port allows a source that reaches it (a port's "allows"), and a UI's "token": checked
by the spec, present for every port of the shipped catalog, and shown on the version's page."""

import pytest

from apps.catalog.definition import definition_fields
from apps.catalog.services import default_catalog
from apps.catalog.spec import ALLOWS_MAX_LENGTH, DefinitionError, parse_definition
from apps.catalog.tests.rows import catalog_rows

from .factories import make_version


def with_port(**port) -> dict:
    found = definition_fields(make_version())
    found["ports"] = [{"role": "master", "port": 8080, "name": "UI", **port}]
    return found


def problems(data: dict) -> list[str]:
    with pytest.raises(DefinitionError) as caught:
        parse_definition(data)
    return [str(p) for p in caught.value.problems]


def test_a_port_says_what_it_allows_in_one_line():
    parsed = parse_definition(with_port(allows="submits applications, no authentication"))
    assert parsed.ports[0].allows == "submits applications, no authentication"
    assert parse_definition(with_port()).ports[0].allows is None  # older definitions still read


@pytest.mark.parametrize(
    "bad", ["", "   ", "two\nlines", "a\r\nb", "x" * (ALLOWS_MAX_LENGTH + 1), 3, True]
)
def test_a_bad_description_is_named_by_its_path(bad):
    found = problems(with_port(allows=bad))
    assert len(found) == 1 and found[0].startswith("ports[0].allows: "), found


def test_only_a_web_ui_takes_the_token():
    assert problems(with_port(token=True)) == [
        'ports[0].token: only a web UI ("ui": true) takes a token'
    ]
    assert parse_definition(with_port(token=True, ui=True)).ports[0].token is True
    assert problems(with_port(token="yes", ui=True))[0].startswith("ports[0].token: ")


def test_every_port_of_the_shipped_catalog_says_what_it_allows():
    ports = [
        (product["name"], version["version"], port)
        for product in default_catalog()
        for version in product["versions"]
        for port in version.get("ports", [])
    ]
    assert ports
    missing = [(p, v, port["port"]) for p, v, port in ports if not port.get("allows")]
    assert missing == []
    hadoop = {port["port"]: port["allows"] for p, _, port in ports if p == "hadoop"}
    assert "no authentication" in hadoop[8088] and "no authentication" in hadoop[9870]
    jupyter = [port for p, _, port in ports if port["name"] == "JupyterLab"]
    assert jupyter and all(port["token"] is True for port in jupyter)


@pytest.mark.django_db
def test_the_version_page_lists_its_ports_and_what_each_allows(client, alice):
    catalog_rows()
    client.force_login(alice)
    page = client.get("/catalog/hadoop/3.4.2/launch").content.decode()
    assert "What it allows" in page
    assert "YARN ResourceManager UI and REST: submits, runs and kills applications" in page
    assert "<td>8088/tcp</td>" in page

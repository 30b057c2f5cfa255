"""The command reads the life cycle from the portal (GET /api/v1/states) and falls back to the
rules it was written with only when the portal is older than that endpoint."""

import httpx
import pytest

from apps.clusters import states
from platter_cli import lifecycle
from platter_cli.api import Api
from platter_cli.config import Settings
from platter_cli.errors import CliError

from .conftest import token_for


def api_answering(handler) -> Api:
    client = Api(Settings(url="http://portal.test", token="t0ken"))
    client.http = httpx.Client(
        base_url="http://portal.test/api/v1/", transport=httpx.MockTransport(handler)
    )
    return client


@pytest.fixture(autouse=True)
def forget_portals():
    lifecycle._known.clear()
    yield
    lifecycle._known.clear()


def test_it_reads_the_rules_from_the_portal(live_server, alice, transactional_db):
    client = Api(Settings(url=live_server.url, token=token_for(alice)))
    life = lifecycle.life_cycle(client)
    assert life.ended == set(states.ENDED)
    assert life.logging == set(states.LOGS)
    assert life.launch_phases == [*states.PHASES, states.OPERATIONS["launch"].ends_in]
    assert life.launch_over == set(states.STATES) - set(states.OPERATIONS["launch"].through)


def test_an_older_portal_gets_the_fallback_which_says_what_the_portal_says():
    asked = []

    def older(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        return httpx.Response(404, json={"error": "not_found", "message": "Not found."})

    client = api_answering(older)
    life = lifecycle.life_cycle(client)
    lifecycle.life_cycle(client)
    assert asked == ["/api/v1/states"]  # once per run
    # Over the states such a portal had, the fallback says what today's portal publishes
    # (states added since, like resizing, are not in it).
    published = lifecycle.LifeCycle.of(states.as_json())
    known = {s["name"] for s in lifecycle.FALLBACK["states"]}
    assert known <= {s["name"] for s in published.states}
    assert (life.ended, life.logging, life.launch_phases, life.launch_over) == (
        published.ended & known,
        published.logging & known,
        published.launch_phases,
        published.launch_over & known,
    )


def test_other_errors_are_not_hidden_by_the_fallback():
    client = api_answering(lambda request: httpx.Response(401, json={"message": "bad token"}))
    with pytest.raises(CliError, match="refused the token"):
        lifecycle.life_cycle(client)

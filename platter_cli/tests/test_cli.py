"""The `platter` command line against the live test server, without a worker (launched clusters
stay queued): login and its config file, the environment's override, --json, exit codes and
the API's errors as messages."""

import json
import stat
import subprocess
import sys
import time

import pytest

from apps.accounts.models import Quota
from apps.clusters.models import Cluster
from apps.clusters.tests.factories import make_network, make_node

from .conftest import PLATTER, token_for, user_environment

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def pool(transactional_db):
    """A node and a network in the inventory, so launches are possible (they stay queued:
    no worker runs here)."""
    make_network()
    return make_node(cores=8, memory_mb=8192, disks={"hdd": 6})


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_login_checks_the_token_and_keeps_it_in_a_file_only_the_user_reads(
    platter, live_server, alice, home
):
    config = home / ".config" / "platter" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('url = "http://old.example.org"\n')
    config.chmod(0o644)  # an older file others could read
    token = token_for(alice)

    ran = platter("login", "--url", f"{live_server.url}/api/v1/", "--token", "-", input=token)
    assert ran.returncode == 0, ran
    assert ran.stdout == f"Logged in to {live_server.url} as alice (saved in {config}).\n"
    assert mode(config) == 0o600 and mode(config.parent) == 0o700
    assert config.read_text().splitlines()[1:] == [
        f'url = "{live_server.url}"',
        f'token = "{token}"',
        'user = "alice"',
    ]
    assert list(config.parent.iterdir()) == [config]  # no temporary file left behind

    quota = platter("quota", "--json")
    assert quota.returncode == 0, quota
    assert quota.json()["user"]["scope"] == "user alice"
    assert "max_clusters" in platter("quota").stdout.replace("clusters", "max_clusters")


def test_a_refused_token_is_not_stored_and_says_why(platter, live_server, alice, home):
    ran = platter("login", "--url", live_server.url, "--token", "-", input="not-a-token")
    assert ran.returncode == 3, ran
    assert ran.stderr.startswith("platter: the portal refused the token: "), ran
    assert not (home / ".config" / "platter" / "config.toml").exists()

    ran = platter("login", "--url", live_server.url, "--token", "-", "--json", input="nope")
    assert ran.returncode == 3
    assert ran.json()["status"] == 401 and ran.json()["exit_code"] == 3


def test_without_a_login_every_command_says_how_to_log_in(platter):
    ran = platter("ls")
    assert ran.returncode == 3
    assert ran.stderr == (
        "platter: not logged in: run `platter login` (or set PLATTER_URL and PLATTER_TOKEN)\n"
    )


def test_the_environment_overrides_the_stored_url_and_token(logged_in, live_server, bob):
    assert logged_in("quota", "--json").json()["user"]["scope"] == "user alice"
    as_bob = logged_in("quota", "--json", env={"PLATTER_TOKEN": token_for(bob)})
    assert as_bob.json()["user"]["scope"] == "user bob"

    # The stored token never goes to another portal: that one needs a token of its own.
    elsewhere = logged_in("quota", env={"PLATTER_URL": "http://127.0.0.1:9"})
    assert elsewhere.returncode == 3 and "not logged in" in elsewhere.stderr
    nowhere = logged_in("quota", env={"PLATTER_URL": "http://127.0.0.1:9", "PLATTER_TOKEN": "t"})
    assert nowhere.returncode == 3  # port 9 (discard) refuses the connection
    assert nowhere.stderr.startswith("platter: cannot reach the portal at http://127.0.0.1:9: ")
    # Only the environment: no config file at all, as in a CI job.
    ci = logged_in(
        "quota",
        "--json",
        env={
            "XDG_CONFIG_HOME": "/nonexistent",
            "PLATTER_URL": live_server.url,
            "PLATTER_TOKEN": token_for(bob),
        },
    )
    assert ci.returncode == 0 and ci.json()["user"]["scope"] == "user bob"


def test_a_url_that_is_not_a_portal_says_so(platter, live_server):
    ran = platter("ls", env={"PLATTER_URL": f"{live_server.url}/static", "PLATTER_TOKEN": "x"})
    assert ran.returncode in (3, 4), ran
    assert "Platter portal" in ran.stderr


def test_products_lists_the_catalog_and_a_version_its_options(logged_in):
    listed = logged_in("products", "--json")
    assert listed.returncode == 0, listed
    demo = next(p for p in listed.json() if p["name"] == "demo")
    assert demo["versions"] == ["1.0"]
    assert "demo" in logged_in("products").stdout

    version = logged_in("products", "demo", "1.0", "--json").json()
    assert version["options"]["fields"]["cpu"]["sets"] == "cores"
    human = logged_in("products", "demo", "1.0").stdout
    assert "Number of workers" in human and "message" in human
    # What the version's plugin does, as the API lists it (demo's: workers resize, no jobs).
    assert version["resizable_roles"] == ["worker"] and version["job_kinds"] == []
    assert "Resizes: worker" in human and "Jobs: none" in human and "Notebook: no" in human


def test_an_unknown_product_is_exit_4_with_what_to_do(logged_in):
    ran = logged_in("launch", "nosuch", "1.0", "--size", "2")
    assert ran.returncode == 4, ran
    assert ran.stderr == (
        "platter: no launchable version '1.0' of product 'nosuch': `platter products` lists them\n"
    )
    as_json = logged_in("launch", "demo", "9.9", "--json")
    assert as_json.returncode == 4
    assert as_json.json()["status"] == 404 and as_json.json()["exit_code"] == 4
    assert not Cluster.objects.exists()
    product = logged_in("products", "nosuch")
    assert product.returncode == 4
    assert product.stderr == "platter: no product 'nosuch': `platter products` lists them\n"


def test_bad_options_name_the_flag_the_user_typed(logged_in):
    ran = logged_in("launch", "demo", "1.0", "--size", "99", "--cores", "9")
    assert ran.returncode == 1, ran
    assert ran.stderr.startswith("platter: invalid launch options: ")
    assert "--size: " in ran.stderr and "--cores (cpu): " in ran.stderr
    assert "99" in ran.stderr

    lease = logged_in("launch", "demo", "1.0", "-o", "message=bad;chars", "--json")
    assert lease.returncode == 1
    assert set(lease.json()["fields"]) == {"message"}
    assert not Cluster.objects.exists()


def test_usage_errors_are_exit_2(logged_in):
    assert logged_in("launch", "demo").returncode == 2
    ran = logged_in("launch", "demo", "1.0", "--memory", "lots")
    assert ran.returncode == 2 and "'lots' is not a size in MB" in ran.stderr
    assert logged_in("extend", "1", "soon").returncode == 2
    assert logged_in("nonsense").returncode == 2
    state = logged_in("ls", "--state", "sleeping")
    assert state.returncode == 1 and state.stderr.startswith("platter: invalid request: --state")


def test_over_quota_is_exit_5_naming_the_limit(logged_in, alice):
    Quota.objects.create(user=alice, max_cores=2)
    ran = logged_in("launch", "demo", "1.0", "--size", "2")
    assert ran.returncode == 5, ran
    assert ran.stderr.startswith("platter: over quota: the quota of user alice is 2 cores")
    body = logged_in("launch", "demo", "1.0", "--size", "2", "--json").json()
    assert body["error"] == "quota_exceeded" and body["exit_code"] == 5
    assert body["quota"]["limit"] == "max_cores" and body["quota"]["maximum"] == 2


def test_a_queued_cluster_through_its_life_by_id_and_by_name(logged_in, bob):
    launched = logged_in(
        "launch",
        "demo",
        "1.0",
        "--size",
        "1",
        "--disks",
        "2",
        "--memory",
        "128M",
        "--lease",
        "90m",
        "--name",
        "trial",
    )
    assert launched.returncode == 0, launched
    cluster = Cluster.objects.get()
    assert cluster.options == {"size": 1, "disks": 2, "mem": 128}
    assert launched.stdout == (
        f"Cluster {cluster.id} (trial) is queued: follow it with "
        f"`platter events {cluster.id} -f`.\n"
    )

    rows = logged_in("ls", "--json").json()
    assert [(c["id"], c["name"], c["state"]) for c in rows] == [(cluster.id, "trial", "queued")]
    assert "trial" in logged_in("ls").stdout
    shown = logged_in("show", "trial", "--json").json()
    assert shown["id"] == cluster.id and shown["queue"]["position"] == 1
    assert "state: queued" in logged_in("show", str(cluster.id)).stdout
    events = logged_in("events", "trial", "--json").json()
    assert events["events"] and events["next"] == str(events["events"][-1]["id"])
    assert logged_in("events", "trial", "--since", events["next"], "--json").json() == {
        "events": [],
        "next": events["next"],
    }

    extended = logged_in("extend", "trial", "2h", "--json")
    assert extended.returncode == 0, extended
    assert extended.json()["id"] == cluster.id and extended.json()["expires_at"]
    stop = logged_in("stop", "trial")
    assert stop.returncode == 1 and stop.stderr.startswith(f"platter: cluster {cluster.id} is ")
    logs = logged_in("logs", "trial")
    assert logs.returncode == 1 and "container" in logs.stderr, logs
    ssh = logged_in("ssh", "trial")
    assert ssh.returncode == 1 and "has no ssh login" in ssh.stderr

    # Someone else's cluster does not exist for them; the same name is nothing of theirs.
    other = {"PLATTER_TOKEN": token_for(bob)}
    assert logged_in("show", str(cluster.id), env=other).returncode == 4
    assert logged_in("show", "trial", env=other).returncode == 4

    unasked = logged_in("destroy", "trial")  # no terminal to ask on
    assert unasked.returncode == 2 and "needs --yes" in unasked.stderr
    destroyed = logged_in("destroy", "trial", "--yes", "--json")
    assert destroyed.returncode == 0, destroyed
    assert destroyed.json()["state"] == "destroyed"  # a queued cluster is simply cancelled
    assert logged_in("ls", "--json").json() == []
    assert [c["state"] for c in logged_in("ls", "--all", "--json").json()] == ["destroyed"]
    gone = logged_in("show", "trial")
    assert gone.returncode == 4 and "no live cluster named 'trial'" in gone.stderr


def test_a_read_only_token_reads_but_cannot_launch(platter, live_server, alice, catalog_loaded):
    env = {"PLATTER_URL": live_server.url, "PLATTER_TOKEN": token_for(alice, read_only=True)}
    assert platter("ls", env=env).returncode == 0
    ran = platter("launch", "demo", "1.0", env=env)
    assert ran.returncode == 1, ran
    assert "read-only" in ran.stderr or "permission" in ran.stderr.lower(), ran


def test_the_client_imports_without_django(home):
    """A user's machine has the package but no portal settings; the CLI never needs Django."""
    code = (
        "import sys; sys.modules['django'] = None; "
        "import platter_cli.main, platter_cli.api, platter_cli.config; print('ok')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=user_environment(home),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stdout == "ok\n", done.stderr


def test_help_documents_the_exit_codes(platter):
    ran = platter("--help")
    assert ran.returncode == 0
    for line in ("0  done", "2  usage", "3  not logged in", "4  not found", "5  over quota"):
        assert line in ran.stdout


def test_wait_ends_with_exit_6_when_it_times_out_and_1_when_the_cluster_fails(logged_in, home):
    timed_out = logged_in("launch", "demo", "1.0", "--size", "1", "--wait", "--timeout", "1")
    assert timed_out.returncode == 6, timed_out
    assert "queued" in timed_out.stdout  # the progress display printed its first event
    assert "is still queued after 1 s; it goes on" in timed_out.stderr

    # No worker runs here: the test fails the second cluster as a worker would.
    waiting = subprocess.Popen(
        [
            str(PLATTER),
            "launch",
            "demo",
            "1.0",
            "--size",
            "1",
            "--name",
            "doomed",
            "--wait",
            "--json",
        ],
        env=user_environment(home),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not Cluster.objects.filter(name="doomed").exists():
        assert time.monotonic() < deadline and waiting.poll() is None, waiting.communicate()
        time.sleep(0.2)
    Cluster.objects.filter(name="doomed").update(state="failed", reason="node n1: no luck")
    stdout, stderr = waiting.communicate(timeout=60)
    assert waiting.returncode == 1, stderr
    assert json.loads(stdout)["state"] == "failed"
    doomed = Cluster.objects.get(name="doomed")
    assert stderr == f"platter: cluster {doomed.id} is failed, not running: node n1: no luck\n"


def test_usage_prints_a_table_by_cluster_and_json_with_the_same_total(logged_in, alice):
    from apps.usage.tests.test_usage import T0, live, set_times

    cluster = live(alice, cores=2, disks=1)
    set_times(cluster, dict.fromkeys(["queued", "placing", "configuring", "running"], T0))
    day = T0.date().isoformat()
    table = logged_in("usage", "--from", day, "--to", day)
    assert table.returncode == 0, table
    assert f"alice/{cluster.name}#{cluster.id}" in table.stdout
    assert "28.00" in table.stdout  # core-hours: 2 cores from 10:00 to midnight UTC
    body = logged_in("usage", "--from", day, "--to", day, "--by", "day", "--json").json()
    assert body["total"]["core_h"] == pytest.approx(28.0)
    refused = logged_in("usage", "--user", "bob")
    assert refused.returncode != 0 and "only staff read other users'" in refused.stderr


def test_idle_sets_shows_and_keeps_running_a_cluster(logged_in, alice):
    from apps.usage.tests.test_usage import live

    cluster = live(alice, cores=1, disks=1)
    assert "No idle limit" in logged_in("idle", str(cluster.id)).stdout
    set_it = logged_in("idle", cluster.name, "--minutes", "30")
    assert set_it.returncode == 0, set_it
    assert "Stops (data kept) after 30 min unused." in set_it.stdout
    kept = logged_in("idle", str(cluster.id), "--keep-running", "--json").json()
    assert kept["last_signal"] == "kept running by its owner"
    both = logged_in("idle", str(cluster.id), "--off", "--minutes", "5")
    assert both.returncode == 2 and "give one of --minutes, --off and --keep-running" in both.stderr
    assert logged_in("idle", str(cluster.id), "--off", "--json").json()["limit_minutes"] is None

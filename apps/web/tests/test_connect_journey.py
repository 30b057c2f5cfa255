"""The whole of "Connect" as a user meets it, in a real browser on the real lab: a key in the
profile, Spark launched from the web form, its master UI through the portal, an `ssh` login as
the page says, a job submitted with the page's connection string, the logs read in the
browser; and another user reaches none of it."""

import re
import shlex
import subprocess

import pytest
from django.test import Client

from apps.accounts.tests.keys import ed25519_pair
from apps.clusters import access, services
from apps.clusters.models import Cluster
from apps.clusters.tests.waiting import wait_for
from apps.web.tests.browsing import sign_in

pytestmark = pytest.mark.django_db(transaction=True)
JOB = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.appName("journey").getOrCreate()
rows = spark.sparkContext.parallelize(range(1000), 4).map(lambda n: (n % 10, 1))
print("journey counts:", sorted(rows.reduceByKey(lambda a, b: a + b).collect())[:2])
spark.stop()
"""


def ssh(command: str, key_path, *remote: str) -> subprocess.CompletedProcess:
    """The page's ssh command as typed, with the key in place of <your key> and host keys of
    a fresh cluster accepted."""
    argv = shlex.split(command.replace("<your key>", str(key_path)))
    options = [
        "-F",
        "/dev/null",
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "LogLevel=ERROR",
        "-o",
        "ConnectTimeout=10",
    ]
    argv = [argv[0], *options, *argv[1:], *remote]
    return subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)


def test_a_user_launches_spark_opens_its_ui_logs_in_runs_a_job_and_reads_logs(
    page, live_server, seeded, dispatching, lab_inventory, lab_cleanup, bob, tmp_path
):
    private, public = ed25519_pair("demo@laptop")
    key_path = tmp_path / "id_ed25519"
    key_path.write_text(private)
    key_path.chmod(0o600)

    page.set_default_timeout(15_000)  # a Spark cluster's pages on 2 shared cores
    sign_in(page, "demo", "demo-platter")
    page.goto("/ssh-keys/")
    page.get_by_label("Name").fill("laptop")
    page.get_by_label("Public key").fill(public)
    page.get_by_role("button", name="Add key").click()
    page.get_by_text("laptop", exact=True).wait_for()

    page.goto("/catalog/spark/4.3.0/launch")
    page.get_by_label("Name").fill("journey")
    page.get_by_role("button", name="Launch").click()
    page.wait_for_url(re.compile(r"/clusters/\d+/$"))
    cluster = Cluster.objects.get(name="journey")
    wait_for(cluster.id, Cluster.State.RUNNING, seconds=240)
    page.reload()
    connect = page.locator("section[aria-labelledby=h-connect]")
    workers = cluster.instances.filter(role="worker").count()

    # The master UI through the portal lists the workers, and its links stay in the portal.
    page.get_by_role("link", name=re.compile("Spark master web UI")).click()
    # Spark 4's summary line: "Workers: 2 Alive, 0 Dead, 0 Decommissioned, 0 Unknown".
    page.get_by_text(re.compile(rf"Workers:\s*{workers} Alive")).first.wait_for()
    # On the cluster's own origin (c<N>.ui.localhost, the portal's port), not the portal's.
    ui_origin = live_server.url.replace("://localhost", f"://c{cluster.id}.ui.localhost")
    assert page.url.startswith(f"{ui_origin}/clusters/{cluster.id}/ui/")
    page.go_back()

    # ssh as the page says, then the job with the page's spark-submit line.
    command = connect.locator("code", has_text="ssh -i").inner_text().strip()
    assert command == access.ssh_login(cluster)["command"]
    answer = ssh(command, key_path, "hostname")
    assert answer.returncode == 0 and answer.stdout.strip() == "master-0", answer.stderr
    submit = connect.locator("code", has_text="spark-submit").first.inner_text().strip()
    assert "spark.authenticate.secret=" in submit and submit.endswith(" app.py")
    job = f"cat > /tmp/app.py <<'EOF'\n{JOB}\nEOF\n" + submit.replace(
        " app.py", " --driver-memory 512m --conf spark.ui.enabled=false /tmp/app.py"
    )
    answer = ssh(command, key_path, job)
    assert "journey counts: [(0, 100), (1, 100)]" in answer.stdout, answer.stdout + answer.stderr

    # The master's log in the browser shows the job's application registering.
    logs = page.locator("#cluster-logs")
    logs.get_by_label("Instance").select_option("master-0")
    logs.get_by_label("Lines").fill("500")
    logs.get_by_role("button", name="Show").click()
    page.locator("#log-output").get_by_text(re.compile("Registering app journey")).first.wait_for()

    # Another user: the cluster, its UI and its logs do not exist for them.
    other = Client()
    other.force_login(bob)
    ui = connect.get_by_role("link", name=re.compile("Spark master web UI")).get_attribute("href")
    for url in (f"/clusters/{cluster.id}/", ui, f"/clusters/{cluster.id}/logs?instance=master-0"):
        assert other.get(url).status_code == 404, url

    services.request_destroy(cluster.id, keep_data=False)
    wait_for(cluster.id, Cluster.State.DESTROYED)

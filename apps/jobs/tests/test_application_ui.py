"""A job's application linked in its cluster's own web UI, through the portal's UI proxy: a
YARN application on the ResourceManager's page, a Spark standalone one on the master's; none
without an application id or a UI serving it. In the API (documented) and on the job page."""

import pytest

from apps.catalog.models import ProductVersion
from apps.clusters.models import Cluster, Instance
from apps.clusters.tests.factories import make_network
from apps.inventory.models import Address
from apps.jobs import services
from apps.jobs.models import Job, JobFile
from apps.jobs.services import JobRequest, Upload

pytestmark = pytest.mark.django_db

# The web UI ports of the catalog's Spark and Hadoop versions (apps/products/*/catalog.json).
UI_PORTS = {
    "spark": [
        {"role": "master", "port": 8080, "name": "Spark master web UI", "ui": True},
        {"role": "master", "port": 4040, "name": "Spark application UI", "ui": True},
        {"role": "master", "port": 7077, "name": "Spark master (spark-submit)"},
    ],
    "hadoop": [
        {"role": "master", "port": 9870, "name": "HDFS NameNode HTTP", "ui": True},
        {"role": "master", "port": 8088, "name": "YARN ResourceManager web UI", "ui": True},
    ],
}
SPARK_APP = "app-20261125213000-0001"
YARN_APP = "application_1764000000000_0001"


def serving_uis(cluster: Cluster) -> Cluster:
    """The cluster's version declares the catalog's web UIs, and its master has an address."""
    product = cluster.version.product.name
    ProductVersion.objects.filter(id=cluster.version_id).update(ports=UI_PORTS[product])
    address = Address.objects.create(network=make_network(), ip="192.0.2.10")
    Instance.objects.filter(cluster=cluster, role="master").update(address=address)
    return Cluster.objects.get(id=cluster.id)


def job_with(alice, cluster: Cluster, application_id: str) -> Job:
    if cluster.version.product.name == "hadoop":
        asked = JobRequest(kind="mapreduce", main="/e.jar", main_class="wordcount")
    else:
        asked = JobRequest(kind="pyspark", uploads=[Upload(JobFile.Role.MAIN, "a.py", b"")])
    job = services.submit(alice, cluster, asked)
    services.start(job.id)
    if application_id:
        services.set_application_id(job.id, application_id)
    return Job.objects.get(id=job.id)


def shown(api, job: Job) -> str | None:
    return api("owner").get(f"/api/v1/jobs/{job.id}").json()["application_url"]


def test_a_spark_application_links_to_its_page_in_the_spark_master_ui(alice, spark, api, client):
    job = job_with(alice, serving_uis(spark), SPARK_APP)
    path = f"/clusters/{spark.id}/ui/master-0/8080/app/?appId={SPARK_APP}"
    assert shown(api, job) == f"http://testserver{path}"
    listed = api("owner").get(f"/api/v1/clusters/{spark.id}/jobs").json()["results"]
    assert [j["application_url"] for j in listed] == [f"http://testserver{path}"]
    client.force_login(alice)
    page = client.get(f"/jobs/{job.id}/").content.decode()
    assert f'<a href="{path}" title="in the cluster\'s web UI">{SPARK_APP}</a>' in page
    # The portal's proxy knows that UI: it sends the browser to the cluster's UI host.
    hop = client.get(path, HTTP_SEC_FETCH_MODE="navigate")
    assert hop.status_code == 302 and hop["Location"].startswith(f"http://c{spark.id}.ui.")


def test_a_yarn_application_links_to_its_page_in_the_resourcemanager_ui(alice, hadoop, api, client):
    job = job_with(alice, serving_uis(hadoop), YARN_APP)
    path = f"/clusters/{hadoop.id}/ui/master-0/8088/cluster/app/{YARN_APP}"
    assert shown(api, job) == f"http://testserver{path}"
    client.force_login(alice)
    poll = client.get(f"/jobs/{job.id}/log", {"since": 0}, HTTP_HX_REQUEST="true")
    assert f'<a href="{path}"' in poll.content.decode()  # the state the page's polls refresh


def test_no_link_without_an_application_or_a_ui_serving_it(alice, spark, hadoop, api, client):
    before = job_with(alice, serving_uis(spark), "")
    assert shown(api, before) is None  # no application id yet
    client.force_login(alice)
    assert "/ui/" not in client.get(f"/jobs/{before.id}/").content.decode()
    no_ui = job_with(alice, hadoop, YARN_APP)  # its version declares no web UI
    assert shown(api, no_ui) is None
    stopped = job_with(alice, spark, SPARK_APP)
    Cluster.objects.filter(id=spark.id).update(state="stopped")
    assert shown(api, stopped) is None
    page = client.get(f"/jobs/{stopped.id}/").content.decode()
    assert f"application {SPARK_APP}" in page and "/ui/" not in page


def test_the_schema_documents_the_link(api):
    schema = api("owner").get("/api/v1/schema/", {"format": "json"}).json()
    field = schema["components"]["schemas"]["Job"]["properties"]["application_url"]
    assert field["format"] == "uri" and field["nullable"] is True
    assert "web UI" in field["description"]

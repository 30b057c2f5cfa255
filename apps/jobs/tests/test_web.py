"""The Jobs section of the cluster page, the submit form and the job page (owners only)."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from apps.jobs import services
from apps.jobs.models import Job

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in(client, alice):
    client.force_login(alice)
    return client


def test_the_section_submits_a_job_and_the_job_page_follows_its_log(signed_in, spark):
    section = signed_in.get(f"/clusters/{spark.id}/jobs")
    assert b"Submit a job" in section.content
    form = {
        "kind": "pyspark",
        "main": SimpleUploadedFile("app.py", b"print(1)\n"),
        "data_files": [SimpleUploadedFile("a.txt", b"a"), SimpleUploadedFile("b.txt", b"b")],
        "args": "one\ntwo\n",
        "properties": "spark.x=1\n",
    }
    answer = signed_in.post(f"/clusters/{spark.id}/jobs", form)
    job = Job.objects.get()
    assert answer.status_code == 302 and answer["Location"] == f"/jobs/{job.id}/"
    assert (job.files, job.args, job.properties) == (
        ["a.txt", "b.txt"],
        ["one", "two"],
        {"spark.x": "1"},
    )
    services.start(job.id)
    services.append_log(job.id, "hello <world>\n")
    page = signed_in.get(f"/jobs/{job.id}/")
    assert b"hello &lt;world&gt;" in page.content and b"every 1s" in page.content
    services.append_log(job.id, "more\n")
    part = signed_in.get(f"/jobs/{job.id}/log", {"since": 14}, HTTP_HX_REQUEST="true")
    assert b'beforeend:#job-log">more\n</pre>' in part.content
    assert b"since=19" in part.content
    assert job.id in signed_in.get(f"/clusters/{spark.id}/jobs").context["jobs"].values_list(
        "id", flat=True
    )
    signed_in.post(f"/jobs/{job.id}/cancel")
    assert Job.objects.get().cancel_requested


def test_a_refused_submit_says_why_on_the_cluster_page(signed_in, spark):
    answer = signed_in.post(f"/clusters/{spark.id}/jobs", {"kind": "pyspark"}, follow=True)
    assert b"The job was not submitted: upload the main file" in answer.content
    assert not Job.objects.exists()


def test_others_get_404(client, bob, spark, alice):
    job = services.submit(alice, spark, services.JobRequest(kind="pyspark", main="/opt/x.py"))
    client.force_login(bob)
    assert client.get(f"/clusters/{spark.id}/jobs").status_code == 404
    assert client.get(f"/jobs/{job.id}/").status_code == 404
    assert client.get(f"/jobs/{job.id}/log").status_code == 404
    assert client.post(f"/jobs/{job.id}/cancel").status_code == 404


def test_staff_too_reach_only_their_own_jobs_here(client, admin_user, spark, alice):
    """As the cluster pages: the API is where staff see everyone's."""
    job = services.submit(alice, spark, services.JobRequest(kind="pyspark", main="/opt/x.py"))
    client.force_login(admin_user)
    assert client.get(f"/clusters/{spark.id}/jobs").status_code == 404
    assert client.get(f"/jobs/{job.id}/").status_code == 404

"""Downloading a job's output (issue 41, item 5) over fake nodes: only a regular file, found so
by the node's Engine (apps/nodes/tests/test_open_file.py), never a folder, a symbolic link or
an HDFS pattern; streamed as it comes and cut at JOB_RESULT_MAX_BYTES; saved under its own name
whatever characters the job gave it."""

from email.message import Message
from urllib.parse import quote

import pytest
from asgiref.sync import async_to_sync

from apps.jobs import downloads, services
from apps.jobs.models import Job
from apps.jobs.results import Download
from apps.jobs.services import JobRequest
from apps.nodes.client import CHUNK
from apps.nodes.fake import BigFile, FakeContainer, FakeNodes

pytestmark = pytest.mark.django_db


@pytest.fixture
def nodes():
    with FakeNodes() as fake:
        fake.on("lab-1")["c-master"] = FakeContainer("c-master", "c-master", {}, state="running")
        yield fake


def ended(job: Job) -> Job:
    Job.objects.filter(id=job.id).update(state=Job.State.SUCCEEDED)
    return job


@pytest.fixture
def job(alice, spark) -> Job:
    asked = JobRequest(kind="pyspark", main="/opt/app.py", output_path="out")
    return ended(services.submit(alice, spark, asked))


@pytest.fixture
def hdfs_job(alice, hadoop) -> Job:
    asked = JobRequest(
        kind="mapreduce",
        main="hdfs:///jars/wc.jar",
        main_class="wordcount",
        output_path="hdfs:///out/wc",
    )
    return ended(services.submit(alice, hadoop, asked))


def put(nodes: FakeNodes, job: Job, name: str, content) -> str:
    path = f"/tmp/platter-jobs/{job.id}/out/{name}"
    nodes.files[("lab-1", path)] = content
    return path


def url(job: Job, name: str) -> str:
    return f"/api/v1/jobs/{job.id}/outputs/{quote(name)}"


def read(response) -> list[bytes]:
    """The parts of a streamed answer, read on an event loop as the ASGI server reads them."""

    async def parts() -> list[bytes]:
        return [part async for part in response.streaming_content]

    return async_to_sync(parts)()


def test_it_sends_a_file_of_the_output_under_its_own_name(api, nodes, job):
    put(nodes, job, "sub/counts.txt", b"spark 3\n")
    answer = api("owner").get(url(job, "sub/counts.txt"))
    assert answer.status_code == 200
    assert answer["Content-Type"] == "application/octet-stream"
    assert answer["Content-Disposition"] == 'attachment; filename="counts.txt"'
    assert (answer["Content-Length"], answer["X-Output-Size"]) == ("8", "8")
    assert b"".join(read(answer)) == b"spark 3\n"


def test_a_client_that_accepts_only_files_gets_the_file_and_errors_as_text(api, nodes, job):
    put(nodes, job, "counts.txt", b"spark 3\n")
    owner = api("owner")
    answer = owner.get(url(job, "counts.txt"), HTTP_ACCEPT="application/octet-stream")
    assert answer.status_code == 200 and b"".join(read(answer)) == b"spark 3\n"
    missing = owner.get(url(job, "nope"), HTTP_ACCEPT="application/octet-stream")
    assert missing.status_code == 404
    assert missing.content == b"the output has no file nope\n"


def test_a_folder_is_refused_saying_so(api, client, alice, nodes, job):
    nodes.kinds[("lab-1", f"/tmp/platter-jobs/{job.id}/out/sub")] = "a folder"
    answer = api("owner").get(url(job, "sub"))
    assert answer.status_code == 409, answer.content
    assert answer.json()["error"] == "not_a_file"
    assert answer.json()["message"] == (
        "sub is a folder; only regular files download: download the files in it one by one"
    )
    client.force_login(alice)
    page = client.get(f"/jobs/{job.id}/outputs/sub")
    assert page.status_code == 409 and b"sub is a folder" in page.content


def test_a_symbolic_link_is_refused_and_not_followed(api, nodes, job):
    put(nodes, job, "shadow", b"root:$6$secret")  # what a followed link would read
    nodes.kinds[("lab-1", f"/tmp/platter-jobs/{job.id}/out/shadow")] = "a symbolic link"
    answer = api("owner").get(url(job, "shadow"))
    assert answer.status_code == 409
    assert answer.json()["message"] == "shadow is a symbolic link; only regular files download"
    assert b"secret" not in answer.content


def test_a_symbolic_link_among_the_folders_is_refused(api, nodes, job):
    put(nodes, job, "etc/shadow", b"root:$6$secret")
    nodes.kinds[("lab-1", f"/tmp/platter-jobs/{job.id}/out/etc")] = "a symbolic link"
    answer = api("owner").get(url(job, "etc/shadow"))
    assert answer.status_code == 409
    assert answer.json()["message"] == (
        "etc (on the way to etc/shadow) is a symbolic link; only regular files download"
    )


def test_a_name_that_climbs_out_of_the_output_is_refused_before_the_node(api, nodes, job):
    for name in ("../.log", "a/./b", "a//b"):
        answer = api("owner").get(f"/api/v1/jobs/{job.id}/outputs/{name}")
        assert answer.status_code == 404, name
    assert not [call for call in nodes.calls if call[1] == "open_file"]


def test_a_large_file_streams_in_chunks_and_is_cut_at_the_cap(api, nodes, job, settings):
    settings.JOB_RESULT_MAX_BYTES = cap = 3 * CHUNK + 1000
    big = BigFile(size=512 * 1024 * 1024, pattern=b"0123456789")
    put(nodes, job, "big.bin", big)
    answer = api("owner").get(url(job, "big.bin"))
    assert answer.status_code == 200 and answer.streaming and answer.is_async
    assert big.made == 0, "nothing is read from the node before the body is sent"
    assert (answer["Content-Length"], answer["X-Output-Size"]) == (str(cap), str(big.size))
    assert answer["X-Output-Cap"] == str(cap)

    async def first_then_rest() -> tuple[bytes, int, list[bytes]]:
        body = answer.streaming_content
        first = await anext(body)
        made_then = big.made  # what the node had sent when the client got its first part
        return first, made_then, [part async for part in body]

    first, made_then, rest = async_to_sync(first_then_rest)()
    assert made_then <= len(first), "the portal sends each part as it comes, holding none"
    parts = [first, *rest]
    assert max(len(p) for p in parts) <= CHUNK
    assert sum(len(p) for p in parts) == cap
    assert b"".join(parts) == (b"0123456789" * (cap // 10 + 1))[:cap]
    assert big.made == cap, "the rest of the file is never read"


def test_a_hostile_file_name_gives_a_header_that_means_that_name_and_nothing_more(api, nodes, job):
    name = 'we"ird; filename=evil.sh é.txt'
    put(nodes, job, name, b"x")
    answer = api("owner").get(url(job, name))
    assert answer.status_code == 200, answer.content
    header = answer["Content-Disposition"]
    assert header.isascii() and '"ird' not in header
    parsed = Message()
    parsed["Content-Disposition"] = header
    assert parsed.get_filename() == name
    params = parsed.get_params(header="content-disposition")
    assert [key for key, _ in params] == ["attachment", "filename"], "one name, nothing added"


@pytest.mark.parametrize(
    "name",
    ['a"b\\c.txt', "line\nbreak.txt", "cr\r\nSet-Cookie: x=1", "tab\there.txt", "ünï.csv"],
)
def test_any_name_gives_one_safe_header_line(name):
    """Names the URL cannot carry (newlines) too: a name comes from a tenant's container."""
    response = downloads.response(Download(name, 1, 1, iter([b"x"])))
    header = response["Content-Disposition"]
    assert "\n" not in header and "\r" not in header
    parsed = Message()
    parsed["Content-Disposition"] = header
    assert parsed.get_filename() == name


def test_an_hdfs_pattern_is_refused_before_anything_runs(api, nodes, hdfs_job):
    for name in ("part-*", "part-r-0000?", "part-[0-9]", "{a,b}", "a\\*"):
        answer = api("owner").get(url(hdfs_job, name))
        assert answer.status_code == 409, name
        assert "which HDFS reads as a pattern; name one file" in answer.json()["message"]
    assert nodes.execs == []


def test_an_hdfs_folder_is_refused_saying_so(api, nodes, hdfs_job):
    nodes.exec_results["hdfs"] = (0, "WARN some client noise\n0 directory\n")
    answer = api("owner").get(url(hdfs_job, "_temporary"))
    assert answer.status_code == 409
    assert answer.json()["message"].startswith("_temporary is a folder; only regular files")
    assert nodes.execs == [["hdfs", "dfs", "-stat", "%b %F", "hdfs:///out/wc/_temporary"]]


def test_an_hdfs_file_is_copied_cut_at_the_cap_streamed_and_the_copy_removed(
    api, nodes, hdfs_job, settings
):
    settings.JOB_RESULT_MAX_BYTES = 10
    content = b"hadoop\t2\nplatter\t1\nspark\t3\n"
    nodes.exec_results["hdfs"] = (0, f"{len(content)} regular file\n")

    def copy(argv: list[str]) -> tuple[int, str]:  # what the container's `hdfs dfs -cat | head`
        source, cap, target = argv[-3:]
        assert source == "hdfs:///out/wc/part-r-00000"
        nodes.files[("lab-1", target)] = content[: int(cap)]
        return 0, ""

    nodes.exec_results["sh"] = copy
    answer = api("owner").get(url(hdfs_job, "part-r-00000"))
    assert answer.status_code == 200, answer.content
    assert (answer["Content-Length"], answer["X-Output-Size"]) == ("10", str(len(content)))
    assert b"".join(read(answer)) == content[:10]
    copied = nodes.execs[1][-1]
    assert copied.startswith(f"/tmp/platter-jobs/{hdfs_job.id}/.download-")
    assert nodes.execs[-1] == ["rm", "-f", copied]


def test_an_hdfs_copy_that_is_not_a_plain_file_is_not_sent(api, nodes, hdfs_job):
    """The container's own hdfs client could leave a link to anything as the copy."""
    nodes.exec_results["hdfs"] = (0, "27 regular file\n")

    def link(argv: list[str]) -> tuple[int, str]:
        nodes.kinds[("lab-1", argv[-1])] = "a symbolic link"
        return 0, ""

    nodes.exec_results["sh"] = link
    answer = api("owner").get(url(hdfs_job, "part-r-00000"))
    assert answer.status_code == 404
    assert answer.json()["message"].startswith("could not copy part-r-00000 out of HDFS")
    assert nodes.execs[-1][:2] == ["rm", "-f"]

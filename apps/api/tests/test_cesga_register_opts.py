"""docker_opts of a CESGA template: what would escape the container is refused naming the
option; -e and -u are mapped; the rest is ignored with a warning (apps.catalog.cesga_nodes)."""

import pytest

from apps.catalog.cesga_nodes import RegistrationError, parse_docker_opts

DISKS = {"/data/1", "/data/2"}


@pytest.mark.parametrize(
    "opts, named",
    [
        ("--privileged", "--privileged"),
        ("-e A=1 --privileged=true", "--privileged=true"),
        ("-v /etc:/etc", "-v /etc:/etc"),
        ("--volume=/var/run/docker.sock:/var/run/docker.sock", "--volume=/var/run/docker.sock"),
        ("-v /data/9", "-v /data/9"),
        ("--net=host", "--net=host"),
        ("--network host", "--network host"),
        ("--pid=host", "--pid=host"),
        ("--ipc host", "--ipc host"),
        ("--uts=host", "--uts=host"),
        ("--userns=host", "--userns=host"),
        ("--network container:other", "--network container:other"),
        ("--device /dev/sda", "--device /dev/sda"),
        ("--cap-add SYS_ADMIN", "--cap-add SYS_ADMIN"),
        ("--security-opt seccomp=unconfined", "--security-opt seccomp=unconfined"),
        ("--mount type=bind,src=/,dst=/host", "--mount type=bind"),
        ("--volumes-from other", "--volumes-from other"),
        ("--env-file /etc/shadow", "--env-file /etc/shadow"),
        ("--sysctl kernel.x=1", "--sysctl kernel.x=1"),
        ("--cgroup-parent /", "--cgroup-parent /"),
    ],
)
def test_options_that_would_escape_are_refused_by_name(opts, named):
    with pytest.raises(RegistrationError) as refused:
        parse_docker_opts(opts, "node1", DISKS, [])
    message = str(refused.value)
    assert message.startswith("node node1: docker_opts ")
    assert named in message and "refused" in message


def test_harmless_options_are_mapped_or_ignored_with_a_warning():
    warnings: list[str] = []
    found = parse_docker_opts(
        "-e A=1 --env B=two -u hdfs -t -i --rm --hostname n1 -p 80:80 --cpus 2 "
        "-v /srv/disk1:/data/1 --frobnicate",
        "node1",
        DISKS,
        warnings,
    )
    assert found.environment == {"A": "1", "B": "two"} and found.user == "hdfs"
    assert warnings == [
        "node node1: docker_opts ignored: -t; -i; --rm; --hostname n1; -p 80:80; --cpus 2; "
        "-v /srv/disk1:/data/1 (Platter mounts the instance's disks itself); "
        "--frobnicate (unknown to Platter)"
    ]


@pytest.mark.parametrize(
    "opts, problem",
    [
        ("-e", "docker_opts -e needs a value"),
        ("-e NOVALUE", "docker_opts -e NOVALUE: expected NAME=value"),
        ("-e 'unclosed", "docker_opts: No closing quotation"),
    ],
)
def test_malformed_options_name_the_problem(opts, problem):
    with pytest.raises(RegistrationError, match=problem):
        parse_docker_opts(opts, "node1", DISKS, [])

"""The Hadoop image's admin command (deploy/images/hadoop/rootfs/opt/platter/bin/
hadoop-admin) run as the master runs it, over a configuration folder of its own, with `hdfs`
and `yarn` stand-ins that record how they were asked. On a real cluster:
test_hadoop_lab.py."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ADMIN = (
    Path(__file__).resolve().parents[4] / "deploy/images/hadoop/rootfs/opt/platter/bin/hadoop-admin"
)
SITE = "<?xml version='1.0'?>\n<configuration>\n</configuration>\n"


@pytest.fixture
def master(tmp_path: Path) -> Path:
    conf = tmp_path / "conf"
    conf.mkdir()
    for name in ("hdfs-site.xml", "yarn-site.xml"):
        (conf / name).write_text(SITE)
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("hdfs", "yarn"):
        (tools / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> {tmp_path}/asked\n')
        (tools / tool).chmod(0o755)
    return tmp_path


def admin(master: Path, *argv: str, fail: str = "") -> tuple[int, dict]:
    env = {
        **os.environ,
        "HADOOP_CONF_DIR": str(master / "conf"),
        "PATH": f"{master / 'bin'}:{os.environ['PATH']}",
    }
    if fail:
        (master / "bin" / fail).write_text(
            "#!/bin/sh\necho 'refreshNodes: Connection refused' >&2\nexit 255\n"
        )
    done = subprocess.run(
        [sys.executable, str(ADMIN), *argv], capture_output=True, text=True, env=env, check=False
    )
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1])


def asked(master: Path) -> list[str]:
    path = master / "asked"
    return path.read_text().splitlines() if path.exists() else []


def test_an_exclude_names_the_files_in_the_configuration_and_refreshes_only_on_a_change(master):
    argv = ["exclude", "add", "--ips", "10.0.0.9", "--names", "worker-9", "--graceful", "60"]
    assert admin(master, *argv) == (0, {"changed": True})
    conf = master / "conf"
    assert (conf / "platter.exclude").read_text() == "10.0.0.9\n"
    assert (conf / "platter.yarn-exclude").read_text() == "worker-9\n"
    assert f"<value>{conf}/platter.exclude</value>" in (conf / "hdfs-site.xml").read_text()
    assert "yarn.resourcemanager.nodes.exclude-path" in (conf / "yarn-site.xml").read_text()
    assert asked(master) == [
        "hdfs dfsadmin -refreshNodes",
        "yarn rmadmin -refreshNodes -g 60 -server",
    ]

    # The same again changes nothing, so nothing is asked to read the files again.
    assert admin(master, *argv) == (0, {"changed": False})
    assert len(asked(master)) == 2
    assert (conf / "hdfs-site.xml").read_text().count("dfs.hosts.exclude") == 1

    # Back into service: a plain refresh.
    assert admin(master, "exclude", "remove", "--ips", "10.0.0.9", "--names", "worker-9") == (
        0,
        {"changed": True},
    )
    assert (conf / "platter.exclude").read_text() == ""
    assert asked(master)[-1] == "yarn rmadmin -refreshNodes"


def test_a_refresh_that_fails_is_an_error_naming_the_tool_and_what_it_said(master):
    code, answer = admin(master, "exclude", "add", "--ips", "10.0.0.9", "--names", "w", fail="hdfs")
    assert code == 1
    assert answer == {
        "error": "exclude: hdfs dfsadmin exited with 255: refreshNodes: Connection refused"
    }


def test_a_namenode_that_does_not_answer_is_an_error(master):
    code, answer = admin(master, "datanodes")
    assert code == 1
    assert answer["error"].startswith("datanodes: ")

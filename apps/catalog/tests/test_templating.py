import pytest

from apps.catalog.options import resolve
from apps.catalog.templating import (
    TemplateError,
    configure_plan,
    default_hostname,
    default_hostnames,
    instance_command,
    instance_environment,
    render,
)

from .factories import make_version


def test_it_renders_members_and_role_hosts_into_the_environment():
    version = make_version()
    spec = resolve(version, {"size": 2})
    hosts = default_hostnames("demo", spec)
    env = instance_environment(version, spec, spec.instances[1], "demo", hosts)
    assert env == {
        "MEMBERS": "demo-master-0 demo-worker-0 demo-worker-1",
        "MASTER": "demo-master-0",
    }


def test_it_leaves_shell_variables_alone():
    assert render("echo ${HOME} $X {{a}}", {"a": "1"}) == "echo ${HOME} $X 1"


def test_it_names_an_unknown_placeholder():
    with pytest.raises(TemplateError, match=r"unknown placeholder \{\{b\}\}"):
        render("{{b}}", {})


def test_it_runs_once_steps_only_in_the_first_instance_of_the_role():
    version = make_version()
    spec = resolve(version, {"size": 3})
    plan = configure_plan(version, spec, "c1", default_hostnames("c1", spec))
    assert [(i.role, i.index, argv) for i, argv in plan[0]["runs"]] == [
        ("master", 0, ["sh", "-c", "echo 3"])
    ]


def test_it_keeps_the_image_command_when_a_role_has_none():
    version = make_version()
    spec = resolve(version, {})
    assert (
        instance_command(version, spec, spec.instances[0], "c", default_hostnames("c", spec))
        is None
    )


def test_it_makes_dns_safe_hostnames():
    assert default_hostname("My Cluster!", "worker", 3) == "my-cluster-worker-3"
    assert len(default_hostname("x" * 80, "worker", 3)) <= 63

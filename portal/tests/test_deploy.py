"""The deployment files (compose.yaml, Dockerfile, deploy/) refer to real things: modules,
commands, settings, queues and secrets that exist, so a typo fails here, not on a server."""

import configparser
import importlib
import os
import re
import runpy
import secrets
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
import yaml
from django.core.management import get_commands

from portal.queues import ALL_QUEUES

BASE_DIR = Path(__file__).resolve().parents[2]
UNITS = BASE_DIR / "deploy" / "systemd"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((BASE_DIR / "compose.yaml").read_text())


def portal_services(compose: dict) -> dict[str, dict]:
    return {
        name: s for name, s in compose["services"].items() if s.get("image") == "platter:latest"
    }


def option(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


class CaseSensitiveParser(configparser.ConfigParser):
    def optionxform(self, optionstr: str) -> str:
        return optionstr  # systemd keys are case-sensitive


def unit(name: str) -> configparser.ConfigParser:
    parser = CaseSensitiveParser(strict=False, interpolation=None)
    parser.read_string((UNITS / name).read_text())
    return parser


def settings_source() -> str:
    folder = BASE_DIR / "portal"
    return "".join(p.read_text() for p in [*folder.glob("settings/*.py"), folder / "env.py"])


def test_compose_names_the_services_of_a_deployment(compose):
    assert {"postgres", "redis", "migrate", "web", "beat", "proxy"} <= set(compose["services"])
    assert set(compose["secrets"]) == {
        "secret_key",
        "database_url",
        "postgres_password",
        "metrics_token",
    }


def test_the_workers_consume_every_queue_and_only_known_ones(compose):
    consumed = []
    for service in portal_services(compose).values():
        argv = service["command"]
        if argv[:4] == ["celery", "-A", "portal", "worker"]:
            consumed += option(argv, "-Q").split(",")
    assert sorted(consumed) == sorted(ALL_QUEUES), "each queue exactly one worker service"
    assert hasattr(importlib.import_module("portal.celery"), "app")


def test_there_is_exactly_one_beat(compose):
    beats = [name for name, s in portal_services(compose).items() if "beat" in s["command"]]
    assert beats == ["beat"]
    assert "replicas" not in compose["services"]["beat"].get("deploy", {})


def test_management_commands_and_settings_module_exist(compose):
    commands = get_commands()
    migrate = compose["services"]["migrate"]["command"]
    for step in migrate[-1].split("&&"):
        argv = shlex.split(step)
        assert argv[:2] == ["python", "manage.py"] and argv[2] in commands
    env = compose["x-portal"]["environment"]
    assert importlib.util.find_spec(env["DJANGO_SETTINGS_MODULE"]) is not None


def test_every_variable_given_to_the_portal_is_read_by_its_settings(compose):
    source = settings_source()
    for name in compose["x-portal"]["environment"]:
        if name == "DJANGO_SETTINGS_MODULE":
            continue
        read_as = name.removesuffix("_FILE")  # envstr reads NAME_FILE for any NAME
        assert f'"{read_as}"' in source, f"{name} is read by no setting"
    gunicorn = (BASE_DIR / "deploy" / "gunicorn.conf.py").read_text()
    for name in compose["services"]["web"]["environment"]:
        if name.startswith("GUNICORN_"):
            assert f'"{name}"' in gunicorn


def test_secrets_are_files_the_service_is_given(compose):
    for name, service in portal_services(compose).items():
        for variable, value in service["environment"].items():
            if variable.endswith("_FILE"):
                secret = value.removeprefix("/run/secrets/")
                assert secret in service["secrets"], f"{name}: {variable} names no secret it has"
    postgres = compose["services"]["postgres"]
    secret = postgres["environment"]["POSTGRES_PASSWORD_FILE"].removeprefix("/run/secrets/")
    assert secret in postgres["secrets"]


def test_the_proxy_serves_the_static_files_migrate_collects_and_forwards_to_web(compose):
    caddyfile = (BASE_DIR / "deploy" / "Caddyfile").read_text()
    port = compose["services"]["web"]["environment"]["GUNICORN_BIND"].rsplit(":", 1)[1]
    assert f"reverse_proxy web:{port}" in caddyfile
    static_root = re.search(r"STATIC_ROOT=(\S+)", (BASE_DIR / "Dockerfile").read_text())[1]
    assert f"static:{static_root}" in compose["services"]["migrate"]["volumes"]
    assert "static:/srv/static:ro" in compose["services"]["proxy"]["volumes"]
    assert "root * /srv/static" in caddyfile


def test_the_dockerfile_copies_what_exists_and_starts_gunicorn_with_our_config():
    dockerfile = (BASE_DIR / "Dockerfile").read_text()
    for source in re.findall(r"^COPY (\S+) ", dockerfile, flags=re.MULTILINE):
        assert (BASE_DIR / source).exists(), f"COPY {source}: no such file"
    assert 'CMD ["gunicorn", "-c", "deploy/gunicorn.conf.py"]' in dockerfile
    ignored = (BASE_DIR / ".dockerignore").read_text().split()
    assert ".local" in ignored and "secrets" in ignored  # keys never enter the image


def test_the_gunicorn_config_loads_the_production_application():
    env = {
        **os.environ,
        "SECRET_KEY": secrets.token_urlsafe(60),
        "ALLOWED_HOSTS": "platter.example.org",
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)  # the config file picks production
    result = subprocess.run(
        [sys.executable, "-m", "gunicorn", "--check-config", "-c", "deploy/gunicorn.conf.py"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    # The config sets defaults in os.environ (PLATTER_DB_POOL, the settings module): kept from
    # this process, whose later tests start servers that would inherit them.
    with mock.patch.dict(os.environ):
        config = runpy.run_path(str(BASE_DIR / "deploy" / "gunicorn.conf.py"))
    module, attribute = config["wsgi_app"].split(":")
    assert module == "portal.asgi" and attribute == "application"
    # ASGI under uvicorn's workers: streams wait on the event loop, not in threads (issue 29).
    assert config["worker_class"] == "uvicorn_worker.UvicornWorker"


def test_the_systemd_units_start_real_programs_on_every_queue():
    web = unit("platter-web.service")
    assert "gunicorn -c deploy/gunicorn.conf.py" in web["Service"]["ExecStart"]
    worker = unit("platter-worker@.service")
    assert "celery -A portal worker -Q %i" in worker["Service"]["ExecStart"]
    beat = unit("platter-beat.service")
    assert "celery -A portal beat" in beat["Service"]["ExecStart"]
    # The install line enables one worker per queue.
    enabled = re.findall(r"platter-worker@(\w+)", (UNITS / "platter-web.service").read_text())
    assert sorted(enabled) == sorted(ALL_QUEUES)
    for name, parsed in [
        ("platter-web.service", web),
        ("platter-worker@.service", worker),
        ("platter-beat.service", beat),
    ]:
        service = parsed["Service"]
        assert service["User"] == "platter" and service["NoNewPrivileges"] == "yes"
        # Secrets are systemd credentials, read through *_FILE (last Environment= line wins
        # in the parser above, so read the text).
        assert "Environment=SECRET_KEY_FILE=%d/secret_key" in (UNITS / name).read_text()


@pytest.mark.skipif(
    not shutil.which("systemd-analyze"), reason="systemd-analyze is not on this machine"
)
def test_systemd_finds_nothing_wrong_in_the_units_but_the_missing_install(tmp_path):
    shutil.copy(UNITS / "platter-worker@.service", tmp_path / "platter-worker@nodes.service")
    for name in ("platter-web.service", "platter-beat.service"):
        shutil.copy(UNITS / name, tmp_path / name)
    result = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *sorted(map(str, tmp_path.iterdir()))],
        capture_output=True,
        text=True,
        check=False,
    )
    complaints = [line for line in (result.stderr + result.stdout).splitlines() if line.strip()]
    # /opt/platter is not installed here; anything else is a mistake in a unit.
    assert complaints and all("/opt/platter/.venv/bin/" in line for line in complaints), complaints


@pytest.mark.skipif(
    subprocess.run(["docker", "compose", "version"], capture_output=True, check=False).returncode
    != 0,
    reason="the docker compose plugin is not on this machine",
)
def test_docker_compose_accepts_the_file(tmp_path):
    secrets_dir = BASE_DIR / "secrets"
    env = {**os.environ, "PLATTER_HOSTNAME": "platter.example.org"}
    made = not secrets_dir.exists()
    if made:
        secrets_dir.mkdir()
        for name in ("secret_key", "database_url", "postgres_password", "metrics_token"):
            (secrets_dir / name).write_text("x")
    try:
        result = subprocess.run(
            ["docker", "compose", "config", "--quiet"],
            cwd=BASE_DIR,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        if made:
            shutil.rmtree(secrets_dir)
    assert result.returncode == 0, result.stderr

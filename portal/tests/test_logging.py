"""Log lines carry the request and cluster ids: JSON for collectors, plain for people; and the
request id follows the work into the Celery worker."""

import copy
import json
import logging
import logging.config
import os
import subprocess
import sys
import time

import pytest
from django.conf import settings
from django.core.management import call_command

from apps.clusters.tests.factories import make_roomy_node
from conftest import worker_log_path
from portal import context

log = logging.getLogger("platter.test")


def configure(log_format: str) -> None:
    config = copy.deepcopy(settings.LOGGING)
    config["handlers"]["console"]["formatter"] = log_format
    logging.config.dictConfig(config)


@pytest.fixture
def log_lines(capsys):
    """Reads the lines the console handler wrote to stderr (tests call configure() first);
    settings.LOGGING is restored afterwards."""

    def lines() -> list[str]:
        return capsys.readouterr().err.splitlines()

    yield lines
    logging.config.dictConfig(settings.LOGGING)


def json_lines(lines: list[str]) -> list[dict]:
    return [json.loads(line) for line in lines]


def test_a_requests_log_lines_are_json_with_its_request_id(client, db, log_lines):
    configure("json")
    response = client.get("/no-such-page", REMOTE_ADDR="192.0.2.9")
    assert response.status_code == 404

    records = json_lines(log_lines())  # every line is JSON
    mine = [r for r in records if r.get("request_id") == response["X-Request-ID"]]
    assert mine, records
    (not_found,) = [r for r in mine if r["logger"] == "django.request"]
    assert not_found["level"] == "WARNING"
    assert not_found["message"] == "Not Found: /no-such-page"
    assert not_found["client_address"] == "192.0.2.9"
    assert not_found["status_code"] == 404
    assert "request" not in not_found
    assert not_found["time"].endswith("+00:00")


def test_secrets_a_request_carries_stay_out_of_the_logs(client, db, log_lines):
    configure("json")
    client.get(
        "/no-such-page?token=query-secret-1234",
        HTTP_AUTHORIZATION="Bearer header-secret-5678",
        HTTP_COOKIE="sessionid=cookie-secret-9012",
    )
    text = "\n".join(log_lines())
    assert "Not Found: /no-such-page" in text
    for secret in ("query-secret-1234", "header-secret-5678", "cookie-secret-9012"):
        assert secret not in text


def test_an_exception_is_logged_with_its_traceback_and_cluster(log_lines):
    configure("json")
    with context.bound(cluster_id=42, request_id="req-abcdef12"):
        try:
            1 / 0  # noqa: B018
        except ZeroDivisionError:
            log.exception("placing went wrong")
    (record,) = [r for r in json_lines(log_lines()) if r["logger"] == "platter.test"]
    assert record["level"] == "ERROR"
    assert record["message"] == "placing went wrong"
    assert record["cluster_id"] == 42
    assert record["request_id"] == "req-abcdef12"
    assert "ZeroDivisionError" in record["exc_info"]


def test_plain_lines_end_with_the_ids_when_there_are_any(log_lines):
    configure("plain")
    with context.bound(cluster_id=7, request_id="req-0123456789"):
        log.warning("inside a task")
    log.warning("outside any")
    inside, outside = [line for line in log_lines() if "platter.test" in line]
    assert inside.endswith(
        "WARNING platter.test inside a task [request_id=req-0123456789 cluster_id=7]"
    )
    assert outside.endswith("WARNING platter.test outside any")


def production_log_format(**env: str) -> str:
    """The log format portal.settings.prod ends up with, in a fresh interpreter."""
    environment = {k: v for k, v in os.environ.items() if k != "PLATTER_LOG_FORMAT"}
    environment.update(SECRET_KEY="k7" * 30, ALLOWED_HOSTS="platter.example.org", **env)
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "from portal.settings import prod; "
            "print(prod.LOGGING['handlers']['console']['formatter'])",
        ],
        cwd=settings.BASE_DIR,
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_production_logs_json_unless_told_otherwise():
    assert production_log_format() == "json"
    assert production_log_format(PLATTER_LOG_FORMAT="plain") == "plain"


@pytest.mark.django_db(transaction=True)
def test_a_task_logs_with_the_id_of_the_request_that_sent_it_and_its_cluster(
    client, dispatching, alice
):
    call_command("load_catalog", verbosity=0)
    make_roomy_node()  # a launch on an empty pool is refused
    client.force_login(alice)
    response = client.post(
        "/api/v1/products/demo/1.0",
        {"size": 1},
        content_type="application/json",
        HTTP_X_REQUEST_ID="launch-req-0001",
    )
    assert response.status_code == 202, response.content
    cluster_id = response.json()["id"]

    deadline = time.monotonic() + 60
    while True:
        records = [
            json.loads(line)
            for line in worker_log_path().read_text().splitlines()
            if line.startswith("{")
        ]
        mine = [r for r in records if r.get("request_id") == "launch-req-0001"]
        if any("succeeded" in r["message"] for r in mine) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    (done,) = [r for r in mine if r["message"].startswith("Task platter.launch_cluster[")]
    assert "succeeded" in done["message"]
    assert done["cluster_id"] == cluster_id
    assert done["logger"] == "celery.app.trace"

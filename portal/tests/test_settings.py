"""Production settings must pass Django's deployment checklist with no warnings."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]


def run_manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "ALLOWED_HOSTS"}}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        env={**clean, **env},
        check=False,
    )


def check_deploy(**env: str) -> subprocess.CompletedProcess:
    """Django's deployment checklist on the production settings, warnings counting as errors."""
    return run_manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DJANGO_SETTINGS_MODULE="portal.settings.prod",
        ALLOWED_HOSTS="platter.example.org",
        **env,
    )


def test_it_passes_check_deploy_without_warnings():
    result = check_deploy(SECRET_KEY="x7" * 30 + "-production-secret-for-the-checklist")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_it_refuses_to_start_production_without_a_secret_key():
    result = run_manage(
        "check", DJANGO_SETTINGS_MODULE="portal.settings.prod", ALLOWED_HOSTS="platter.example.org"
    )
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr


def test_it_reads_the_secret_key_from_a_file(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text(secrets.token_urlsafe(50))
    result = check_deploy(SECRET_KEY_FILE=str(secret))
    assert result.returncode == 0, result.stdout + result.stderr

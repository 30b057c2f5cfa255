"""Production settings must pass Django's deployment checklist with no warnings."""

import ast
import os
import re
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


def test_production_leaves_out_the_lab_and_the_demo_logins():
    """apps.lab (the lab, seed_demo's admin/demo logins, the fault suite) is development's:
    under the production settings its commands do not exist, and nothing reads its settings."""
    secret = {"SECRET_KEY": "x7" * 30 + "-production-secret-for-the-checklist"}
    production = {
        "DJANGO_SETTINGS_MODULE": "portal.settings.prod",
        "ALLOWED_HOSTS": "p.example.org",
    }
    probe = (
        "from django.conf import settings; "
        "from django.core.management import get_commands; "
        "print(list(settings.INSTALLED_APPS)); "
        "print(hasattr(settings, 'LAB_NODES')); "
        "print(sorted(get_commands()))"
    )
    shown = run_manage("shell", "-c", probe, **production, **secret)
    assert shown.returncode == 0, shown.stderr
    installed, has_lab_settings, commands = shown.stdout.strip().splitlines()[-3:]
    assert "apps.lab" not in installed and has_lab_settings == "False"
    # Django's own list of commands, as `manage.py <command>` finds them (one process).
    for command in ("seed_demo", "lab", "fault_suite"):
        assert repr(command) not in commands
    assert "'migrate'" in commands  # the list is Django's whole one
    # ...while development has them.
    development = run_manage("seed_demo", "--help", DJANGO_SETTINGS_MODULE="portal.settings.dev")
    assert development.returncode == 0, development.stderr


def test_base_settings_name_every_app_and_middleware_in_one_list():
    """INSTALLED_APPS and MIDDLEWARE are each one literal list in base.py, read top to bottom:
    no later `+=`, insert or append changes their order (dev.py adds apps.lab, nothing else)."""
    tree = ast.parse((BASE_DIR / "portal" / "settings" / "base.py").read_text())
    for name in ("INSTALLED_APPS", "MIDDLEWARE"):
        assignments = [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign)
            and any(
                isinstance(target, ast.Name) and target.id == name
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            )
        ]
        assert len(assignments) == 1 and isinstance(assignments[0].value, ast.List), name
        changes = [
            node.lineno
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == name
        ]
        assert changes == [], f"{name} changed at base.py lines {changes}"


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


def test_it_refuses_the_development_key_in_production():
    result = check_deploy(SECRET_KEY="dev-only-insecure-key-do-not-use-in-production" + "x" * 10)
    assert result.returncode != 0
    assert "SECRET_KEY is a development key" in result.stderr


def test_it_refuses_debug_in_production():
    result = check_deploy(SECRET_KEY="x7" * 30 + "-production-secret-for-the-checklist", DEBUG="1")
    assert result.returncode != 0
    assert "DEBUG is never on in production" in result.stderr


# A PEM private key: its header line followed by base64 key material.
KEY_MATERIAL = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----\s+[A-Za-z0-9+/]{40}")


def a_private_key() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def test_no_secret_is_committed():
    """Keys, certificates and env files live under .local/ or come from *_FILE paths; the
    only passwords in the repository are the demo logins seed_demo creates (documented)."""
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=BASE_DIR, capture_output=True, text=True, check=True
    ).stdout.split()
    assert len(tracked) > 100
    assert KEY_MATERIAL.search(a_private_key())  # the pattern does catch a real key
    suspicious = [
        p for p in tracked if p.endswith((".pem", ".key", ".env", ".p12")) or "id_rsa" in p
    ]
    assert suspicious == []
    for path in tracked:
        if path.endswith((".py", ".json", ".toml", ".md", ".cfg", ".yml", ".yaml", ".sh")):
            text = (
                (BASE_DIR / path).read_text(errors="replace") if (BASE_DIR / path).is_file() else ""
            )
            assert not KEY_MATERIAL.search(text), path

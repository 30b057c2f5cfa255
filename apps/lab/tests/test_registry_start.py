"""The lab registry's start, above the machine: a registry that exits while starting is
reported at once with the end of its log (not taken for dead while it is still being
exec'd, as a /proc read of its pidfile once did), and one that never answers is given up
after START_SECONDS. The real start, TLS and pulls: apps/catalog/tests/test_product_images.py."""

import shutil
import subprocess
import sys
import time

import pytest

from apps.lab import registry
from apps.lab.host import LabError
from apps.lab.nodes import LabSpec
from apps.nodes import pki


@pytest.fixture
def lab_registry(tmp_path) -> registry.LabRegistry:
    # A loopback address nothing listens on: refused at once, never a wait.
    spec = LabSpec.at(tmp_path / "lab", segments_subnet="127.255.255.0/24")
    found = registry.LabRegistry(spec)
    (found.folder / "tls").mkdir(parents=True)
    (found.folder / "password").write_text("secret\n")
    pki.ensure_ca(tmp_path / "ca")
    shutil.copyfile(tmp_path / "ca" / "ca.pem", found.folder / "tls" / "ca.pem")
    (found.folder / "registry.log").write_text('level=fatal msg="cannot bind"\n')
    return found


def test_a_registry_that_exits_while_starting_is_reported_at_once_with_its_log(lab_registry):
    exited = subprocess.Popen([sys.executable, "-c", "pass"])
    exited.wait()
    started = time.monotonic()
    with pytest.raises(LabError, match='its log ends: level=fatal msg="cannot bind"'):
        registry._wait(lab_registry, exited)
    assert time.monotonic() - started < registry.START_SECONDS / 2


def test_a_registry_that_runs_but_never_answers_is_given_up(lab_registry, monkeypatch):
    monkeypatch.setattr(registry, "START_SECONDS", 0.5)
    silent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with pytest.raises(LabError, match=r"did not answer at 127\.255\.255\.1:5443"):
            registry._wait(lab_registry, silent)
        assert silent.poll() is None  # still running: given up by the deadline alone
    finally:
        silent.kill()
        silent.wait()

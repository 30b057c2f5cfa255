import pytest
from django.core.management import call_command

from apps.health import doctor


def test_it_finds_nothing_missing_on_a_machine_set_up_by_platter(lab_inventory, capsys):
    call_command("doctor")
    out = capsys.readouterr().out
    assert "all good" in out
    assert "node lab-1" in out


def test_it_names_the_package_that_provides_a_missing_tool(monkeypatch):
    monkeypatch.setattr(doctor, "_which", lambda tool: None if tool == "fio" else "/bin/true")
    findings = {f.what: f for f in doctor.machine_findings()}
    assert findings["fio installed"].ok is False
    assert findings["fio installed"].fix == "apt-get install -y fio"


@pytest.mark.django_db
def test_it_exits_non_zero_and_says_how_to_fix_when_no_nodes_are_registered(capsys):
    with pytest.raises(SystemExit) as exit_info:
        call_command("doctor")
    assert exit_info.value.code == 1
    assert "./platter lab up" in capsys.readouterr().out

import pytest

from portal.env import EnvError, envbool, envint, envlist, envstr


def test_it_reads_booleans_in_the_usual_spellings(monkeypatch):
    for raw, expected in [("1", True), ("yes", True), ("ON", True), ("0", False), ("off", False)]:
        monkeypatch.setenv("FLAG", raw)
        assert envbool("FLAG", not expected) is expected


def test_it_names_the_variable_when_a_boolean_is_nonsense(monkeypatch):
    monkeypatch.setenv("FLAG", "maybe")
    with pytest.raises(EnvError, match="FLAG='maybe' is not a boolean"):
        envbool("FLAG", False)


def test_it_uses_defaults_when_unset(monkeypatch):
    monkeypatch.delenv("NUMBER", raising=False)
    monkeypatch.delenv("HOSTS", raising=False)
    assert envint("NUMBER", 7) == 7
    assert envlist("HOSTS", ["a"]) == ["a"]


def test_it_names_the_variable_when_a_number_is_not_one(monkeypatch):
    monkeypatch.setenv("NUMBER", "ten")
    with pytest.raises(EnvError, match="NUMBER='ten' is not a whole number"):
        envint("NUMBER", 1)


def test_it_splits_lists_and_drops_blanks(monkeypatch):
    monkeypatch.setenv("HOSTS", "a.example, b.example,,")
    assert envlist("HOSTS", []) == ["a.example", "b.example"]


def test_a_secret_file_wins_over_the_plain_variable(monkeypatch, tmp_path):
    secret = tmp_path / "key"
    secret.write_text("from-file\n")
    monkeypatch.setenv("SECRET", "from-env")
    monkeypatch.setenv("SECRET_FILE", str(secret))
    assert envstr("SECRET") == "from-file"

"""/ssh-keys: the caller's own public SSH keys, with personal tokens."""

import pytest

from apps.accounts import ssh
from apps.accounts.models import SSHKey
from apps.accounts.tests.keys import ed25519_pair, ed25519_public, rsa_public

from .conftest import OWN_READ, OWN_WRITE, PERSONAS


@pytest.mark.parametrize("persona", PERSONAS)
def test_who_may_list_and_add_keys(api, persona):
    assert api(persona).get("/api/v1/ssh-keys").status_code == OWN_READ[persona]
    answer = api(persona).post("/api/v1/ssh-keys", {"public_key": ed25519_public()}, format="json")
    assert answer.status_code == OWN_WRITE[persona]


def test_it_adds_a_key_and_lists_only_the_callers(api, alice, bob):
    ssh.add_key(bob, ed25519_public("bob"), "bobs")
    line = ed25519_public("alice@laptop")
    answer = api("owner").post(
        "/api/v1/ssh-keys", {"name": "laptop", "public_key": line + "\n"}, format="json"
    )
    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert body["name"] == "laptop" and body["public_key"] == line
    assert body["type"] == "ssh-ed25519" and body["fingerprint"].startswith("SHA256:")
    listed = api("owner").get("/api/v1/ssh-keys").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert [row["id"] for row in rows] == [body["id"]]
    assert api("owner").get(f"/api/v1/ssh-keys/{body['id']}").json()["name"] == "laptop"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("not a key", "not an SSH public key"),
        (ed25519_pair()[0], "PRIVATE key"),
        (rsa_public(1024), "RSA key has 1024 bits, too short"),
        (ed25519_public() + "\n" + ed25519_public(), "one key at a time"),
        ("", "This field may not be blank."),
    ],
)
def test_a_bad_key_answers_400_naming_the_problem(api, alice, text, problem):
    answer = api("owner").post("/api/v1/ssh-keys", {"public_key": text}, format="json")
    assert answer.status_code == 400
    assert problem in str(answer.json())
    assert not SSHKey.objects.exists()


def test_a_duplicate_answers_400(api, alice):
    line = ed25519_public()
    first = api("owner").post("/api/v1/ssh-keys", {"public_key": line}, format="json")
    assert first.status_code == 201
    answer = api("owner").post("/api/v1/ssh-keys", {"public_key": line}, format="json")
    assert answer.status_code == 400
    assert "already in your profile" in str(answer.json())


def test_others_keys_answer_404_and_stay(api, alice, bob):
    theirs = ssh.add_key(bob, ed25519_public())
    assert api("owner").get(f"/api/v1/ssh-keys/{theirs.id}").status_code == 404
    assert api("owner").delete(f"/api/v1/ssh-keys/{theirs.id}").status_code == 404
    assert SSHKey.objects.filter(id=theirs.id).exists()


def test_the_owner_deletes_a_key(api, alice):
    mine = ssh.add_key(alice, ed25519_public())
    assert api("read_only").delete(f"/api/v1/ssh-keys/{mine.id}").status_code == 403
    assert api("owner").delete(f"/api/v1/ssh-keys/{mine.id}").status_code == 204
    assert not SSHKey.objects.exists()

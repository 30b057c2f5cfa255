"""Checking and keeping users' public SSH keys (apps.accounts.ssh)."""

import base64
import hashlib
import subprocess

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from django.core.cache import cache

from apps.accounts import ssh, ssh_sync
from apps.accounts.models import SSHKey

from .keys import ecdsa_public, ed25519_pair, ed25519_public, rsa_public


def refused(text: str) -> str:
    with pytest.raises(ssh.InvalidKey) as caught:
        ssh.parse_public_key(text)
    return str(caught.value)


# ------------------------------------------------------------------ good keys


def test_it_accepts_an_ed25519_key_and_keeps_its_comment():
    line = ed25519_public("alice@laptop")
    parsed = ssh.parse_public_key(f"  {line}\n")
    assert parsed.key_type == "ssh-ed25519"
    assert parsed.comment == "alice@laptop"
    assert parsed.line == line


def test_it_accepts_ecdsa_keys_of_every_curve():
    for curve, name in [
        (ec.SECP256R1(), "nistp256"),
        (ec.SECP384R1(), "nistp384"),
        (ec.SECP521R1(), "nistp521"),
    ]:
        assert ssh.parse_public_key(ecdsa_public(curve)).key_type == f"ecdsa-sha2-{name}"


def test_it_accepts_rsa_of_2048_bits():
    parsed = ssh.parse_public_key(rsa_public(2048))
    assert (parsed.key_type, parsed.bits) == ("ssh-rsa", 2048)


def test_it_normalises_spacing_and_a_comment_of_several_words():
    kind, data = ed25519_public("").split()
    parsed = ssh.parse_public_key(f"{kind}\t {data}   my  work   key ")
    assert parsed.line == f"{kind} {data} my work key"


def test_the_fingerprint_is_what_ssh_keygen_prints(tmp_path):
    line = ed25519_public("x")
    blob = base64.b64decode(line.split()[1])
    expected = "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    assert ssh.parse_public_key(line).fingerprint == expected
    (tmp_path / "k.pub").write_text(line + "\n")
    printed = subprocess.run(
        ["ssh-keygen", "-l", "-f", str(tmp_path / "k.pub")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert printed.split()[1] == expected


# ------------------------------------------------------------------ bad keys


def test_it_refuses_a_private_key_and_says_so():
    private, _ = ed25519_pair()
    message = refused(private)
    assert "PRIVATE key" in message
    assert "ssh-keygen -y" in message


def test_it_refuses_an_empty_field():
    assert "no key given" in refused("   \n ")


@pytest.mark.parametrize("garbage", ["hello world", "AAAAC3NzaC1lZDI1NTE5AAAA", "ssh"])
def test_it_refuses_garbage_naming_the_types_it_takes(garbage):
    message = refused(garbage)
    assert "not an SSH public key" in message
    assert "ssh-ed25519" in message


def test_it_refuses_two_keys_in_one_field():
    assert "one key at a time: this holds 2 lines" in refused(
        ed25519_public() + "\n" + ed25519_public()
    )
    assert "more than one key" in refused(ed25519_public("") + " " + ed25519_public(""))


def test_it_refuses_authorized_keys_options():
    message = refused('command="/bin/sh" ' + ed25519_public())
    assert "options before it are not accepted" in message


def test_it_refuses_short_rsa_dsa_certificates_and_security_keys():
    assert "RSA key has 1024 bits, too short: at least 2048" in refused(rsa_public(1024))
    assert "DSA keys are not accepted" in refused("ssh-dss AAAAB3NzaC1kc3MAAACBAP== x")
    assert "certificates" in refused("ssh-ed25519-cert-v01@openssh.com AAAA x")
    assert "FIDO" in refused("sk-ssh-ed25519@openssh.com AAAA x")


def test_it_refuses_damaged_key_data():
    kind, data, *_ = ed25519_public().split()
    assert "not valid base64" in refused(f"{kind} {data[:-3]}!!!")
    assert "no key data" in refused("ssh-ed25519")
    truncated = base64.b64encode(base64.b64decode(data)[:-4]).decode()
    assert "damaged" in refused(f"{kind} {truncated}")


def test_it_refuses_a_key_labelled_with_another_type():
    data = ed25519_public().split()[1]
    assert "is not a ssh-rsa key" in refused(f"ssh-rsa {data}")


def test_it_refuses_control_characters_in_the_comment():
    assert "control characters" in refused(ed25519_public("") + " evil\x1b[2J")


# ------------------------------------------------------------------ keeping keys


def test_add_key_keeps_the_normalised_line_and_names_it(alice):
    line = ed25519_public("alice@laptop")
    key = ssh.add_key(alice, f"\n{line}\n", name=" laptop ")
    assert (key.name, key.public_key) == ("laptop", line)
    assert key.fingerprint.startswith("SHA256:")
    assert ssh.add_key(alice, ed25519_public("from-comment")).name == "from-comment"
    assert ssh.add_key(alice, ed25519_public("")).name == "ssh-ed25519 key"


def test_add_key_refuses_a_duplicate_naming_the_first(alice, bob):
    line = ed25519_public("c")
    ssh.add_key(alice, line, name="laptop")
    with pytest.raises(ssh.InvalidKey, match="already in your profile, as “laptop”"):
        ssh.add_key(alice, line.replace(" c", " other comment"), name="again")
    ssh.add_key(bob, line, name="shared")  # another user may hold the same key
    assert SSHKey.objects.filter(user=alice).count() == 1


def test_add_key_refuses_more_than_the_maximum(alice, monkeypatch):
    monkeypatch.setattr(ssh, "MAX_KEYS_PER_USER", 2)
    ssh.add_key(alice, ed25519_public())
    ssh.add_key(alice, ed25519_public())
    with pytest.raises(ssh.InvalidKey, match="you have 2 keys, the most allowed"):
        ssh.add_key(alice, ed25519_public())


def test_delete_key_removes_only_the_owners_key(alice, bob):
    key = ssh.add_key(alice, ed25519_public())
    with pytest.raises(SSHKey.DoesNotExist):
        ssh.delete_key(bob, key.id)
    ssh.delete_key(alice, key.id)
    assert not SSHKey.objects.exists()


def test_a_change_hands_the_sync_to_the_workers_after_commit(
    alice, settings, monkeypatch, django_capture_on_commit_callbacks
):
    settings.DISPATCH_CLUSTER_TASKS = True
    cache.delete(ssh_sync.pending_key(alice.id))
    sent = []
    monkeypatch.setattr(
        "portal.celery.app.send_task", lambda name, args, **options: sent.append((name, args))
    )
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(ssh.InvalidKey):
        ssh.add_key(alice, "garbage")
    assert sent == []  # nothing changed, nothing to sync
    with django_capture_on_commit_callbacks(execute=True):
        key = ssh.add_key(alice, ed25519_public())
    with django_capture_on_commit_callbacks(execute=True):
        ssh.delete_key(alice, key.id)
    # The second change joined the run still pending (workers/tests/test_ssh_sync.py).
    assert sent == [(ssh.SYNC_TASK, [alice.id])]
    cache.delete(ssh_sync.pending_key(alice.id))


def test_authorized_keys_lists_the_users_lines_oldest_first(alice, bob):
    first, second = ed25519_public("1"), rsa_public(2048, "2")
    ssh.add_key(alice, first)
    ssh.add_key(alice, second)
    ssh.add_key(bob, ed25519_public("bob"))
    assert ssh.authorized_keys(alice.id) == [first, second]

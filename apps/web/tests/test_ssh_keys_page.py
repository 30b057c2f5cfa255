"""The SSH keys page of the profile: list, add, delete, own keys only."""

from django.urls import reverse

from apps.accounts import ssh
from apps.accounts.models import SSHKey
from apps.accounts.tests.keys import ed25519_pair, ed25519_public

PAGE = reverse("web:ssh_keys")


def test_it_sends_anonymous_visitors_to_sign_in(client, db):
    assert client.get(PAGE).status_code == 302


def test_the_nav_links_to_it(as_alice):
    assert f'href="{PAGE}"' in as_alice.get(reverse("web:quota")).content.decode()


def test_it_lists_only_my_keys(as_alice, alice, bob):
    ssh.add_key(alice, ed25519_public(), "my laptop")
    ssh.add_key(bob, ed25519_public(), "bobs desktop")
    page = as_alice.get(PAGE).content.decode()
    assert "my laptop" in page and "bobs desktop" not in page
    assert "SHA256:" in page


def test_it_adds_a_key(as_alice, alice):
    line = ed25519_public("alice@laptop")
    answer = as_alice.post(PAGE, {"name": "laptop", "public_key": line}, follow=True)
    assert answer.redirect_chain[-1][0] == PAGE
    key = SSHKey.objects.get(user=alice)
    assert (key.name, key.public_key) == ("laptop", line)
    assert "Added SSH key “laptop”" in answer.content.decode()


def test_a_bad_key_shows_the_problem_next_to_the_field(as_alice):
    private, _ = ed25519_pair()
    answer = as_alice.post(PAGE, {"name": "oops", "public_key": private})
    assert answer.status_code == 200
    page = answer.content.decode()
    assert "PRIVATE key" in page and 'class="error"' in page
    assert not SSHKey.objects.exists()


def test_it_deletes_my_key_and_404s_on_anothers(as_alice, alice, bob):
    mine = ssh.add_key(alice, ed25519_public())
    theirs = ssh.add_key(bob, ed25519_public())
    assert as_alice.post(reverse("web:ssh_key_delete", args=[theirs.id])).status_code == 404
    assert as_alice.get(reverse("web:ssh_key_delete", args=[mine.id])).status_code == 405
    assert as_alice.post(reverse("web:ssh_key_delete", args=[mine.id])).status_code == 302
    assert list(SSHKey.objects.values_list("id", flat=True)) == [theirs.id]

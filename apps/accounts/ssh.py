"""Users' public SSH keys: checking what a user pastes, keeping it, and handing the change to
the workers so running clusters get it (workers/ssh_keys.py).

A key is kept as OpenSSH writes it in a .pub file, normalised to one line "type base64
[comment]"; that line lands in authorized_keys as it is, so nothing else may come before the
type (authorized_keys options such as command="…" are refused) and the comment holds no
control characters.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from . import ssh_sync
from .models import SSHKey

KEY_TYPES = (
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "ssh-rsa",
)
MIN_RSA_BITS = 2048
MAX_COMMENT = 200
# Every key of a user goes into each of their clusters' environment: a bound keeps it small.
MAX_KEYS_PER_USER = 50
SYNC_TASK = ssh_sync.SYNC_TASK

# Types OpenSSH knows that are refused here, with why.
_REFUSED_TYPES = {
    "ssh-dss": "DSA keys are not accepted (OpenSSH no longer allows them): use ssh-ed25519",
    "sk-ssh-ed25519@openssh.com": "security-key (FIDO) keys are not accepted: use ssh-ed25519",
    "sk-ecdsa-sha2-nistp256@openssh.com": (
        "security-key (FIDO) keys are not accepted: use ssh-ed25519"
    ),
}
_EXPECTED = "ssh-ed25519, ecdsa-sha2-nistp256/384/521 or ssh-rsa"


class InvalidKey(ValueError):
    """What the user gave is not a key we accept; the message says why."""


@dataclass(frozen=True)
class ParsedKey:
    key_type: str
    data: str  # canonical base64 of the key blob
    comment: str
    fingerprint: str
    bits: int

    @property
    def line(self) -> str:
        return f"{self.key_type} {self.data} {self.comment}".rstrip()


def fingerprint_of(blob: bytes) -> str:
    """SHA256:… of a key blob, as `ssh-keygen -l` prints it."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def _is_key_type(token: str) -> bool:
    return token in KEY_TYPES or token in _REFUSED_TYPES or token.endswith("-cert-v01@openssh.com")


def _refuse_whole_text(text: str) -> None:
    """Problems visible before looking at a line: empty, a private key, PEM, several keys."""
    if not text:
        raise InvalidKey("no key given: paste the contents of your public key file (id_*.pub)")
    if "PRIVATE KEY" in text:
        raise InvalidKey(
            "this is a PRIVATE key: never share it. Paste the public key instead "
            "(the .pub file next to it, or the output of `ssh-keygen -y -f KEYFILE`)"
        )
    if text.startswith("---- BEGIN SSH2 PUBLIC KEY") or text.startswith("-----BEGIN"):
        raise InvalidKey(
            "this is a PEM/RFC 4716 block, not OpenSSH's one-line format: convert it with "
            "`ssh-keygen -i -f KEYFILE` and paste the line it prints"
        )
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) > 1:
        raise InvalidKey(f"one key at a time: this holds {len(lines)} lines; add each on its own")


def _split(line: str) -> tuple[str, str, str]:
    """(type, base64, comment) of one line, refusing options and a second key in it."""
    tokens = line.split()
    key_type = tokens[0]
    if not _is_key_type(key_type):
        if any(_is_key_type(t) for t in tokens[1:]):
            raise InvalidKey(
                f"the line must start with the key type ({_EXPECTED}); "
                "authorized_keys options before it are not accepted"
            )
        raise InvalidKey(
            f"not an SSH public key: it should start with {_EXPECTED}, "
            f"e.g. the contents of ~/.ssh/id_ed25519.pub (got {key_type[:30]!r})"
        )
    if key_type.endswith("-cert-v01@openssh.com"):
        raise InvalidKey("SSH certificates are not accepted: paste the plain public key")
    if key_type in _REFUSED_TYPES:
        raise InvalidKey(_REFUSED_TYPES[key_type])
    if len(tokens) < 2:
        raise InvalidKey(f"the {key_type} key has no key data after its type")
    if any(_is_key_type(t) for t in tokens[2:]):
        raise InvalidKey("one key at a time: this line holds more than one key")
    comment = " ".join(tokens[2:])
    if any(not ch.isprintable() for ch in comment):
        raise InvalidKey("the key's comment holds control characters")
    if len(comment) > MAX_COMMENT:
        raise InvalidKey(f"the key's comment is {len(comment)} characters (at most {MAX_COMMENT})")
    return key_type, tokens[1], comment


def parse_public_key(text: str) -> ParsedKey:
    """The key in ``text`` (one OpenSSH public key line), or InvalidKey naming the problem."""
    text = (text or "").strip()
    _refuse_whole_text(text)
    key_type, data, comment = _split(text)
    try:
        blob = binascii.a2b_base64(data.encode("ascii"), strict_mode=True)
    except (binascii.Error, UnicodeEncodeError):
        raise InvalidKey(
            f"the {key_type} key data is not valid base64: copy the whole line again"
        ) from None
    try:
        key = serialization.load_ssh_public_key(f"{key_type} {data}".encode())
    except (ValueError, UnsupportedAlgorithm):
        raise InvalidKey(
            f"the key data is damaged or is not a {key_type} key: copy the whole line again"
        ) from None
    bits = getattr(key, "key_size", 256)  # ed25519 keys have no key_size
    if isinstance(key, rsa.RSAPublicKey) and bits < MIN_RSA_BITS:
        raise InvalidKey(
            f"this RSA key has {bits} bits, too short: at least {MIN_RSA_BITS} "
            "(or use ssh-ed25519: `ssh-keygen -t ed25519`)"
        )
    canonical = base64.b64encode(blob).decode()
    return ParsedKey(key_type, canonical, comment, fingerprint_of(blob), bits)


def _name_for(name: str, parsed: ParsedKey) -> str:
    name = (name or "").strip()
    if len(name) > 100:
        raise InvalidKey(f"the name is {len(name)} characters (at most 100)")
    return name or parsed.comment[:100] or f"{parsed.key_type} key"


def add_key(user, text: str, name: str = "") -> SSHKey:
    """Keep a new public key of ``user`` (InvalidKey if bad or already there); the user's
    running clusters get it once this commits."""
    parsed = parse_public_key(text)
    name = _name_for(name, parsed)
    with transaction.atomic():
        # The user's row is the lock: two adds cannot both pass the count and duplicate checks.
        get_user_model().objects.select_for_update().filter(id=user.id).first()
        held = list(SSHKey.objects.filter(user=user).values_list("fingerprint", "name"))
        for fingerprint, other in held:
            if fingerprint == parsed.fingerprint:
                raise InvalidKey(f"this key is already in your profile, as “{other}”")
        if len(held) >= MAX_KEYS_PER_USER:
            raise InvalidKey(f"you have {len(held)} keys, the most allowed: delete one first")
        try:
            with transaction.atomic():
                key = SSHKey.objects.create(
                    user=user, name=name, public_key=parsed.line, fingerprint=parsed.fingerprint
                )
        except IntegrityError:  # the constraint is the backstop of the check above
            raise InvalidKey("this key is already in your profile") from None
        _sync_later(user.id)
    return key


def delete_key(user, key_id: int) -> None:
    """Remove one of ``user``'s keys (SSHKey.DoesNotExist when it is not theirs); running
    clusters lose it once this commits."""
    with transaction.atomic():
        deleted, _ = SSHKey.objects.filter(user=user, id=key_id).delete()
        if not deleted:
            raise SSHKey.DoesNotExist(f"no SSH key {key_id} of {user}")
        _sync_later(user.id)


def authorized_keys(user_id: int) -> list[str]:
    """The user's keys, one authorized_keys line each, oldest first."""
    return list(SSHKey.objects.filter(user_id=user_id).values_list("public_key", flat=True))


def _sync_later(user_id: int) -> None:
    ssh_sync.request_sync(user_id)  # coalesced: at most one pending run per user

"""Fresh SSH key pairs for tests, made with cryptography (no ssh-keygen needed)."""

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

OPENSSH = serialization.PublicFormat.OpenSSH


def ed25519_pair(comment: str = "alice@laptop") -> tuple[str, str]:
    """(private key in OpenSSH's PEM format, public key line)."""
    key = ed25519.Ed25519PrivateKey.generate()
    return _pair(key, comment)


def public_line(key, comment: str = "") -> str:
    line = key.public_key().public_bytes(serialization.Encoding.OpenSSH, OPENSSH).decode()
    return f"{line} {comment}".rstrip()


def ed25519_public(comment: str = "alice@laptop") -> str:
    return public_line(ed25519.Ed25519PrivateKey.generate(), comment)


def ecdsa_public(curve=None, comment: str = "") -> str:
    return public_line(ec.generate_private_key(curve or ec.SECP256R1()), comment)


def rsa_public(bits: int, comment: str = "") -> str:
    return public_line(rsa.generate_private_key(public_exponent=65537, key_size=bits), comment)


def _pair(key, comment: str) -> tuple[str, str]:
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    ).decode()
    return private, public_line(key, comment)

"""Product images through a registry: the builder pushes once, every node pulls.

The same steps serve a site (``manage.py product_images push`` against its own registry) and
the lab (apps/lab/registry.py). Each image is pushed under two tags: the product version the
catalog names (``platter/spark:4.3.0``) and its recipe's content hash (``content-<hash>``).
The second makes the registry a cache: a builder that finds the content tag there builds
nothing, and a node pulls exactly the content its recipe makes.
"""

from __future__ import annotations

import base64
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from apps.nodes import NodeClient, NodeError

from .build import BuildError

# What a registry answers for an image's manifest (Docker's and OCI's formats).
MANIFEST_TYPES = ", ".join(
    (
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.oci.image.index.v1+json",
    )
)


def content_tag(content: str) -> str:
    return f"content-{content}"


@dataclass(frozen=True)
class Registry:
    """A registry and how to sign in to it (empty username: anonymous)."""

    host: str  # "reg.example.org" or "10.214.255.1:5443"
    username: str = ""
    password: str = ""
    ca_file: Path | None = None  # the CA its certificate chains to; None: the system's

    def reference(self, repository: str, tag: str) -> str:
        return f"{self.host}/{repository}:{tag}"

    def auth_config(self) -> dict | None:
        if not self.username:
            return None
        return {"username": self.username, "password": self.password, "serveraddress": self.host}

    def has(self, repository: str, tag: str) -> bool:
        """Whether the registry holds that tag (asked over its HTTP API, nothing pulled).
        False as well when it cannot say (a token-based registry asks for another sign-in
        step): the caller then builds, which is never wrong, only slower."""
        request = urllib.request.Request(
            f"https://{self.host}/v2/{repository}/manifests/{tag}",
            method="HEAD",
            headers={"Accept": MANIFEST_TYPES},
        )
        if self.username:
            pair = f"{self.username}:{self.password}".encode()
            request.add_header("Authorization", "Basic " + base64.b64encode(pair).decode())
        try:
            context = ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file else None)
            with urllib.request.urlopen(request, timeout=30, context=context) as answer:  # noqa: S310
                return answer.status == 200
        except urllib.error.HTTPError as error:
            if error.code in (401, 403, 404):
                return False
            raise BuildError(f"registry {self.host} answered {error.code} for {tag}") from error
        except OSError as error:
            raise BuildError(f"registry {self.host} cannot be reached: {error}") from error


def push(engine: NodeClient, reference: str, content: str, registry: Registry) -> list[str]:
    """The engine's image ``reference`` (platter/<product>:<tag>, built there) pushed under
    its version and its content tag; returns what was pushed."""
    repository, tag = reference.rsplit(":", 1)
    pushed = []
    for as_tag in (tag, content_tag(content)):
        target = registry.reference(repository, as_tag)
        try:
            engine.tag_image(reference, target)
            engine.push_image(target, registry.auth_config())
        except NodeError as error:
            raise BuildError(f"pushing {target}: {error.message}") from error
        finally:
            engine.untag_image(target)  # the node keeps one name, the catalog's
        pushed.append(target)
    return pushed


def pull(engine: NodeClient, reference: str, content: str, registry: Registry) -> None:
    """The image of that content pulled from the registry and named ``reference`` on the
    engine, as the catalog names it (layers the engine has already are not fetched)."""
    repository = reference.rsplit(":", 1)[0]
    source = registry.reference(repository, content_tag(content))
    try:
        engine.pull_image(source, registry.auth_config())
        engine.tag_image(source, reference)
    except NodeError as error:
        raise BuildError(f"pulling {source} on {engine.name}: {error.message}") from error
    finally:
        engine.untag_image(source)

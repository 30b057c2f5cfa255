"""Stage a product image's build context once, then build it on any Docker engine.

A context is cached as a tar named by its content hash: the recipe's inputs (what it downloads,
with versions), every file under ``deploy/images/<product>/`` and the base image's own hash.
The image gets that hash as a label, so an engine that already has it builds nothing: a second
lab start takes seconds. In the lab the JVM base is a Debian root file system made with
mmdebstrap and imported (no registry); a site builds it from deploy/images/jvm-base/Dockerfile.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from apps.nodes import NodeClient, NodeError

from .recipe import IMAGES_DIR, Recipe

CONTENT_LABEL = "platter.content"
BASE_REPOSITORY = "platter/jvm-base"
BASE_TAG = "17"
# What every JVM product image starts from (deploy/images/jvm-base/Dockerfile says the same).
BASE_SUITE = "bookworm"
# openssh-server: sshd in the instance that is a cluster's way in (platter-sshd starts it).
BASE_PACKAGES = ("openjdk-17-jre-headless", "python3", "procps", "openssh-server")


class BuildError(RuntimeError):
    pass


@dataclass(frozen=True)
class Staged:
    """A build context ready to send to an engine."""

    reference: str
    context: Path  # tar with the Dockerfile at its root
    content: str  # content hash, also the image's CONTENT_LABEL


def _digest(*parts: str | bytes) -> str:
    sha = hashlib.sha256()
    for part in parts:
        sha.update(part if isinstance(part, bytes) else part.encode())
        sha.update(b"\0")
    return sha.hexdigest()[:16]


def folder_digest(folder: Path) -> str:
    """Hash of every file's path, mode and bytes under ``folder``."""
    parts: list[str | bytes] = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        mode = oct(path.stat().st_mode & 0o777)
        parts += [str(path.relative_to(folder)), mode, path.read_bytes()]
    return _digest(*parts)


# ---------------------------------------------------------------- the JVM base


def base_content() -> str:
    return _digest(BASE_SUITE, *BASE_PACKAGES, folder_digest(IMAGES_DIR / "jvm-base"))


def base_reference() -> str:
    return f"{BASE_REPOSITORY}:{BASE_TAG}"


def base_rootfs(cache: Path) -> Path:
    """The base image's root file system as a tar, made by mmdebstrap from Debian's packages."""
    tar_path = cache / f"jvm-base-{base_content()}.tar"
    if tar_path.exists():
        return tar_path
    if not shutil.which("mmdebstrap"):
        raise BuildError("mmdebstrap is not installed: apt-get install mmdebstrap")
    cache.mkdir(parents=True, exist_ok=True)
    partial = tar_path.with_name(f"{tar_path.stem}.{os.getpid()}.part.tar")  # one per builder
    result = subprocess.run(
        [
            "mmdebstrap",
            "--variant=minbase",
            "--quiet",
            f"--include={','.join(BASE_PACKAGES)}",
            # openjdk's postinst registers man pages with update-alternatives
            '--setup-hook=mkdir -p "$1/usr/share/man/man1"',
            "--dpkgopt=path-exclude=/usr/share/doc/*",
            # The Dockerfile's `COPY rootfs/ /` (sshd's config and scripts), and no host keys
            # from openssh-server's postinst: each container makes its own.
            f"--customize-hook=sync-in {IMAGES_DIR / 'jvm-base' / 'rootfs'} /",
            '--customize-hook=rm -f "$1"/etc/ssh/ssh_host_*',
            BASE_SUITE,
            str(partial),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise BuildError(f"mmdebstrap failed:\n{result.stderr[-2000:]}")
    partial.rename(tar_path)
    return tar_path


def ensure_base(client: NodeClient, cache: Path) -> str:
    """The JVM base on this engine (imported from the rootfs tar when missing or stale)."""
    content = base_content()
    if holds(client, base_reference(), content):
        return base_reference()
    client.import_image(
        base_rootfs(cache),
        base_reference(),
        changes=[f"LABEL {CONTENT_LABEL}={content}", 'CMD ["/bin/bash"]'],
    )
    return base_reference()


# ---------------------------------------------------------------- product images


def recipe_content(recipe: Recipe) -> str:
    """The hash of everything the image is made of, known without downloading anything: what
    the recipe fetches (with versions), its deploy/images folder and the base's own hash."""
    base = base_content() if recipe.on_base else "scratch"
    return _digest(recipe.product, recipe.tag, *recipe.inputs, folder_digest(recipe.folder), base)


def stage(recipe: Recipe, cache: Path) -> Staged:
    """The recipe's build context as a tar (downloaded and packed once per content hash)."""
    content = recipe_content(recipe)
    tar_path = cache / "contexts" / f"{recipe.product}-{recipe.tag}-{content}.tar"
    if not tar_path.exists():
        work = cache / "work" / f"{recipe.product}-{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        fetched = work / "fetched"
        fetched.mkdir(parents=True)
        recipe.fetch(fetched, cache / "downloads")
        tar_path.parent.mkdir(parents=True, exist_ok=True)
        partial = tar_path.with_name(f"{tar_path.name}.{os.getpid()}.part")
        with tarfile.open(partial, "w") as tar:
            for item in sorted(recipe.folder.iterdir()):
                tar.add(item, arcname=item.name)
            tar.add(fetched, arcname="fetched")
        partial.rename(tar_path)
        shutil.rmtree(work, ignore_errors=True)
        for old in tar_path.parent.glob(f"{recipe.product}-*.tar"):
            if old != tar_path:
                old.unlink()  # an older content of the same product: never used again
    return Staged(recipe.reference, tar_path, content)


def ensure_built(client: NodeClient, staged: Staged, base: str | None) -> bool:
    """The staged image on this engine; False when it was already there (nothing built)."""
    reference = staged.reference
    if holds(client, reference, staged.content):
        return False
    with staged.context.open("rb") as context:
        try:
            log = client.build_image(
                context,
                reference,
                buildargs={"BASE": base} if base else None,
                labels={CONTENT_LABEL: staged.content},
            )
        except NodeError as error:
            raise BuildError(f"building {reference}: {error.message}") from error
    if not holds(client, reference, staged.content):
        raise BuildError(f"building {reference} left no image:\n{log[-1500:]}")
    return True


def holds(client: NodeClient, reference: str, content: str) -> bool:
    """Whether the engine has the image under that name, made of that content."""
    labels = client.image_labels(reference)
    return labels is not None and labels.get(CONTENT_LABEL) == content

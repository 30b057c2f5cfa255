"""Downloads from the package sources: PyPI, Maven Central and the Go module proxy.

Every download is cached under the build cache, so a rebuild never fetches twice.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tarfile
import urllib.request
import zipfile
from pathlib import Path
from urllib.parse import urljoin
from xml.sax.saxutils import escape

PYPI = "https://pypi.org/pypi"
GO_PROXY = "https://proxy.golang.org"


class FetchError(RuntimeError):
    pass


def download(url: str, dest: Path) -> Path:
    """``url`` saved at ``dest`` (kept if already there)."""
    if dest.exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".part")
    try:
        with urllib.request.urlopen(url, timeout=120) as answer, partial.open("wb") as out:  # noqa: S310 (https URLs of our own constants)
            shutil.copyfileobj(answer, out, 1 << 20)
    except OSError as error:
        raise FetchError(f"could not download {url}: {error}") from error
    partial.rename(dest)
    return dest


def pypi_file(package: str, version: str, cache: Path, wheel: str = "") -> Path:
    """The sdist of ``package==version``, or with ``wheel`` its wheel whose file name holds
    that tag (``none-any`` for pure Python, ``cp311-cp311-manylinux`` for Debian 12's Python;
    only x86_64 builds). Read from the project's JSON: the per-version address
    (``/pypi/<name>/<version>/json``) is not served everywhere, and some mirrors give file
    addresses relative to the JSON's own."""
    project = f"{PYPI}/{package}/json"
    try:
        with urllib.request.urlopen(project, timeout=60) as answer:  # noqa: S310
            files = json.load(answer)["releases"].get(version) or []
    except (OSError, ValueError, KeyError) as error:
        raise FetchError(f"could not read {project}: {error}") from error
    for item in files:
        name = item["filename"]
        if wheel:
            found = name.endswith(".whl") and wheel in name
            found = found and ("none-any" in name or "x86_64" in name)
        else:
            found = item["packagetype"] == "sdist"
        if found:
            return download(urljoin(project, item["url"]), cache / "pypi" / name)
    raise FetchError(f"PyPI has no {wheel or 'sdist'} file of {package} {version}")


def unpack(archive: Path, dest: Path, strip: int = 0, only: str = "") -> None:
    """Extract a .tar.gz/.tgz/.zip/.whl into ``dest``, dropping ``strip`` leading path parts
    and keeping only members under ``only`` (after stripping) when given."""
    dest.mkdir(parents=True, exist_ok=True)
    if archive.suffix in (".zip", ".whl"):
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                name = _stripped(info.filename, strip, only)
                if name and not info.is_dir():
                    target = dest / name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with zf.open(info) as src, target.open("wb") as out:
                        shutil.copyfileobj(src, out)
                    if info.external_attr >> 16 & 0o111:
                        target.chmod(0o755)
        return
    with tarfile.open(archive) as tf:
        members = []
        for member in tf.getmembers():
            name = _stripped(member.name, strip, only)
            if name:
                member.name = name
                members.append(member)
        tf.extractall(dest, members=members, filter="tar")


def _stripped(name: str, strip: int, only: str) -> str:
    parts = [p for p in name.split("/") if p not in ("", ".")]
    name = "/".join(parts[strip:])
    if only and not (name == only or name.startswith(only.rstrip("/") + "/")):
        return ""
    return name


def maven_jars(
    artifacts: list[str], dest: Path, cache: Path, excludes: tuple[str, ...] = ()
) -> list[Path]:
    """Every jar of ``artifacts`` (``group:artifact:version``) and of their runtime
    dependencies, copied into ``dest`` by Maven (``mvn dependency:copy-dependencies``), with
    the local repository kept in ``cache``. ``excludes`` are ``group:artifact`` patterns."""
    if not shutil.which("mvn"):
        raise FetchError("Maven is not installed: apt-get install maven (./platter does it)")
    dest.mkdir(parents=True, exist_ok=True)
    # A project folder and local repository per artifact set: recipes are staged in parallel,
    # and two of them once shared one pom.xml (Cassandra got Hadoop's jars).
    key = hashlib.sha256("\n".join([*artifacts, *excludes]).encode()).hexdigest()[:12]
    work = cache / f"maven-{key}"
    work.mkdir(parents=True, exist_ok=True)
    dependencies = []
    for coordinate in artifacts:
        group, artifact, version = coordinate.split(":")
        exclusions = "".join(
            f"<exclusion><groupId>{escape(g)}</groupId><artifactId>{escape(a)}</artifactId>"
            "</exclusion>"
            for g, a in (pattern.split(":") for pattern in excludes)
        )
        dependencies.append(
            f"<dependency><groupId>{escape(group)}</groupId>"
            f"<artifactId>{escape(artifact)}</artifactId><version>{escape(version)}</version>"
            f"<exclusions>{exclusions}</exclusions></dependency>"
        )
    (work / "pom.xml").write_text(
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>platter</groupId><artifactId>image</artifactId><version>1</version>"
        f"<dependencies>{''.join(dependencies)}</dependencies></project>"
    )
    result = subprocess.run(
        [
            "mvn",
            "-q",
            "-B",
            f"-Dmaven.repo.local={work / 'm2'}",
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={dest}",
        ],
        cwd=work,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise FetchError(f"mvn could not fetch {', '.join(artifacts)}:\n{result.stdout[-2000:]}")
    return sorted(dest.glob("*.jar"))


def go_toolchain(version: str, cache: Path) -> Path:
    """A Go toolchain (``go`` binary path) of at least ``version``: the machine's own when new
    enough, else the release that the Go module proxy serves as golang.org/toolchain."""
    found = shutil.which("go")
    if found:
        out = subprocess.run([found, "env", "GOVERSION"], capture_output=True, text=True)
        have = out.stdout.strip().removeprefix("go").split(".")
        want = version.split(".")
        if out.returncode == 0 and [int(x) for x in have[:2]] >= [int(x) for x in want[:2]]:
            return Path(found)
    root = cache / f"go{version}"
    if not (root / "bin" / "go").exists():
        archive = download(
            f"{GO_PROXY}/golang.org/toolchain/@v/v0.0.1-go{version}.linux-amd64.zip",
            cache / f"go{version}.zip",
        )
        unpack(archive, root, strip=1)
    return root / "bin" / "go"

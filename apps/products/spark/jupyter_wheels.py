"""Wheels from PyPI installed into an image's /usr/local for Debian 12's python3, without pip in
the image: the Spark image's JupyterLab and ipykernel.

jupyter.lock pins every distribution of the closure with its sha256 (made once with
``pip install --dry-run --report`` for CPython 3.11 on manylinux x86_64; pip checks each hash
on download). The wheels are laid out as pip lays them out under a prefix: the package files in
lib/python3.11/dist-packages, the wheel's data files (JupyterLab's static assets, ipykernel's
kernel spec, the server extension's config) under the prefix, and its console scripts in bin.
"""

from __future__ import annotations

import configparser
import subprocess
import sys
import zipfile
from pathlib import Path

from ..images.sources import FetchError

LOCK = Path(__file__).with_name("jupyter.lock")
PYTHON = "3.11"  # Debian 12's python3, which runs pyspark in the image
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64")
SITE = Path("lib") / f"python{PYTHON}" / "dist-packages"


def pins(lock: Path) -> list[str]:
    """The lock's requirements ("name==version --hash=sha256:..."), for the content hash."""
    lines = (line.strip() for line in lock.read_text().splitlines())
    return [f"pypi:{line}" for line in lines if line and not line.startswith("#")]


def fetch_wheels(lock: Path, cache: Path) -> list[Path]:
    """Every wheel the lock names, downloaded (once) into the cache, hashes checked."""
    folder = cache / "pypi" / f"{lock.stem}-wheels"
    folder.mkdir(parents=True, exist_ok=True)
    platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    abi = "cp" + PYTHON.replace(".", "")
    result = subprocess.run(
        [
            sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
            "--require-hashes", "--no-deps", "--only-binary=:all:",
            "--python-version", PYTHON, "--implementation", "cp", "--abi", abi,
            *platforms, "--dest", str(folder), "--requirement", str(lock),
        ],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise FetchError(f"pip could not download {lock.name}:\n{result.stderr[-2000:]}")
    wanted = {_normal(pin.removeprefix("pypi:").split("==")[0]) for pin in pins(lock)}
    wheels = [w for w in sorted(folder.glob("*.whl")) if _normal(w.name.split("-")[0]) in wanted]
    if len(wheels) != len(wanted):
        raise FetchError(f"{lock.name} names {len(wanted)} wheels, {folder} holds {len(wheels)}")
    return wheels


def install_wheels(wheels: list[Path], prefix: Path) -> None:
    for wheel in wheels:
        install_wheel(wheel, prefix)


def install_wheel(wheel: Path, prefix: Path) -> None:
    """One wheel under ``prefix`` (the image's /usr/local), as pip would install it there."""
    site = prefix / SITE
    with zipfile.ZipFile(wheel) as archive:
        data = next(
            (n.split("/")[0] for n in archive.namelist() if n.split("/")[0].endswith(".data")), ""
        )
        for info in archive.infolist():
            if info.is_dir():
                continue
            name = info.filename
            if data and name.startswith(data + "/"):
                kind, _, rest = name[len(data) + 1 :].partition("/")
                target = {
                    "purelib": site,
                    "platlib": site,
                    "data": prefix,
                    "scripts": prefix / "bin",
                    "headers": prefix / "include",
                }[kind] / rest
            else:
                target = site / name
            target.parent.mkdir(parents=True, exist_ok=True)
            content = archive.read(info)
            if data and name.startswith(f"{data}/scripts/") and content.startswith(b"#!python"):
                content = b"#!/usr/bin/python3" + content[len(b"#!python") :]
            target.write_bytes(content)
            if info.external_attr >> 16 & 0o111 or target.parent == prefix / "bin":
                target.chmod(0o755)
        dist_info = next(n.split("/")[0] for n in archive.namelist() if ".dist-info/" in n)
        if f"{dist_info}/entry_points.txt" in archive.namelist():
            _console_scripts(archive.read(f"{dist_info}/entry_points.txt").decode(), prefix)


def _console_scripts(entry_points: str, prefix: Path) -> None:
    """bin/<name> for each console script (jupyter, jupyter-lab, ipython, ...)."""
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # names keep their case
    parser.read_string(entry_points)
    if not parser.has_section("console_scripts"):
        return
    (prefix / "bin").mkdir(parents=True, exist_ok=True)
    for name, target in parser.items("console_scripts"):
        module, _, attribute = target.strip().partition(":")
        script = prefix / "bin" / name
        script.write_text(
            "#!/usr/bin/python3\nimport sys\n"
            f"from {module} import {attribute.split('.')[0]}\n"
            f"sys.exit({attribute.strip()}())\n"
        )
        script.chmod(0o755)


def _normal(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")

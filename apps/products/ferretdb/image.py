"""FerretDB: the lab's MongoDB wire-compatible server (no mongod is available from our sources).

FerretDB is a Go module: it is built from the Go module proxy with a Go toolchain of at least
the version its go.mod names. pymongo (with dnspython) goes into the image for the health and
smoke scripts and for users.
"""

from __future__ import annotations

import compileall
import json
import os
import py_compile
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ..images.recipe import Recipe
from ..images.sources import GO_PROXY, FetchError, download, go_toolchain, pypi_file, unpack

MODULE = "github.com/FerretDB/FerretDB"
VERSION = "1.24.0"
PYMONGO = "4.20.1"
DNSPYTHON = "2.8.0"
CP311_WHEEL = "cp311-cp311-manylinux"  # Debian 12 runs CPython 3.11
DIST_PACKAGES = "usr/lib/python3/dist-packages"


def _escaped(module: str) -> str:
    """The module proxy's path form: capitals as "!" + lower case."""
    return re.sub(r"[A-Z]", lambda m: "!" + m.group().lower(), module)


def _go_env(cache: Path) -> dict[str, str]:
    go = cache / "go"
    return {
        **os.environ,
        "GOPATH": str(go),
        "GOMODCACHE": str(go / "pkg" / "mod"),
        "GOCACHE": str(go / "cache"),
        "GOPROXY": GO_PROXY,
        "GOFLAGS": "-mod=mod",
        "GOTOOLCHAIN": "local",  # never switch to go.mod's "toolchain" line: we chose ours
        "CGO_ENABLED": "0",  # SQLite is modernc's pure-Go port: a static binary
    }


def _go(go: Path, args: list[str], cwd: Path, env: dict[str, str]) -> str:
    result = subprocess.run(
        [str(go), *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise FetchError(f"go {' '.join(args)} failed:\n{result.stderr[-3000:]}")
    return result.stdout


def fetch(dest: Path, cache: Path) -> None:
    # go.mod first, for the Go version the module needs.
    go_mod = download(
        f"{GO_PROXY}/{_escaped(MODULE)}/@v/v{VERSION}.mod", cache / f"ferretdb-{VERSION}.mod"
    )
    wanted = re.search(r"^go (\d+\.\d+)", go_mod.read_text(), re.MULTILINE)
    go = go_toolchain(wanted.group(1) if wanted else "1.22", cache)
    env = _go_env(cache)

    # `go mod download` of the exact version: `go install ...@v` also asks for the version
    # list, which the proxy here refuses.
    info = json.loads(_go(go, ["mod", "download", "-json", f"{MODULE}@v{VERSION}"], cache, env))

    # The module cache is read-only and the build needs build/version/version.txt (the
    # binary panics without it), so build in a writable copy.
    src = cache / f"ferretdb-src-{VERSION}"
    if src.exists():
        for path in src.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        shutil.rmtree(src)
    shutil.copytree(info["Dir"], src, copy_function=shutil.copyfile)
    for path in [src, *src.rglob("*")]:
        if path.is_dir():
            path.chmod(0o755)
    (src / "build" / "version" / "version.txt").write_text(f"v{VERSION}\n")
    (src / "build" / "version" / "package.txt").write_text("platter\n")

    binary = dest / "usr" / "local" / "bin" / "ferretdb"
    binary.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    _go(
        go,
        [
            "build",
            "-trimpath",
            "-buildvcs=false",
            "-ldflags=-s -w",
            "-o",
            str(binary),
            "./cmd/ferretdb",
        ],
        src,
        env,
    )
    print(f"go build of FerretDB {VERSION}: {time.monotonic() - started:.0f} s")

    # pymongo (a manylinux cp311 wheel: bookworm's python3 is 3.11) and its dependency.
    site = dest / DIST_PACKAGES
    unpack(pypi_file("pymongo", PYMONGO, cache, wheel=CP311_WHEEL), site)
    unpack(pypi_file("dnspython", DNSPYTHON, cache, wheel="py3-none-any"), site)
    # Byte-compile them now (a fresh container would compile on every first import: about
    # 1.5 s per health check). Only a 3.11 interpreter writes bytecode the image's python3.11
    # reads; hash-based .pyc stay valid whatever the files' times.
    if sys.version_info[:2] == (3, 11):
        compileall.compile_dir(
            site, quiet=1, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH
        )


RECIPE = Recipe(
    product="ferretdb",
    tag=VERSION,
    inputs=(
        f"go-module:{MODULE}@v{VERSION}",
        f"pypi:pymongo=={PYMONGO}{CP311_WHEEL}",
        f"pypi:dnspython=={DNSPYTHON}",
    ),
    fetch=fetch,
    on_base=True,
)

"""Apache Cassandra 5.0 from Maven Central, with cqlsh from PyPI.

cassandra-all and its runtime dependencies (about 100 jars, jamm among them) go to
/opt/cassandra/lib; the start script runs CassandraDaemon with the JVM options of upstream's
conf/jvm17-server.options (kept in deploy/images/cassandra/rootfs/opt/cassandra/conf).
cqlsh is pure Python, but it needs the DataStax driver (a manylinux cp311 wheel for bookworm's
Python 3.11) and a few small pure-Python packages: all unpacked into dist-packages.
"""

from __future__ import annotations

from pathlib import Path

from ..images.recipe import Recipe
from ..images.sources import FetchError, maven_jars, pypi_file, unpack

CASSANDRA = "org.apache.cassandra:cassandra-all:5.0.9"
DIST_PACKAGES = "usr/lib/python3/dist-packages"
# (package, version, a part of the wheel's file name): none-any for pure Python, else x86_64.
WHEELS = (
    ("cqlsh", "6.2.2", "none-any"),
    ("cassandra-driver", "3.30.1", "cp311-cp311-manylinux"),
    ("geomet", "1.1.0", "none-any"),
    ("click", "8.1.8", "none-any"),
    ("deprecated", "1.2.18", "none-any"),  # 3.x wants Python 3.12
    ("wrapt", "1.17.3", "cp311-cp311-manylinux"),
    ("pure-sasl", "0.6.2", "none-any"),
    ("wcwidth", "0.2.13", "none-any"),
)


def fetch(dest: Path, cache: Path) -> None:
    jars = maven_jars([CASSANDRA], dest / "opt" / "cassandra" / "lib", cache)
    if not any(jar.name.startswith("jamm-") for jar in jars):  # the JVM agent it starts with
        raise FetchError(f"{CASSANDRA} came without the jamm jar")
    for package, version, marker in WHEELS:
        unpack(pypi_file(package, version, cache, wheel=marker), dest / DIST_PACKAGES)


RECIPE = Recipe(
    product="cassandra",
    tag="5.0.9",
    inputs=(f"maven:{CASSANDRA}", *(f"pypi:{p}=={v}" for p, v, _ in WHEELS)),
    fetch=fetch,
)

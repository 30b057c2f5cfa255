"""Apache Spark (standalone cluster manager) from the pyspark sdist on PyPI.

The sdist carries a whole Spark build: ``deps/`` holds bin/, sbin/, jars/, data/, examples/
and licenses/, ``lib/`` the pyspark.zip and py4j zip that spark-submit puts on PYTHONPATH, and
``pyspark/`` the Python package. The image lays them out like Apache's binary tarball under
/opt/spark, and installs pyspark and py4j (its wheel) where Debian's python3 finds them, so
``python3 -c 'import pyspark'`` works as well as ``spark-submit job.py``.

JupyterLab and ipykernel (a notebook instance's server and kernel, the launch option
``notebook``) come from PyPI as wheels for Debian 12's Python 3.11, every one pinned with its
hash in jupyter.lock (pip resolves nothing at build time), and are laid out under /usr/local as
pip would install them there (jupyter_wheels.py), so a kernel runs the same python3 and
pyspark as the cluster.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..images.recipe import Recipe
from ..images.sources import pypi_file, unpack
from .jupyter_wheels import LOCK, fetch_wheels, install_wheels, pins

VERSION = "4.3.0"
PY4J = "0.10.9.9"  # the py4j pyspark 4.3.0 pins (py4j<0.10.9.10) and ships as a src zip
SITE = Path("usr/lib/python3/dist-packages")


def fetch(dest: Path, cache: Path) -> None:
    sdist = pypi_file("pyspark", VERSION, cache)
    wheel = pypi_file("py4j", PY4J, cache, wheel="none-any")
    spark = dest / "opt" / "spark"
    unpacked = dest / "opt" / ".pyspark-sdist"
    shutil.rmtree(unpacked, ignore_errors=True)
    unpack(sdist, unpacked, strip=1)  # one pass over the 450 MB archive, then move parts
    spark.mkdir(parents=True, exist_ok=True)
    for part in ("bin", "sbin", "jars", "data", "licenses"):
        (unpacked / "deps" / part).rename(spark / part)
    (spark / "examples" / "src" / "main").mkdir(parents=True)
    (unpacked / "deps" / "examples").rename(spark / "examples" / "src" / "main" / "python")
    (spark / "python").mkdir()
    (unpacked / "lib").rename(spark / "python" / "lib")
    for name in ("LICENSE", "NOTICE", "README.md"):
        (unpacked / name).rename(spark / name)
    (spark / "RELEASE").write_text(f"Spark {VERSION} (from the pyspark {VERSION} sdist)\n")
    (dest / SITE).mkdir(parents=True, exist_ok=True)
    (unpacked / "pyspark").rename(dest / SITE / "pyspark")
    shutil.rmtree(unpacked)
    unpack(wheel, dest / SITE)
    install_wheels(fetch_wheels(LOCK, cache), dest / "usr" / "local")


RECIPE = Recipe(
    product="spark",
    tag=VERSION,
    inputs=(f"pypi:pyspark=={VERSION}", f"pypi:py4j=={PY4J}", *pins(LOCK)),
    fetch=fetch,
)

"""Hadoop (HDFS, YARN, MapReduce) from its Maven Central jars.

Maven has no Apache binary tarball: the image holds the daemons' jars and their runtime
dependencies under /opt/hadoop/share/hadoop/lib, and small `hdfs`, `yarn` and `hadoop`
wrappers (deploy/images/hadoop/rootfs) run the same classes the Apache scripts would.
3.4.2 throughout: hadoop-mapreduce-examples 3.4.3 is not on Maven Central.
"""

from __future__ import annotations

from pathlib import Path

from ..images.recipe import Recipe
from ..images.sources import FetchError, maven_jars

VERSION = "3.4.2"
ARTIFACTS = [
    f"org.apache.hadoop:{name}:{VERSION}"
    for name in (
        "hadoop-common",
        "hadoop-hdfs",
        "hadoop-hdfs-client",
        "hadoop-yarn-client",
        "hadoop-yarn-server-resourcemanager",
        "hadoop-yarn-server-nodemanager",
        # The RM and NM load timeline service v2 classes when they start.
        "hadoop-yarn-server-timelineservice",
        "hadoop-mapreduce-client-app",
        "hadoop-mapreduce-client-common",
        "hadoop-mapreduce-client-core",
        "hadoop-mapreduce-client-jobclient",
        "hadoop-mapreduce-client-shuffle",
        "hadoop-mapreduce-examples",
    )
]


def fetch(dest: Path, cache: Path) -> None:
    jars = maven_jars(ARTIFACTS, dest / "opt" / "hadoop" / "share" / "hadoop" / "lib", cache)
    names = {jar.name for jar in jars}
    missing = [a for a in ARTIFACTS if f"{a.split(':')[1]}-{VERSION}.jar" not in names]
    if missing:
        raise FetchError(f"Maven gave no jar for {', '.join(missing)}")


RECIPE = Recipe(product="hadoop", tag=VERSION, inputs=tuple(ARTIFACTS), fetch=fetch)

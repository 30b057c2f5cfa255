"""Apache Kafka 4.3 (KRaft mode, no ZooKeeper) from its Maven Central jars.

Maven has no Apache binary tarball: the broker (kafka_2.13, whose kafka.Kafka and
kafka.tools.StorageTool start and format a node) and the tools (kafka-tools: TopicCommand,
ReassignPartitionsCommand, MetadataQuorumCommand, the console producer and consumer) go to
/opt/kafka/libs with their runtime dependencies, and kafka-class (deploy/images/kafka/rootfs)
runs the classes as Apache's scripts would. Left out: Kafka Connect's runtime (a Jetty server
only ConnectPluginPath needs, a third of the jars). Logging is SLF4J 2 to the console
(slf4j-simple): the jars bring only SLF4J's 1.7 API and no binding.
"""

from __future__ import annotations

from pathlib import Path

from ..images.recipe import Recipe
from ..images.sources import FetchError, maven_jars

VERSION = "4.3.1"
SLF4J = "2.0.17"
ARTIFACTS = [
    f"org.apache.kafka:kafka_2.13:{VERSION}",
    f"org.apache.kafka:kafka-tools:{VERSION}",
    f"org.slf4j:slf4j-api:{SLF4J}",  # declared first, so it wins over the jars' 1.7
    f"org.slf4j:slf4j-simple:{SLF4J}",
]
EXCLUDES = ("org.apache.kafka:connect-runtime",)


def fetch(dest: Path, cache: Path) -> None:
    jars = maven_jars(ARTIFACTS, dest / "opt" / "kafka" / "libs", cache, excludes=EXCLUDES)
    names = {jar.name for jar in jars}
    wanted = [f"kafka_2.13-{VERSION}.jar", f"kafka-tools-{VERSION}.jar", f"slf4j-api-{SLF4J}.jar"]
    missing = [name for name in wanted if name not in names]
    if missing:
        raise FetchError(f"Maven gave no {', '.join(missing)}")
    stale = sorted(name for name in names if name.startswith("slf4j-api-1."))
    if stale:  # two SLF4J APIs on one class path: which one loads is luck
        raise FetchError(f"Maven also gave {', '.join(stale)}")


RECIPE = Recipe(
    product="kafka",
    tag=VERSION,
    inputs=(*(f"maven:{a}" for a in ARTIFACTS), *(f"maven-exclude:{e}" for e in EXCLUDES)),
    fetch=fetch,
)

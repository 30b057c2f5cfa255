"""Platter's Spark smoke job (run by spark-smoke through spark-submit): two shuffles, checked.

An RDD reduceByKey (Python workers on the executors) and a DataFrame groupBy (JVM only) over
ROWS rows, then a look on each executor for the shuffle files those wrote to its local dirs.
"""

import glob
import os
import socket
import sys
import time
from operator import add

from pyspark.sql import SparkSession
from pyspark.sql.functions import col

ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
KEYS = 100


def shuffle_files(_: object) -> list[tuple[str, str, int]]:
    # Python workers get the executor's block manager dirs (blockmgr-*) in SPARK_LOCAL_DIRS.
    dirs = [d for d in os.environ.get("SPARK_LOCAL_DIRS", "").split(",") if d]
    host = socket.gethostname()
    return [(host, d, len(glob.glob(os.path.join(d, "*", "shuffle_*")))) for d in dirs]


def main() -> int:
    spark = SparkSession.builder.appName("platter-smoke").getOrCreate()
    sc = spark.sparkContext
    parts = int(sc.getConf().get("spark.default.parallelism", "4"))
    failures = []

    started = time.monotonic()
    counts = dict(
        sc.parallelize(range(ROWS), parts).map(lambda i: (i % KEYS, 1)).reduceByKey(add).collect()
    )
    expected = {k: len(range(k, ROWS, KEYS)) for k in range(KEYS)}
    ok = counts == expected
    print(
        f"reduceByKey: {ROWS} rows -> {len(counts)} keys, sum {sum(counts.values())}: "
        f"{'ok' if ok else 'WRONG'} ({time.monotonic() - started:.1f} s)"
    )
    if not ok:
        failures.append("reduceByKey result")

    started = time.monotonic()
    rows = spark.range(ROWS).groupBy((col("id") % 10).alias("k")).count().collect()
    ok = sorted((r["k"], r["count"]) for r in rows) == [(k, ROWS // 10) for k in range(10)]
    print(
        f"groupBy: {ROWS} rows -> {len(rows)} groups of {ROWS // 10}: "
        f"{'ok' if ok else 'WRONG'} ({time.monotonic() - started:.1f} s)"
    )
    if not ok:
        failures.append("groupBy result")

    executors = max(1, sc._jsc.sc().getExecutorMemoryStatus().size() - 1)  # minus the driver
    probes = set(
        sc.parallelize(range(4 * executors), 4 * executors).mapPartitions(shuffle_files).collect()
    )
    for host, where, files in sorted(probes):
        print(f"shuffle files on {host}: {where}: {files}")
    if not any(files and where.startswith("/data/") for _, where, files in probes):
        failures.append("no shuffle file under a worker's /data disk")

    spark.stop()
    if failures:
        print("FAILED: " + "; ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

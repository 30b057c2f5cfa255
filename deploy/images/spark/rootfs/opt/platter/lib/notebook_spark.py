"""Run by every notebook kernel of a Spark cluster as it starts (the kernel spec's PYTHONSTARTUP):
``spark`` and ``sc`` are a SparkSession on the cluster's standalone master, with the cluster's
own Spark and Python. The cluster's secret (spark.authenticate) and the portal's UI path come
from spark-defaults.conf, written by spark-start; it is never shown here.

Executors come and go with the work (dynamic allocation, shuffle files tracked): an idle
notebook holds none of the workers' cores, so jobs submitted otherwise still run.
"""

import atexit
import os
import socket

from pyspark.sql import SparkSession

_master = os.environ.get("PLATTER_MASTER_HOST") or "localhost"
spark = (
    SparkSession.builder.master(f"spark://{_master}:7077")
    .appName(f"notebook on {os.environ.get('PLATTER_HOSTNAME') or socket.gethostname()}")
    .config("spark.dynamicAllocation.enabled", "true")
    .config("spark.dynamicAllocation.shuffleTracking.enabled", "true")
    .config("spark.dynamicAllocation.executorIdleTimeout", "60s")
    .getOrCreate()
)
sc = spark.sparkContext
atexit.register(spark.stop)  # the application ends FINISHED when the kernel shuts down
del atexit, os, socket, SparkSession, _master

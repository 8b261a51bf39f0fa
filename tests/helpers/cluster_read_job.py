"""spark-submit app for tests/engine/restore/test_cluster.py: ``read_as_of`` on the cluster.

    spark-submit ... tests/helpers/cluster_read_job.py TENANT DB.TABLE SNAPSHOT

Prints one JSON line: the row count and the sum of ids, computed by the
executors (nothing but those two numbers reaches the driver), the master and
how many executors the application had.
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import functions as F

from tenants.spark.session import get_spark
from tenants.spark_reader import read_as_of


def main() -> None:
    tenant, table, snapshot = sys.argv[1:4]
    spark = get_spark()
    frame = read_as_of(spark, tenant, table, as_of=snapshot)
    row = frame.agg(F.count("*").alias("rows"), F.sum("id").alias("ids")).collect()[0]
    sc = spark.sparkContext
    executors = sc._jsc.sc().getExecutorMemoryStatus().size() - 1  # minus the driver
    print(json.dumps({"rows": row["rows"], "ids": row["ids"], "master": sc.master,
                      "executors": executors}))  # fmt: skip
    spark.stop()


if __name__ == "__main__":
    main()

"""FerretDB (the mongodb product) on the real lab, launched as a user does: a MongoDB client
inserts and finds with the cluster's login, and nothing answers without it."""

import pytest

from apps.clusters.models import Cluster
from workers.tests.lab_products import (
    assert_no_secret_shown,
    attempt,
    data_dirs,
    destroy_and_check,
    instance,
    launch_default,
    run,
    shown_string,
)

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State


def test_mongodb_compatible_server_inserts_and_finds(dispatching, lab_cleanup, alice):
    cluster = launch_default(alice, "mongodb", "mongo-smoke")
    member = instance(cluster, "member")
    output = run(member, "/opt/platter/bin/mongo-smoke", member.hostname)
    assert "OK: insert, find and aggregate" in output
    assert list(data_dirs(member)[0].glob("ferretdb/*.sqlite")), "data on the member's disk"

    # The mongodb:// URL the page shows logs in; without a login only ping answers.
    (url,) = shown_string(cluster, "mongodb://")
    check = (
        "import sys; from pymongo import MongoClient; c = MongoClient(sys.argv[1], "
        "serverSelectionTimeoutMS=5000); print(sorted(c.list_database_names()))"
    )
    assert "admin" in run(member, "python3", "-c", check, url)
    anonymous = url.split("@", 1)[1]
    code, output = attempt(member, "python3", "-c", check, f"mongodb://{anonymous}")
    assert code != 0 and "requires authentication" in output, output
    assert_no_secret_shown(cluster)
    destroy_and_check(cluster)

"""Each cluster stores the revision of its version's definition it launched with.

Clusters made before revisions existed get one of their version's definition as it is now
(the best record there is): revision 1 of each version that has clusters."""

import django.db.models.deletion
from django.db import migrations, models

# As apps/catalog/revisions.py DEFINITION_FIELDS (a migration keeps its own copy).
DEFINITION_FIELDS = (
    "image",
    "roles",
    "options_schema",
    "disk_kind",
    "ports",
    "environment",
    "configure",
    "capabilities",
)


def fill_revisions(apps, schema_editor):
    Cluster = apps.get_model("clusters", "Cluster")
    ProductVersion = apps.get_model("catalog", "ProductVersion")
    ProductRevision = apps.get_model("catalog", "ProductRevision")
    used = Cluster.objects.filter(revision=None).values("version_id")
    for version in ProductVersion.objects.filter(id__in=used):
        definition = {name: getattr(version, name) for name in DEFINITION_FIELDS}
        latest = ProductRevision.objects.filter(version=version).order_by("-number").first()
        if latest is None or latest.definition != definition:
            latest = ProductRevision.objects.create(
                version=version,
                number=(latest.number if latest else 0) + 1,
                definition=definition,
            )
        Cluster.objects.filter(version=version, revision=None).update(revision=latest)


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0002_productrevision"),
        ("clusters", "0007_cluster_unique_name"),
    ]

    operations = [
        migrations.AddField(
            model_name="cluster",
            name="revision",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="clusters",
                to="catalog.productrevision",
            ),
        ),
        migrations.RunPython(fill_revisions, migrations.RunPython.noop),
    ]

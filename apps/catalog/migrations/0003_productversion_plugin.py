from django.db import migrations, models

# The plugins the shipped catalog's products had by their names before definitions named them
# (once, here: from now on a version's own "plugin" decides, never its editable product name).
# Anything else gets none: the generic plugin, which resizes no role that keeps state.
BY_PRODUCT = {"demo": "demo", "hadoop": "hadoop", "spark": "spark", "cassandra": "cassandra"}


def plugin_of(version) -> str:
    if version.product.name == "mongodb" and "ferretdb" in version.image:
        return "ferretdb"
    return BY_PRODUCT.get(version.product.name, "")


def name_plugins(apps, schema_editor):
    ProductVersion = apps.get_model("catalog", "ProductVersion")
    for version in ProductVersion.objects.select_related("product"):
        plugin = plugin_of(version)
        if plugin:
            version.plugin = plugin
            version.save(update_fields=["plugin"])
        # A running cluster's revision keeps resizing as it did.
        for revision in version.revisions.all():
            if "plugin" not in revision.definition:
                revision.definition = {**revision.definition, "plugin": plugin}
                revision.save(update_fields=["definition"])


class Migration(migrations.Migration):
    # After the clusters' first revisions exist (clusters 0008), so they get their plugin too.
    dependencies = [("catalog", "0002_productrevision"), ("clusters", "0008_cluster_revision")]

    operations = [
        migrations.AddField(
            model_name="productversion",
            name="plugin",
            field=models.CharField(blank=True, default="", max_length=32),
        ),
        migrations.RunPython(name_plugins, migrations.RunPython.noop),
    ]

"""One owner's clusters that are not destroyed have distinct names.

Older databases may hold duplicates: the later ones are renamed first (name-2, name-3, ...,
cut to fit the 63 characters) so the constraint applies."""

from django.db import migrations, models


def rename_duplicates(apps, schema_editor):
    Cluster = apps.get_model("clusters", "Cluster")
    live = Cluster.objects.exclude(state="destroyed").order_by("owner_id", "created", "id")
    taken: dict[int, set[str]] = {}
    for owner_id, name in live.values_list("owner_id", "name"):
        taken.setdefault(owner_id, set()).add(name)
    seen: dict[int, set[str]] = {}
    for cluster in live.only("id", "owner_id", "name"):
        mine = seen.setdefault(cluster.owner_id, set())
        if cluster.name not in mine:
            mine.add(cluster.name)
            continue
        n = 2
        while True:
            suffix = f"-{n}"
            candidate = cluster.name[: 63 - len(suffix)] + suffix
            if candidate not in taken[cluster.owner_id]:
                break
            n += 1
        taken[cluster.owner_id].add(candidate)
        mine.add(candidate)
        Cluster.objects.filter(pk=cluster.pk).update(name=candidate)


class Migration(migrations.Migration):
    dependencies = [
        ("clusters", "0006_diskallocation_handed_over"),
    ]

    operations = [
        migrations.RunPython(rename_duplicates, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="cluster",
            constraint=models.UniqueConstraint(
                condition=models.Q(("state", "destroyed"), _negated=True),
                fields=("owner", "name"),
                name="cluster_unique_name_per_owner",
            ),
        ),
    ]

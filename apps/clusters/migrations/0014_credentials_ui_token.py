import secrets

from django.db import migrations, models


def give_tokens(apps, schema_editor):
    """Every cluster made before gets a token of its own (a default would give all one)."""
    credentials = apps.get_model("clusters", "ClusterCredentials")
    for found in credentials.objects.filter(ui_token="").only("id"):
        credentials.objects.filter(id=found.id).update(ui_token=secrets.token_hex(32))


class Migration(migrations.Migration):
    dependencies = [
        ("clusters", "0013_instance_answered_at"),
    ]

    operations = [
        migrations.AddField(
            model_name="clustercredentials",
            name="ui_token",
            field=models.CharField(blank=True, default="", max_length=128),
        ),
        migrations.RunPython(give_tokens, migrations.RunPython.noop),
    ]

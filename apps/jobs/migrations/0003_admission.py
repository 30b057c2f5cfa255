# Job admission (apps/jobs/admission.py): when a queued job was given a job slot.

from django.db import migrations, models


def admit_queued_jobs(apps, schema_editor):
    """Jobs queued before admission existed had their task sent at submit: they hold a slot."""
    Job = apps.get_model("jobs", "Job")
    Job.objects.filter(state="queued").update(admitted=models.F("submitted"))


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0002_resumable_follower"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="admitted",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                condition=models.Q(("state", "queued")),
                fields=["owner", "submitted"],
                name="job_queued_owner",
            ),
        ),
        migrations.RunPython(admit_queued_jobs, migrations.RunPython.noop),
    ]

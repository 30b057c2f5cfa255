from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand

from apps.accounts.models import Quota
from apps.accounts.services import save_quota

# What the demo user may hold: enough for a few lab clusters, small enough to meet a limit.
DEMO_QUOTA = {
    "max_clusters": 4,
    "max_instances": 8,
    "max_cores": 8,
    "max_memory_mb": 8192,
    "max_disks": 16,
    "max_disks_ssd": 4,
}

# Development logins, printed by `./platter run`. Never used by production settings.
DEMO_USERS = [
    {"username": "admin", "password": "admin-platter", "is_staff": True, "is_superuser": True},
    {"username": "demo", "password": "demo-platter", "is_staff": False, "is_superuser": False},
]


class Command(BaseCommand):
    help = "Create the demo logins and load the catalog (idempotent; for development)."

    def handle(self, *args, **options):
        users = get_user_model()
        for spec in DEMO_USERS:
            user, created = users.objects.get_or_create(
                username=spec["username"],
                defaults={"email": f"{spec['username']}@platter.test"},
            )
            user.is_staff, user.is_superuser = spec["is_staff"], spec["is_superuser"]
            user.set_password(spec["password"])
            user.save()
            self.stdout.write(f"{'created' if created else 'updated'} user {user.username}")
        demo = users.objects.get(username="demo")
        quota = Quota.objects.filter(user=demo).first() or Quota(user=demo)
        for name, limit in DEMO_QUOTA.items():
            setattr(quota, name, limit)
        save_quota(quota, actor=None)  # audited as the system when it changes anything
        self.stdout.write(f"quota of demo: {DEMO_QUOTA}")
        call_command("load_catalog", stdout=self.stdout)

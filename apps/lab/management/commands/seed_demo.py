from django.contrib.auth import get_user_model
from django.core.management import call_command, get_commands
from django.core.management.base import BaseCommand

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
        # The catalog and quotas come from their own apps' commands when those exist.
        for command in ("load_catalog", "seed_quotas"):
            if command in get_commands():
                call_command(command, stdout=self.stdout)

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from apps.tokens.services import issue_token


class Command(BaseCommand):
    help = "Issue a personal API token for USER and print it (once: only a hash is stored)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("user", help="username")
        parser.add_argument("--name", default="cli", help="what the token is for")
        parser.add_argument("--expires-in", type=float, metavar="DAYS", help="days until expiry")
        parser.add_argument("--read-only", action="store_true", help="only GET/HEAD/OPTIONS")

    def handle(self, *args, **options) -> None:
        user_model = get_user_model()
        try:
            user = user_model.objects.get(**{user_model.USERNAME_FIELD: options["user"]})
        except user_model.DoesNotExist as exc:
            raise CommandError(f"no user {options['user']!r}") from exc
        try:
            issued = issue_token(  # a command line: audited as the system (no actor)
                user,
                options["name"],
                options["expires_in"],
                read_only=options["read_only"],
                actor=None,
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        # Only the token on stdout, so scripts can do TOKEN=$(manage.py issue_token demo).
        self.stdout.write(issued.secret)
        scope = "read-only" if issued.token.read_only else "read-write"
        expiry = issued.token.expires_at or "never"
        self.stderr.write(f"{scope} token {issued.token.prefix}… for {user}, expires {expiry}")

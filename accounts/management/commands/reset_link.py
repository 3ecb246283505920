from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts.passwords import one_time_link


class Command(BaseCommand):
    help = (
        "Print a one-time link with which USERNAME chooses a new password (for an administrator "
        "helping someone locked out; organisers issue links from a campaign's Assessors page). "
        "The current password keeps working until the link is used."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")

    def handle(self, *args, username: str, **options) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user {username!r}.")
        if not user.is_active:
            raise CommandError(f"User {username!r} is deactivated; reactivate it first.")
        link = one_time_link(user)
        self.stdout.write(
            f"One-time link for {username} (valid until {link.expires:%Y-%m-%d %H:%M} UTC, "
            f"once): {link.url}"
        )
        if not link.url.startswith("http"):
            self.stdout.write("Prefix it with the site's address, or set SITE_URL.")

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from accounts.passwords import one_time_link
from campaigns.members import add_member, create_user
from campaigns.models import Campaign, Membership


class Command(BaseCommand):
    help = (
        "Add a user to a campaign as organiser or assessor (optionally creating the user: with "
        "--password, a temporary one its owner must replace at the first login; without, a "
        "one-time link to hand over is printed)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("username")
        parser.add_argument("--role", required=True, choices=Membership.Role.values)
        parser.add_argument("--create", action="store_true", help="Create the user first.")
        parser.add_argument(
            "--password",
            help="With --create: a temporary password, to be replaced at the first login. "
            "Leave it out to print a one-time link instead (SITE_URL gives its address).",
        )
        parser.add_argument("--email", default="")

    def handle(self, *args, slug: str, username: str, role: str, **options) -> None:
        campaign = Campaign.objects.filter(slug=slug).first()
        if campaign is None:
            raise CommandError(f"No campaign with slug {slug!r}.")
        if options["password"] and not options["create"]:
            raise CommandError("--password is for a new user: add --create.")
        User = get_user_model()
        link = None
        with transaction.atomic():
            user = User.objects.filter(username=username).first()
            if options["create"]:
                if user is not None:
                    raise CommandError(f"User {username!r} already exists; drop --create.")
                try:
                    user = create_user(
                        username=username,
                        password=options["password"] or None,
                        email=options["email"],
                    )
                except ValidationError as exc:
                    raise CommandError(" ".join(exc.messages)) from None
                if not options["password"]:
                    link = one_time_link(user)
            elif user is None:
                raise CommandError(f"No user {username!r}; pass --create to make one.")
            add_member(campaign=campaign, user=user, role=role)
        self.stdout.write(f"{username} is now {role} of {slug}.")
        if options["password"]:
            self.stdout.write("The password is temporary: it must be replaced at the first login.")
        if link is not None:
            self.stdout.write(
                f"One-time link to choose a password (valid until {link.expires:%Y-%m-%d %H:%M} "
                f"UTC, once): {link.url}"
            )

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from campaigns.members import add_member, create_user
from campaigns.models import Campaign, Membership


class Command(BaseCommand):
    help = "Add a user to a campaign as organiser or assessor (optionally creating the user)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("username")
        parser.add_argument("--role", required=True, choices=Membership.Role.values)
        parser.add_argument("--create", action="store_true", help="Create the user first.")
        parser.add_argument("--password", help="Password for --create.")
        parser.add_argument("--email", default="")

    def handle(self, *args, slug: str, username: str, role: str, **options) -> None:
        campaign = Campaign.objects.filter(slug=slug).first()
        if campaign is None:
            raise CommandError(f"No campaign with slug {slug!r}.")
        User = get_user_model()
        with transaction.atomic():
            user = User.objects.filter(username=username).first()
            if options["create"]:
                if user is not None:
                    raise CommandError(f"User {username!r} already exists; drop --create.")
                if not options["password"]:
                    raise CommandError("--create needs --password.")
                try:
                    user = create_user(
                        username=username, password=options["password"], email=options["email"]
                    )
                except ValidationError as exc:
                    raise CommandError(" ".join(exc.messages)) from None
            elif user is None:
                raise CommandError(f"No user {username!r}; pass --create --password … to make one.")
            add_member(campaign=campaign, user=user, role=role)
        self.stdout.write(f"{username} is now {role} of {slug}.")

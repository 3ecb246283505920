"""Adding people to a campaign."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import transaction

from campaigns.models import Assessor, Campaign, Membership


@transaction.atomic
def add_member(*, campaign: Campaign, user, role: str) -> Membership:
    """Give ``user`` ``role`` in ``campaign`` (changing an existing role). Assessors also get
    their judgment identity (an :class:`Assessor` row) at once."""
    if role not in Membership.Role.values:
        raise ValueError(f"Unknown role {role!r}; use one of {', '.join(Membership.Role.values)}.")
    membership, created = Membership.objects.get_or_create(
        campaign=campaign, user=user, defaults={"role": role}
    )
    if not created and membership.role != role:
        membership.role = role
        membership.save(update_fields=["role"])
    if role == Membership.Role.ASSESSOR:
        Assessor.objects.for_user(campaign, user)
    return membership


def create_user(*, username: str, password: str, email: str = "") -> object:
    """A new login, with the password checked by the configured validators (ValidationError)."""
    from django.contrib.auth.password_validation import validate_password

    User = get_user_model()
    user = User(username=username, email=email)
    user.full_clean(exclude=["password"])
    validate_password(password, user)
    user.set_password(password)
    user.save()
    return user

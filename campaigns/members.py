"""Adding people to a campaign."""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q

from accounts.passwords import chosen_by_owner, record_created
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


def create_user(*, username: str, password: str | None, email: str = "", by=None) -> object:
    """A new login created for someone else by ``by`` (None: the command line). With a
    ``password`` (checked by the configured validators: ValidationError), it is temporary: its
    owner must replace it at the first login. Without one, the login has no usable password until
    its owner chooses one through a one-time link (``accounts.passwords.one_time_link``)."""
    from django.contrib.auth.password_validation import validate_password

    User = get_user_model()
    user = User(username=username, email=email)
    user.full_clean(exclude=["password"])
    if password:
        validate_password(password, user)
        user.set_password(password)
    else:
        user.set_unusable_password()
    user.save()
    record_created(user, by=by, temporary=bool(password))
    return user


def password_link_refusals(*, issuer, users: Iterable) -> dict[int, str | None]:
    """For each of ``users``, why ``issuer`` may not hand out a one-time password link for it
    (None: they may). Three queries, whatever the number of users.

    A link gives whoever holds it the account, so an organiser may issue one only for an account
    whose whole reach lies inside the campaigns they organise: not their own (they change it
    themselves), no site administrator or staff member, no site-wide permission or group, and no
    role in a campaign they do not organise. A link then gives its issuer nothing they could not
    already do. Superusers, who can set any password in the admin, may issue one for anyone
    but themselves."""
    users = list(users)
    refusals: dict[int, str | None] = {user.pk: None for user in users}
    others = [user for user in users if user.pk != issuer.pk]
    for user in users:
        if user.pk == issuer.pk:
            refusals[user.pk] = "That is your own account: change its password from “Password”."
    if issuer.is_superuser or not others:
        return refusals
    ids = [user.pk for user in others]
    User = get_user_model()
    with_rights = set(
        User.objects.filter(pk__in=ids)
        .filter(Q(user_permissions__isnull=False) | Q(groups__isnull=False))
        .values_list("pk", flat=True)
    )
    organised = Membership.objects.filter(user=issuer, role=Membership.Role.ORGANISER).values(
        "campaign"
    )
    elsewhere = set(
        Membership.objects.filter(user__in=ids)
        .exclude(campaign__in=organised)
        .values_list("user_id", flat=True)
    )
    for user in others:
        name = user.get_username()
        admin_help = f"ask a site administrator (manage.py reset_link {name})"
        if user.is_superuser or user.is_staff:
            refusals[user.pk] = f"{name} is a site administrator: {admin_help}."
        elif user.pk in with_rights:
            refusals[user.pk] = f"{name} holds site-wide rights: {admin_help}."
        elif user.pk in elsewhere:
            refusals[user.pk] = (
                f"{name} also works in campaigns you do not organise, where a link from you "
                f"would give you their account too. {name} can use “Forgot your password?”, "
                f"or {admin_help}."
            )
    return refusals


def password_link_refusal(*, issuer, user) -> str | None:
    """:func:`password_link_refusals` for one user."""
    return password_link_refusals(issuer=issuer, users=[user])[user.pk]


def enrolment_refusal(*, issuer, user) -> str | None:
    """Why ``issuer`` may not add the existing login ``user`` to a campaign (None: they may).

    Any organiser may add any login that has chosen its own password: assessors work in several
    campaigns, and whoever created the login no longer knows its password. Until its owner has
    chosen one (a temporary password or a one-time link still open), its creator could still use
    the account, so only an organiser who could issue it a link anyway (see
    :func:`password_link_refusals`) may add it."""
    if chosen_by_owner(user) or user.pk == issuer.pk:
        return None
    if password_link_refusal(issuer=issuer, user=user) is None:
        return None
    name = user.get_username()
    return (
        f"{name} has not yet chosen their own password, so whoever set up the account could "
        f"still use it. Ask {name} to log in once and choose one, then add them here."
    )

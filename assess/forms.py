"""The organiser's forms for people and work.

Every choice is limited to the campaign (its assessors, the chosen pool's topics), so an id from
another campaign is an ordinary "not one of the available choices" error next to its field. What
only the domain can decide comes back from ``assess.assignments`` as an AssignmentError, which
``add_assignment_error`` puts next to the field it concerns.
"""

from __future__ import annotations

import math
import re

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError

from accounts.forms import password_rules
from assess import gold, repeats
from assess.models import Assignment
from campaigns.models import Assessor, Campaign, Membership, Topic
from pooling.models import Pool

User = get_user_model()
MAX_SEED = 2**63 - 1


def _is_pk(value) -> bool:
    """A primary key as a form can post it: digits that fit a 64-bit integer (a longer number
    would overflow the database's integer before the lookup could say "no such choice")."""
    return isinstance(value, str | int) and str(value).isdigit() and len(str(value)) <= 18


class PkChoiceField(forms.ModelChoiceField):
    def to_python(self, value):
        if value in self.empty_values:
            return None
        if not _is_pk(value):
            raise ValidationError(self.error_messages["invalid_choice"], code="invalid_choice")
        return super().to_python(value)


class PkMultipleChoiceField(forms.ModelMultipleChoiceField):
    def _check_values(self, value):
        for pk in value:
            if not _is_pk(pk):
                raise ValidationError(
                    self.error_messages["invalid_pk_value"],
                    code="invalid_pk_value",
                    params={"pk": pk},
                )
        return super()._check_values(value)


class UserChoiceField(PkChoiceField):
    def label_from_instance(self, obj) -> str:
        return obj.get_username()


class UserMultipleChoiceField(PkMultipleChoiceField):
    def label_from_instance(self, obj) -> str:
        return obj.get_username()


class TopicChoiceField(PkChoiceField):
    def label_from_instance(self, obj) -> str:
        title = obj.title if len(obj.title) <= 60 else obj.title[:59] + "…"
        return f"{obj.topic_id} · {title}" if title else obj.topic_id


class TopicsField(PkMultipleChoiceField):
    def label_from_instance(self, obj) -> str:
        return obj.topic_id


def assessor_users(campaign: Campaign):
    """The campaign's assessors as logins, by username."""
    return User.objects.filter(
        memberships__campaign=campaign, memberships__role=Membership.Role.ASSESSOR
    ).order_by("username")


def _name_taken(campaign: Campaign, username: str, user=None) -> bool:
    """An assessor of the campaign (an imported source, say) already goes by this name."""
    taken = Assessor.objects.filter(campaign=campaign, name=username)
    if user is not None:
        taken = taken.exclude(user=user)
    return taken.exists()


class CreateAssessorForm(forms.Form):
    """A new login that joins the campaign as an assessor: with a temporary password its owner
    replaces at the first login, or with none and a one-time link to hand over."""

    username = forms.CharField(max_length=150, help_text="Letters, digits and @ . + - _ only.")
    password = forms.CharField(
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        strip=False,
        required=False,
        label="Temporary password (optional)",
    )
    email = forms.EmailField(required=False, label="Email (optional)")

    def __init__(self, *args, campaign: Campaign, **kwargs):
        super().__init__(*args, **kwargs)
        self.campaign = campaign
        self.fields["username"].widget.attrs["autocomplete"] = "off"
        self.fields["password"].help_text = (
            "Leave empty to get a one-time link to give them instead. A password typed here must "
            f"be replaced at their first login. {password_rules()}"
        ).strip()

    def clean_username(self) -> str:
        username = self.cleaned_data["username"].strip()
        if User.objects.filter(username__iexact=username).exists():
            raise ValidationError(
                "There is already an account with this name: add it below instead."
            )
        if _name_taken(self.campaign, username):
            raise ValidationError("Judgments in this campaign already go by this name.")
        return username

    def clean(self) -> dict:
        data = super().clean()
        username, password = data.get("username"), data.get("password")
        if username:
            user = User(username=username, email=data.get("email", ""))
            try:
                user.full_clean(exclude=["password"])
            except ValidationError as exc:
                for name, messages in exc.message_dict.items():
                    self.add_error(name if name in self.fields else None, messages)
            if password:
                try:
                    validate_password(password, user)
                except ValidationError as exc:
                    self.add_error("password", exc)
        return data


class AddMemberForm(forms.Form):
    """An existing login joins the campaign."""

    username = forms.CharField(max_length=150, label="Username")
    role = forms.ChoiceField(choices=Membership.Role.choices, initial=Membership.Role.ASSESSOR)

    def __init__(self, *args, campaign: Campaign, **kwargs):
        super().__init__(*args, **kwargs)
        self.campaign = campaign
        self.fields["username"].widget.attrs["autocomplete"] = "off"

    def clean(self) -> dict:
        data = super().clean()
        username, role = data.get("username", "").strip(), data.get("role")
        if not username or not role:
            return data
        user = User.objects.filter(username=username).first()
        if user is None:
            self.add_error("username", f"No account is named “{username}”. Create one above.")
            return data
        membership = Membership.objects.filter(campaign=self.campaign, user=user).first()
        if membership is not None:
            self.add_error(
                "username", f"{username} is already {membership.get_role_display().lower()} here."
            )
        elif user.is_superuser and role == Membership.Role.ASSESSOR:
            self.add_error(
                "username", f"{username} is a site administrator and organises every campaign."
            )
        elif role == Membership.Role.ASSESSOR and _name_taken(self.campaign, username, user):
            self.add_error("username", "Judgments in this campaign already go by this name.")
        data["user"] = user
        return data


def parse_fraction(text: str, *, what: str = "overlap") -> float | None:
    """'' -> None; '0.1', '.1', '10%' or '0,1' -> 0.1. Raises ValueError with a sentence about
    ``what`` the fraction is."""
    text = text.strip().replace(",", ".")
    if not text:
        return None
    percent = text.endswith("%")
    if percent:
        text = text[:-1].strip()
    if not re.fullmatch(r"\d*\.?\d+", text):
        raise ValueError("Enter a fraction such as 0.1, or a percentage such as 10%.")
    value = float(text) / (100 if percent else 1)
    if not math.isfinite(value) or value > 1:
        raise ValueError(f"The {what} is at most 1 (100%).")
    return value or None


class AssignForm(forms.Form):
    """Give an assessor a pool's documents for some topics."""

    MODES = [
        (Assignment.Mode.PRIMARY, "Primary: every document of the topics, in their own order"),
        (Assignment.Mode.QUEUE, "Shared queue: documents drawn one at a time, shared with others"),
    ]

    assessor = UserChoiceField(queryset=User.objects.none(), empty_label="Choose an assessor")
    all_topics = forms.BooleanField(required=False, label="All topics of the pool")
    topics = TopicsField(
        queryset=Topic.objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Topics",
    )
    mode = forms.ChoiceField(
        choices=MODES, initial=Assignment.Mode.PRIMARY, widget=forms.RadioSelect
    )
    overlap = forms.CharField(
        required=False,
        max_length=20,
        label="Overlap for agreement",
        help_text="Share of each topic judged twice: 0.1 or 10%. Empty for none.",
    )
    partner = UserChoiceField(
        queryset=User.objects.none(),
        required=False,
        empty_label="—",
        label="Overlap partner (primary)",
        help_text="Who judges the overlap. In a shared queue the copies go to whoever draws them.",
    )
    interleave = forms.BooleanField(
        required=False,
        label="Interleave topics",
        help_text="Mix the topics in one order (disrupts drift toward one criterion).",
    )
    repeats = forms.CharField(
        required=False,
        max_length=20,
        label="Planted repeats",
        help_text=(
            "Share of the documents served again later, unannounced, to measure consistency: "
            "0.05 or 5%. Empty for none. Not in a shared queue."
        ),
    )
    gold_from = forms.ModelChoiceField(
        queryset=Assessor.objects.none(),
        required=False,
        empty_label="None",
        label="Source",
        help_text="Imported qrels whose labels are known: mixed in silently, never shown as gold.",
    )
    gold_amount = forms.CharField(
        required=False,
        max_length=20,
        label="How many",
        help_text="A share of the documents given (0.05 or 5%) or a number (10). Not in a queue.",
    )
    seed = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_SEED,
        help_text="Optional: the same seed gives the same presentation order.",
    )

    def __init__(self, *args, campaign: Campaign, pool: Pool, **kwargs):
        super().__init__(*args, **kwargs)
        self.campaign, self.pool = campaign, pool
        self.fields["gold_from"].queryset = gold.gold_sources(campaign)
        people = assessor_users(campaign)
        self.fields["assessor"].queryset = people
        self.fields["partner"].queryset = people
        self.fields["topics"].queryset = pool.topics.order_by("position", "topic_id")
        self.fields[
            "all_topics"
        ].label = f"All {pool.topics.count()} topics of pool v{pool.version}"

    def clean_overlap(self) -> float | None:
        try:
            return parse_fraction(self.cleaned_data.get("overlap", ""))
        except ValueError as exc:
            raise ValidationError(str(exc)) from None

    def clean_repeats(self) -> float:
        try:
            rate = parse_fraction(self.cleaned_data.get("repeats", ""), what="repeat rate")
            return repeats.check_rate(rate or 0.0)
        except ValueError as exc:
            raise ValidationError(str(exc)) from None

    def clean_gold_amount(self) -> tuple[float, int | None]:
        try:
            return gold.parse_amount(self.cleaned_data.get("gold_amount", ""))
        except ValueError as exc:
            raise ValidationError(str(exc)) from None

    def clean(self) -> dict:
        data = super().clean()
        if "gold_amount" in data:
            rate, count = data["gold_amount"]
            if data.get("gold_from") is None and (rate or count):
                self.add_error(
                    "gold_from", "Choose the imported qrels the gold documents come from."
                )
            elif data.get("gold_from") is not None and not (rate or count):
                self.add_error("gold_amount", "Give a share or a number of gold documents.")
        if data.get("all_topics"):
            data["topics"] = list(self.fields["topics"].queryset)
        elif "topics" in data and not data["topics"]:
            self.add_error("topics", "Choose topics, or tick “All topics”.")
        mode, overlap, partner = data.get("mode"), data.get("overlap"), data.get("partner")
        assessor = data.get("assessor")
        if mode == Assignment.Mode.PRIMARY:
            if overlap and partner is None and "partner" not in self.errors:
                self.add_error("partner", "An overlap in primary mode needs a partner.")
            if partner is not None and not overlap and "overlap" not in self.errors:
                self.add_error("overlap", "Give the share of each topic the partner judges.")
            if partner is not None and assessor is not None and partner == assessor:
                self.add_error("partner", "The partner must be another assessor.")
        elif mode == Assignment.Mode.QUEUE and partner is not None:
            self.add_error(
                "partner",
                "A shared queue has no partner: its overlap copies go to a second assessor "
                "who draws them. Leave this empty.",
            )
        return data

    def add_assignment_error(self, message: str) -> None:
        """Put the domain's sentence next to the field it is about."""
        lowered = message.lower()
        for word, name in (
            ("gold source", "gold_from"),
            ("gold", "gold_amount"),
            ("repeat", "repeats"),
            ("overlap", "overlap"),
            ("partner", "partner"),
            ("topic", "topics"),
        ):
            if word in lowered:
                self.add_error(name, message)
                return
        self.add_error(None, message)


class MoveWorkForm(forms.Form):
    """Move what one assessor still has to judge of a topic to another."""

    topic = TopicChoiceField(queryset=Topic.objects.none(), empty_label="Choose a topic")
    from_user = UserChoiceField(
        queryset=User.objects.none(), label="From", empty_label="Choose an assessor"
    )
    to_user = UserChoiceField(
        queryset=User.objects.none(), label="To", empty_label="Choose an assessor"
    )

    def __init__(self, *args, campaign: Campaign, pool: Pool, **kwargs):
        super().__init__(*args, **kwargs)
        people = assessor_users(campaign)
        self.fields["from_user"].queryset = people
        self.fields["to_user"].queryset = people
        self.fields["topic"].queryset = pool.topics.order_by("position", "topic_id")

    def clean(self) -> dict:
        data = super().clean()
        if data.get("from_user") and data.get("from_user") == data.get("to_user"):
            self.add_error("to_user", "Choose another assessor to move the work to.")
        return data

    def add_assignment_error(self, message: str) -> None:
        lowered = message.lower()
        name = "to_user" if "already has" in lowered or "third assessor" in lowered else "topic"
        self.add_error(name, message)


class RebalanceForm(forms.Form):
    """Share a topic's remaining primary work evenly across assessors."""

    topic = TopicChoiceField(queryset=Topic.objects.none(), empty_label="Choose a topic")
    users = UserMultipleChoiceField(
        queryset=User.objects.none(),
        widget=forms.CheckboxSelectMultiple,
        label="Share it across",
    )

    def __init__(self, *args, campaign: Campaign, pool: Pool, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["users"].queryset = assessor_users(campaign)
        self.fields["topic"].queryset = pool.topics.order_by("position", "topic_id")

    def add_assignment_error(self, message: str) -> None:
        self.add_error("topic" if "topic" in message.lower() else "users", message)

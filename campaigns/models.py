"""A campaign and the records every other app builds on: its rubric, topics, documents, members,
assessors, judgments and background jobs.

Identifiers of topics and documents are strings, kept exactly as imported (leading zeros and all).
A judgment is a verdict on a (topic, document id) pair by one assessor; the document need not have
been imported (runs and qrels often name documents before the collection arrives).
"""

from __future__ import annotations

import functools
import re
import secrets
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone

# Ids travel in whitespace-separated files: whitespace or control characters would corrupt them.
ID_MAX_LENGTH = 200
id_validator = RegexValidator(
    r"^[^\s\x00-\x1f\x7f]+$", "Identifiers cannot contain whitespace or control characters."
)
slug_validator = RegexValidator(
    r"^[a-z0-9](?:[a-z0-9-]{0,48}[a-z0-9])?$",
    "Use lowercase letters, digits and hyphens (at most 50), starting and ending with a letter "
    "or digit.",
)

# Keys the judging screen keeps for navigation; a label cannot take them.
RESERVED_KEYS = frozenset("?[]/ ")
# The judging screen's command keys (assess/keys.py). A label may take one of them (organisers
# choose letters for their labels, and a rubric must stay theirs), and then the label wins: the
# command has no key on that campaign's screen, which the keys page says.
COMMAND_KEYS: dict[str, str] = {
    "s": "skip (judge later)",
    "r": "your judged documents (revise)",
    "u": "unsure",
    "x": "unreadable",
    "n": "note",
    "g": "guidelines",
    "h": "term highlighting",
}


@functools.cache
def reserved_slugs() -> frozenset[str]:
    """Every word the site's own addresses under ``/c/`` use (``new``, ``jobs``, ``judge``, …),
    read from the URL patterns so that a new page reserves its word too. ``/c/new/`` is the
    new-campaign page, so a campaign called ``new`` could never be opened; the other words are
    refused as well, so that no later page at ``/c/<word>/`` can hide a campaign."""
    from django.urls import URLResolver, get_resolver

    words: set[str] = set()

    def visit(patterns: list, prefix: str) -> None:
        for entry in patterns:
            route = prefix + str(entry.pattern)
            if isinstance(entry, URLResolver):
                visit(entry.url_patterns, route)
            elif route.startswith("c/"):
                words.update(part for part in route[2:].split("/") if part and "<" not in part)

    visit(get_resolver().url_patterns, "")
    return frozenset(words)


class Campaign(models.Model):
    slug = models.CharField(max_length=50, unique=True, validators=[slug_validator])
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    guidelines = models.TextField(
        blank=True, help_text="Instructions shown to assessors beside every document."
    )
    relevance_threshold = models.IntegerField(
        default=1, help_text="The lowest label counted as relevant by binary measures."
    )
    topic_breaks = models.BooleanField(
        "Topic breaks",
        default=True,
        help_text=(
            "Before the first document of a new topic, assessors see that topic's title, "
            "description and narrative and press Enter to begin. Without a break the first "
            "documents of a topic tend to be judged against the previous topic's idea of "
            "relevance (assessment inertia, Scholer et al. 2011); switch it off only for "
            "interleaved orders, where every document may change topic."
        ),
    )
    highlight_terms = models.BooleanField(
        "Highlight the topic's terms",
        default=False,
        help_text=(
            "Marks the words of each topic's title and description in the documents (an assessor "
            "can still hide the marks). Faster to scan, but it can bias judgments: the interface "
            "is part of the measurement, and marks pull the eye towards documents that share the "
            "topic's words, the same pull that already leans pools towards title words (Buckley "
            "et al. 2007), while relevant documents in other words go unmarked. Off unless the "
            "campaign needs speed more than independence, and say so in its documentation."
        ),
    )
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.slug

    def clean(self) -> None:
        super().clean()
        if self.slug == "new":
            raise ValidationError(
                {
                    "slug": "“new” is reserved: /c/new/ is the page that creates campaigns, so a "
                    "campaign called new could never be opened. Choose another slug."
                }
            )
        if self.slug in reserved_slugs():
            raise ValidationError(
                {
                    "slug": f"“{self.slug}” is reserved: Pooljudge's own addresses under /c/ use "
                    "that word, so a campaign with it could become unreachable. Choose another "
                    "slug."
                }
            )

    def current_rubric(self) -> RubricVersion | None:
        return self.rubric_versions.order_by("-number").first()

    def role_of(self, user) -> str | None:
        """The user's role in this campaign, or None. Superusers count as organisers."""
        if not user.is_authenticated:
            return None
        if user.is_superuser:
            return Membership.Role.ORGANISER
        return self.memberships.filter(user=user).values_list("role", flat=True).first()

    @transaction.atomic
    def save_rubric(
        self, labels: list[LabelSpec], *, by=None, note: str = "", threshold: int | None = None
    ) -> RubricVersion:
        """Create the next rubric version from ``labels``; earlier versions are kept unchanged,
        because judgments record the version their assessor was shown.

        Raises ValueError with a readable message if the scale is not usable.
        """
        problems = validate_scale(labels)
        if threshold is not None and threshold not in {spec.value for spec in labels}:
            problems.append(f"The threshold {threshold} is not one of the label values.")
        if problems:
            raise ValueError(" ".join(problems))
        # Lock the campaign row so two organisers saving at once get consecutive numbers.
        Campaign.objects.select_for_update(of=("self",)).filter(pk=self.pk).order_by().first()
        last = self.rubric_versions.order_by("-number").values_list("number", flat=True).first()
        version = RubricVersion.objects.create(
            campaign=self, number=(last or 0) + 1, created_by=by, note=note
        )
        Label.objects.bulk_create(
            Label(
                rubric=version,
                value=spec.value,
                name=spec.name,
                description=spec.description,
                example=spec.example,
                key=spec.key,
            )
            for spec in labels
        )
        if threshold is not None and threshold != self.relevance_threshold:
            self.relevance_threshold = threshold
            self.save(update_fields=["relevance_threshold"])
        return version


@dataclass(frozen=True)
class LabelSpec:
    value: int
    name: str
    description: str = ""
    example: str = ""
    key: str = ""


def validate_scale(labels: list[LabelSpec]) -> list[str]:
    """Every reason ``labels`` cannot be a rubric, as sentences (empty when it can)."""
    problems: list[str] = []
    if len(labels) < 2:
        problems.append("A scale needs at least two labels.")
    values = [spec.value for spec in labels]
    if len(set(values)) != len(values):
        problems.append("Two labels have the same value.")
    if any(value < 0 for value in values):
        problems.append("Label values must be 0 or more (negative values mean 'not judged').")
    keys = [spec.key for spec in labels]
    if any(len(key) != 1 for key in keys):
        problems.append("Every label needs a keyboard key of exactly one character.")
    elif len(set(keys)) != len(keys):
        problems.append("Two labels have the same keyboard key.")
    reserved = sorted({key for key in keys if key in RESERVED_KEYS})
    if reserved:
        problems.append(f"Keys {' '.join(reserved)!r} are kept for navigation.")
    if any(not spec.name.strip() for spec in labels):
        problems.append("Every label needs a name.")
    return problems


class RubricVersion(models.Model):
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="rubric_versions")
    number = models.PositiveIntegerField()
    note = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["campaign", "number"]
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "number"], name="rubric_version_number_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.campaign.slug} rubric v{self.number}"

    def specs(self) -> list[LabelSpec]:
        return [
            LabelSpec(label.value, label.name, label.description, label.example, label.key)
            for label in self.labels.all()
        ]


class Label(models.Model):
    rubric = models.ForeignKey(RubricVersion, on_delete=models.CASCADE, related_name="labels")
    value = models.IntegerField()
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    example = models.TextField(blank=True)
    key = models.CharField(max_length=1)

    class Meta:
        ordering = ["rubric", "value"]
        constraints = [
            models.UniqueConstraint(fields=["rubric", "value"], name="label_value_unique"),
            models.UniqueConstraint(fields=["rubric", "key"], name="label_key_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.value} {self.name}"


class Membership(models.Model):
    class Role(models.TextChoices):
        ORGANISER = "organiser", "Organiser"
        ASSESSOR = "assessor", "Assessor"
        # Reads the agreement pages and settles disagreements; administers nothing.
        ADJUDICATOR = "adjudicator", "Adjudicator"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=20, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["campaign", "role", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "user"], name="membership_unique")
        ]

    def __str__(self) -> str:
        return f"{self.user} {self.role} of {self.campaign}"


class AssessorQuerySet(models.QuerySet):
    def for_user(self, campaign: Campaign, user) -> Assessor:
        """The assessor identity of ``user`` in ``campaign``, created on first use."""
        assessor = self.filter(campaign=campaign, user=user).first()
        if assessor is not None:
            return assessor
        with transaction.atomic():
            assessor, _ = self.get_or_create(
                campaign=campaign,
                user=user,
                defaults={"name": user.get_username(), "kind": Assessor.Kind.PERSON},
            )
        return assessor


def _new_pseudonym() -> str:
    return "a" + secrets.token_hex(4)


class Assessor(models.Model):
    """Who a judgment belongs to: a person with a login, an imported source (earlier qrels), a
    model (an LLM judge with a frozen configuration), the campaign's adjudicated labels, or a
    hybrid budget's filled labels (a model's, calibrated on people's verdicts).

    Only people's verdicts are judgments in the usual sense: agreement is measured between
    people, and the other kinds enter qrels only where a policy asks for them."""

    class Kind(models.TextChoices):
        PERSON = "person", "Person"
        IMPORTED = "imported", "Imported qrels"
        MODEL = "model", "Model"
        ADJUDICATED = "adjudicated", "Adjudicated labels"
        # A hybrid budget's fill (assess/hybrid.py): a model's labels, calibrated on the
        # people's verdicts of the topic, on the pairs people were not sent to.
        FILLED = "filled", "Model labels filled in (calibrated)"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="assessors")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        # Judgments outlive accounts: deleting a user must not delete their verdicts.
        on_delete=models.PROTECT,
        related_name="assessor_identities",
    )
    name = models.CharField(max_length=150)
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.PERSON)
    # Stable and meaningless: exports name assessors by this unless usernames are asked for.
    pseudonym = models.CharField(max_length=20, default=_new_pseudonym, editable=False)
    # For imported sources: each import (file, sha256, duplicate policy, time), for the record.
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = AssessorQuerySet.as_manager()

    class Meta:
        ordering = ["campaign", "name"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "name"], name="assessor_name_unique"),
            models.UniqueConstraint(
                fields=["campaign", "pseudonym"], name="assessor_pseudonym_unique"
            ),
            models.UniqueConstraint(
                fields=["campaign", "user"],
                condition=Q(user__isnull=False),
                name="assessor_user_unique",
            ),
        ]

    def __str__(self) -> str:
        return self.name


# The kinds whose labels are verdicts on a pair in the usual sense: agreement pairs them, and
# every qrels policy but ``adjudicated`` weighs them. Adjudicated labels settle those verdicts
# and must not be counted among them; models' labels are compared with them, not merged.
VERDICT_KINDS: tuple[str, ...] = (Assessor.Kind.PERSON.value, Assessor.Kind.IMPORTED.value)


class Topic(models.Model):
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="topics")
    topic_id = models.CharField(max_length=ID_MAX_LENGTH, validators=[id_validator])
    title = models.TextField(blank=True)
    description = models.TextField(blank=True)
    narrative = models.TextField(blank=True)
    # Order of the topic file: the order organisers know their topics in ("2" before "10").
    position = models.PositiveIntegerField(default=0)
    # The id the topic file gave it, when it was imported with positional ids (Cranfield's
    # queries ".I 001", ".I 002", ".I 004" become 1, 2, 3, as its qrels number them); empty
    # when the id is the file's own.
    original_id = models.CharField(max_length=ID_MAX_LENGTH, blank=True)

    class Meta:
        ordering = ["campaign", "position", "topic_id"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "topic_id"], name="topic_id_unique")
        ]

    def __str__(self) -> str:
        return self.topic_id


# The characters of a document (title, then body) its words are searched in. PostgreSQL keeps
# the words of each document in a GIN index (migration 0009) and a tsvector holds at most 1 MB:
# a bounded prefix keeps any document, however long, importable, and reaches the end of nearly
# every real one (TREC-COVID's abstracts, Cranfield's, news articles are a few thousand).
SEARCHED_CHARACTERS = 100_000
# What a word search runs on, in one place: the index of migration 0009 is this very expression
# (the planner uses an expression index only for an identical expression; a test checks it).
SEARCH_CONFIG = "simple"  # no stemming, no stopwords: every word of any language, lower-cased


def document_words():
    """The tsvector expression of a document's searched text (PostgreSQL only)."""
    from django.contrib.postgres.search import SearchVector
    from django.db.models.functions import Left

    return SearchVector(
        Left("title", SEARCHED_CHARACTERS), Left("body", SEARCHED_CHARACTERS), config=SEARCH_CONFIG
    )


# A word of a search: letters, digits and underscores (any script), as PostgreSQL's parser and
# the term marking of the judging screen cut words.
_SEARCH_WORD = re.compile(r"\w+")


class DocumentQuerySet(models.QuerySet):
    def search(self, text: str) -> DocumentQuerySet:
        """Documents whose id is ``text`` or starts with it, or whose title and body hold every
        word of ``text`` (case-insensitive). On PostgreSQL each word matches the beginning of a
        word of the document through the GIN index (``covid`` finds "COVID-19", not
        "precovid"); on SQLite it matches anywhere in the text (a scan, fine for a laptop's
        campaign). The exact id first, then by id; every document when ``text`` is blank."""
        text = text.strip()
        if not text:
            return self.order_by("doc_id")
        words = [word.lower() for word in _SEARCH_WORD.findall(text)]
        matches = []
        if not any(c.isspace() for c in text):
            # An id prefix: the (campaign, doc_id varchar_pattern_ops) index on PostgreSQL.
            matches.append(self.filter(doc_id__startswith=text))
        if words:
            matches.append(self._holding_words(words))
        if len(matches) == 1:
            found = matches[0]
        else:
            # Each way of matching on its own, then the union: one query with ``id prefix OR
            # words`` makes PostgreSQL re-check the OR on every row the indexes return, which
            # computes each one's words again (2 s instead of 30 ms for 2,000 documents).
            # (Unordered: SQLite refuses an ORDER BY inside a compound statement.)
            first, second = (match.order_by().values("pk") for match in matches)
            ids = first.union(second)
            found = self.filter(pk__in=ids)
        exact = models.Case(
            models.When(doc_id=text, then=models.Value(0)),
            default=models.Value(1),
            output_field=models.IntegerField(),
        )
        return found.alias(_exact=exact).order_by("_exact", "doc_id")

    def _holding_words(self, words: list[str]) -> DocumentQuerySet:
        from django.db import connection

        if connection.vendor == "postgresql":
            from django.contrib.postgres.search import SearchQuery

            # Each word a prefix (``word:*``); words are \w only, so nothing needs quoting.
            raw = " & ".join(f"{word}:*" for word in words)
            query = SearchQuery(raw, config=SEARCH_CONFIG, search_type="raw")
            return self.alias(_words=document_words()).filter(_words=query)
        every = Q()
        for word in words:
            every &= Q(title__icontains=word) | Q(body__icontains=word)
        return self.filter(every)


class Document(models.Model):
    # No index of its own: document_id_unique (campaign, doc_id) serves every lookup by campaign,
    # and a lone one let the planner read a campaign's documents to find one.
    campaign = models.ForeignKey(
        Campaign, on_delete=models.CASCADE, related_name="documents", db_index=False
    )
    doc_id = models.CharField(max_length=ID_MAX_LENGTH, validators=[id_validator])
    title = models.TextField(blank=True)
    # The body exactly as imported, and the form safe to show: nh3-sanitised HTML when the body
    # held markup, escaped text with paragraphs otherwise.
    body = models.TextField(blank=True)
    body_html = models.TextField(blank=True)
    is_html = models.BooleanField(default=False)

    objects = DocumentQuerySet.as_manager()

    class Meta:
        ordering = ["campaign", "doc_id"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "doc_id"], name="document_id_unique")
        ]

    def __str__(self) -> str:
        return self.doc_id


class JudgmentQuerySet(models.QuerySet):
    def for_campaign(self, campaign: Campaign) -> JudgmentQuerySet:
        return self.filter(campaign=campaign)

    def by_people(self) -> JudgmentQuerySet:
        return self.filter(assessor__kind=Assessor.Kind.PERSON)

    def verdicts(self) -> JudgmentQuerySet:
        """People's and imported sources' labels: no adjudicated or model label."""
        return self.filter(assessor__kind__in=VERDICT_KINDS)


class Judgment(models.Model):
    """One assessor's current verdict on a (topic, document) pair; every verdict it ever had,
    including this one, is in :class:`JudgmentRevision`."""

    class Source(models.TextChoices):
        JUDGED = "judged", "Judged in Pooljudge"
        IMPORTED = "imported", "Imported qrels"
        FILLED = "filled", "Filled by a hybrid budget (assess/hybrid.py)"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="judgments")
    topic = models.ForeignKey(Topic, on_delete=models.PROTECT, related_name="judgments")
    doc_id = models.CharField(max_length=ID_MAX_LENGTH)
    assessor = models.ForeignKey(Assessor, on_delete=models.PROTECT, related_name="judgments")
    label = models.IntegerField()
    rubric_version = models.ForeignKey(
        RubricVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    source = models.CharField(max_length=20, choices=Source.choices, default=Source.JUDGED)
    # The iteration column of the imported qrels line (TREC-COVID's judging round: "0.5", "1"),
    # exactly as written; empty for a verdict given in Pooljudge.
    iteration = models.CharField(max_length=ID_MAX_LENGTH, blank=True)
    # Position of the document in this assessor's presentation order (1-based).
    position = models.PositiveIntegerField(null=True, blank=True)
    served_at = models.DateTimeField(null=True, blank=True)
    judged_at = models.DateTimeField(default=timezone.now)
    first_judged_at = models.DateTimeField(default=timezone.now)
    seconds_on_screen = models.FloatField(null=True, blank=True)
    active_seconds = models.FloatField(null=True, blank=True)
    note = models.TextField(blank=True)
    unreadable = models.BooleanField(default=False)
    unsure = models.BooleanField(default=False)
    # Number of verdicts so far; also the optimistic-concurrency token of a revision.
    version = models.PositiveIntegerField(default=1)

    objects = JudgmentQuerySet.as_manager()

    class Meta:
        ordering = ["campaign", "topic", "doc_id", "assessor"]
        constraints = [
            models.UniqueConstraint(
                fields=["assessor", "topic", "doc_id"], name="judgment_pair_per_assessor_unique"
            )
        ]
        indexes = [models.Index(fields=["campaign", "topic", "doc_id"], name="judgment_pair_idx")]

    def __str__(self) -> str:
        return f"{self.topic_id} {self.doc_id} {self.label} by {self.assessor_id}"


class JudgmentRevision(models.Model):
    """Append-only history: one row per verdict, never updated or deleted."""

    judgment = models.ForeignKey(Judgment, on_delete=models.PROTECT, related_name="revisions")
    version = models.PositiveIntegerField()
    label = models.IntegerField()
    rubric_version = models.ForeignKey(
        RubricVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # As on Judgment: the qrels iteration column an imported verdict came with.
    iteration = models.CharField(max_length=ID_MAX_LENGTH, blank=True)
    served_at = models.DateTimeField(null=True, blank=True)
    judged_at = models.DateTimeField(default=timezone.now)
    seconds_on_screen = models.FloatField(null=True, blank=True)
    active_seconds = models.FloatField(null=True, blank=True)
    note = models.TextField(blank=True)
    unreadable = models.BooleanField(default=False)
    unsure = models.BooleanField(default=False)
    # One-time id carried by the form that produced this verdict: a resubmitted form (double
    # click, htmx retry, back button) finds its verdict already stored and records nothing.
    submission_id = models.UUIDField(null=True, blank=True, unique=True)
    # Who gave this verdict when the assessor is not a person's own identity (an adjudicated
    # label: the organiser or adjudicator who settled the pair); empty otherwise.
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        # History outlives accounts, as judgments do.
        on_delete=models.PROTECT,
        related_name="+",
    )

    class Meta:
        ordering = ["judgment", "version"]
        constraints = [
            models.UniqueConstraint(
                fields=["judgment", "version"], name="judgment_revision_version_unique"
            )
        ]

    def __str__(self) -> str:
        return f"v{self.version} of {self.judgment_id}: {self.label}"


class JobQuerySet(models.QuerySet):
    def active(self) -> JobQuerySet:
        return self.filter(status__in=[Job.Status.QUEUED, Job.Status.RUNNING])


class Job(models.Model):
    """A unit of background work. Celery delivers it; this row is the truth about it: the
    pages poll it, and tasks claim it so a redelivered or duplicated message changes nothing."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    FINAL = frozenset({Status.DONE, Status.FAILED, Status.CANCELLED})

    campaign = models.ForeignKey(
        Campaign, null=True, blank=True, on_delete=models.CASCADE, related_name="jobs"
    )
    kind = models.CharField(max_length=50)
    task_name = models.CharField(max_length=200)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    params = models.JSONField(default=dict, blank=True)
    result = models.JSONField(default=dict, blank=True)
    progress_done = models.PositiveBigIntegerField(default=0)
    progress_total = models.PositiveBigIntegerField(null=True, blank=True)
    progress_message = models.CharField(max_length=200, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=3)
    error = models.TextField(blank=True)
    cancel_requested = models.BooleanField(default=False)
    worker = models.CharField(max_length=200, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    token = models.UUIDField(default=uuid.uuid4, editable=False, unique=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["campaign", "status"], name="job_campaign_status_idx")]

    def __str__(self) -> str:
        return f"job {self.pk} {self.kind} {self.status}"

    @property
    def is_final(self) -> bool:
        return self.status in self.FINAL

    @property
    def is_lost(self) -> bool:
        """Running, but no heartbeat for ``JOB_STALE_AFTER_SECONDS``: its worker is gone (killed,
        out of memory, restarted), and it can be retried or cancelled at once."""
        from campaigns.jobs import stale_cutoff

        return self.status == self.Status.RUNNING and (
            self.heartbeat_at is None or self.heartbeat_at < stale_cutoff()
        )

    @property
    def state(self) -> str:
        """The status as the pages show it: a lost job is not running any more."""
        return "lost" if self.is_lost else self.status

    @property
    def state_label(self) -> str:
        return "Lost" if self.is_lost else self.get_status_display()

    @property
    def can_retry(self) -> bool:
        return self.status in (self.Status.FAILED, self.Status.CANCELLED) or self.is_lost

    @property
    def percent(self) -> int | None:
        if not self.progress_total:
            return None
        return min(100, int(100 * self.progress_done / self.progress_total))

    @property
    def duration(self) -> timedelta | None:
        if self.started_at is None:
            return None
        # A lost job ran until its last heartbeat, not until now.
        end = self.finished_at or (self.heartbeat_at if self.is_lost else None) or timezone.now()
        return end - self.started_at


class Upload(models.Model):
    """A file an organiser uploaded for import. Its bytes live in the database (as chunks) so
    that a worker on another machine can read them; they are dropped once the import ends."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="uploads")
    kind = models.CharField(max_length=20)
    name = models.CharField(max_length=255)
    size = models.PositiveBigIntegerField(default=0)
    sha256 = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    job = models.ForeignKey(
        Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="uploads"
    )

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name


class UploadChunk(models.Model):
    upload = models.ForeignKey(Upload, on_delete=models.CASCADE, related_name="chunks")
    seq = models.PositiveIntegerField()
    data = models.BinaryField()

    class Meta:
        ordering = ["upload", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["upload", "seq"], name="upload_chunk_seq_unique")
        ]

    def __str__(self) -> str:
        return f"{self.upload_id}#{self.seq}"


class WorkerBeat(models.Model):
    """A Celery worker's sign of life, written every few seconds by a thread in its main process
    (campaigns.jobs.WorkerHeartbeat), so that the jobs page and ``/healthz?deep=1`` can say that
    no worker is running, and since when, without asking the broker."""

    name = models.CharField(max_length=200, unique=True, help_text="Celery node name")
    pid = models.PositiveIntegerField(default=0)
    queues = models.CharField(max_length=500, blank=True)
    started_at = models.DateTimeField()
    seen_at = models.DateTimeField()
    stopped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["-seen_at"], name="workerbeat_seen_idx")]

    def __str__(self) -> str:
        return self.name

"""Assignments: who judges which pooled documents, in which order.

Each assessor works through their own presentation order (a seeded shuffle, never pool or rank
order). Primary and overlap assignments list their documents up front; queue assignments draw
documents one at a time from a shared :class:`QueueItem` table with ``SELECT … FOR UPDATE SKIP
LOCKED``, so several assessors can share a topic without two of them being served one document.

Everything here is reached by assessors through opaque tokens only: URLs never carry document ids,
pool entries or ranks.
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from campaigns.models import ID_MAX_LENGTH, Assessor, Campaign, Judgment, Topic
from pooling.models import Pool


def _token() -> str:
    return secrets.token_urlsafe(12)


class Assignment(models.Model):
    class Mode(models.TextChoices):
        PRIMARY = "primary", "Primary (judges the whole topic)"
        QUEUE = "queue", "Shared queue"
        OVERLAP = "overlap", "Overlap (second judgments for agreement)"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="assignments")
    pool = models.ForeignKey(Pool, on_delete=models.PROTECT, related_name="assignments")
    assessor = models.ForeignKey(Assessor, on_delete=models.PROTECT, related_name="assignments")
    mode = models.CharField(max_length=20, choices=Mode.choices)
    topics = models.ManyToManyField(Topic, related_name="assignments")
    seed = models.BigIntegerField()
    # Interleave topics in the presentation order (seed 002: it disrupts criterion drift).
    interleave = models.BooleanField(default=False)
    # Overlap assignments: the share of each topic's documents given, and whose work it doubles.
    overlap_fraction = models.FloatField(null=True, blank=True)
    partner = models.ForeignKey(
        Assessor, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    token = models.CharField(max_length=32, unique=True, default=_token, editable=False)
    active = models.BooleanField(default=True)
    # Planted repeats (assess/repeats.py): the share of the documents given that come back later
    # in the order, unannounced, to measure the assessor's consistency. 0: none.
    repeat_rate = models.FloatField(default=0)
    # Gold items (assess/gold.py): pairs whose label is known from an imported source's qrels,
    # mixed silently into the order; per assignment, a share of the documents given
    # (``gold_rate``) or a number of pairs (``gold_count``). No source: none.
    gold_source = models.ForeignKey(
        Assessor, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    gold_rate = models.FloatField(default=0)
    gold_count = models.PositiveIntegerField(null=True, blank=True)
    # A shared queue of a pool with a hybrid budget (assess/hybrid.py): its documents are chosen
    # one at a time by the budget's routing, not read off the queue's shuffled order. Kept on
    # the row the judging answer loads anyway, so a static queue pays nothing to know it.
    hybrid = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["campaign", "created_at", "id"]

    def __str__(self) -> str:
        return f"{self.assessor} {self.mode} on pool v{self.pool.version}"


class AssignmentItem(models.Model):
    """One document in one assessor's presentation order."""

    # No index of its own: every index below starts with the assignment. A lone one let the
    # planner, on stale statistics, read the whole assignment through it and sort, where
    # (assignment, position) walks straight to the previous or next document.
    assignment = models.ForeignKey(
        Assignment, on_delete=models.CASCADE, related_name="items", db_index=False
    )
    topic = models.ForeignKey(Topic, on_delete=models.PROTECT, related_name="+")
    doc_id = models.CharField(max_length=ID_MAX_LENGTH)
    position = models.PositiveIntegerField()
    token = models.CharField(max_length=32, unique=True, default=_token, editable=False)
    first_served_at = models.DateTimeField(null=True, blank=True)
    judgment = models.ForeignKey(
        Judgment, null=True, blank=True, on_delete=models.SET_NULL, related_name="items"
    )
    # Taken away by a reassignment (or a lost queue claim) before it was judged: never served again.
    withdrawn = models.BooleanField(default=False)
    # Queue assignments: the shared queue entry this item was claimed from.
    queue_item = models.ForeignKey(
        "QueueItem",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,  # a partial index below: most items have none
    )
    # A planted repeat: the item of the same document served earlier in this order. Its verdict
    # is a RepeatVerdict (never a revision, never in qrels); once given, ``judgment`` points at
    # the first verdict's row so the item counts as done.
    repeat_of = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="repeats",
        db_index=False,  # a partial index below: most items are none
    )
    # A gold item (assess/gold.py): the imported verdict whose label is known for this pair.
    # ``gold_only``: the pair is not the assessor's work, it was added only as a check; its
    # verdicts are GoldVerdicts (never a judgment, never in qrels or agreement), and once given,
    # ``judgment`` points at ``gold`` so the item counts as done. Never rendered to assessors.
    gold = models.ForeignKey(
        Judgment,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_index=False,  # a partial index below: most items are none
    )
    # A default in the database too: the queue's claim inserts items in raw SQL.
    gold_only = models.BooleanField(default=False, db_default=False)

    class Meta:
        ordering = ["assignment", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["assignment", "position"], name="assignment_item_position_unique"
            ),
            models.UniqueConstraint(
                fields=["assignment", "topic", "doc_id"],
                condition=Q(repeat_of__isnull=True),
                name="assignment_item_pair_unique",
            ),
        ]
        indexes = [
            models.Index(
                fields=["assignment", "judgment", "withdrawn"], name="assignment_open_idx"
            ),
            # The next document to serve: an assessor's open items already in presentation
            # order, whatever the planner's statistics say (never a sort of the assignment).
            models.Index(
                fields=["assignment", "position"],
                condition=Q(judgment__isnull=True, withdrawn=False),
                name="assignment_item_next_idx",
            ),
            # Only the items that have one: an index holding every item's NULL served
            # "repeat_of IS NULL" too, and stale statistics let the planner walk the whole
            # table through it for the previous document.
            models.Index(
                fields=["repeat_of"],
                condition=Q(repeat_of__isnull=False),
                name="assignment_item_repeat_idx",
            ),
            models.Index(
                fields=["queue_item"],
                condition=Q(queue_item__isnull=False),
                name="assignment_item_queue_idx",
            ),
            models.Index(
                fields=["gold"], condition=Q(gold__isnull=False), name="assignment_item_gold_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.position} of {self.assignment_id}"


class QueueItem(models.Model):
    """A document of a shared queue (one per pool, topic and replica). ``replica`` > 0 are the
    extra copies an overlap adds, served to a different assessor than the other copies."""

    pool = models.ForeignKey(Pool, on_delete=models.PROTECT, related_name="queue_items")
    topic = models.ForeignKey(Topic, on_delete=models.PROTECT, related_name="+")
    doc_id = models.CharField(max_length=ID_MAX_LENGTH)
    replica = models.PositiveSmallIntegerField(default=0)
    order = models.PositiveIntegerField()
    claimed_by = models.ForeignKey(
        Assessor, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    claimed_at = models.DateTimeField(null=True, blank=True)
    done = models.BooleanField(default=False)
    # Under a hybrid budget (assess/hybrid.py): the model's stratum of the pair (its label, or
    # the tenth of its probability of relevance), by which the routing gives pairs out. None:
    # not routed (no budget on the topic, or a pair the model did not label).
    stratum = models.SmallIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["pool", "topic", "order"]
        constraints = [
            models.UniqueConstraint(
                fields=["pool", "topic", "doc_id", "replica"], name="queue_item_unique"
            )
        ]
        indexes = [
            models.Index(
                fields=["pool", "topic", "done", "order"],
                condition=Q(done=False),
                name="queue_item_open_idx",
            ),
            # A claim takes the first open entry in this order (assess.judging._CLAIM): walked
            # on the index, never a sort of the pool's open entries.
            models.Index(
                fields=["pool", "replica", "order", "id"],
                condition=Q(done=False),
                name="queue_item_claim_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.topic_id} {self.doc_id} r{self.replica}"


class Skip(models.Model):
    """An assessor put a document off ("judge later"): its item went to the end of their order
    for its topic. Append-only, one row per skip. An item with a skip and no judgment yet is
    "skipped, not yet judged" (assess/skips.py), and its topic is not done until it is judged."""

    item = models.ForeignKey(AssignmentItem, on_delete=models.CASCADE, related_name="skips")
    # Who skipped (the item's assessor, kept here so the record reads on its own).
    assessor = models.ForeignKey(Assessor, on_delete=models.PROTECT, related_name="+")
    # The item's position before and after: equal when it was already the last open document.
    from_position = models.PositiveIntegerField()
    to_position = models.PositiveIntegerField()
    skipped_at = models.DateTimeField(default=timezone.now)
    # The one-time id of the form that asked for it: a replayed request skips nothing more.
    submission_id = models.UUIDField(null=True, blank=True, unique=True)

    def __str__(self) -> str:
        return f"skip of item {self.item_id} at {self.skipped_at:%Y-%m-%d %H:%M}"


class ModelConfig(models.Model):
    """A model judge's frozen configuration: everything that decides what it is asked and how its
    answer is read. A configuration is never edited: a change is a new configuration with a new
    model assessor (``assess.model_judging.model_config``), so every label says which
    configuration made it. The API key is not here, only the NAME of the environment variable
    the worker reads it from."""

    class LabelRule(models.TextChoices):
        EXACT = "exact", "The whole answer is a label's number"
        ONLY_INTEGER = "only-integer", "The answer holds exactly one integer"
        JSON = "json", 'A JSON object with an integer "label"'

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="model_configs")
    assessor = models.OneToOneField(Assessor, on_delete=models.PROTECT, related_name="model_config")
    # The rubric whose labels the prompt lists (and whose version its judgments carry).
    rubric_version = models.ForeignKey(
        "campaigns.RubricVersion", on_delete=models.PROTECT, related_name="+"
    )
    endpoint = models.CharField(max_length=500)
    model = models.CharField(max_length=200)
    prompt_template = models.TextField()
    prompt_sha256 = models.CharField(max_length=64)
    temperature = models.FloatField()
    seed = models.BigIntegerField(null=True, blank=True)
    max_tokens = models.PositiveIntegerField()
    label_rule = models.CharField(max_length=20, choices=LabelRule.choices)
    logprobs = models.BooleanField(default=False)
    api_key_env = models.CharField(max_length=100, blank=True)
    # sha256 of every field above (canonical JSON): the configuration's identity.
    fingerprint = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["campaign", "created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "fingerprint"], name="model_config_fingerprint_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.model} @ {self.endpoint} ({self.fingerprint[:8]})"


class ModelCall(models.Model):
    """One (configuration, topic, document) call: written (status ``sent``) and committed before
    the request leaves, completed after. The unique pair makes the job idempotent: a pair whose
    call has an answer is never asked again, and a ``sent`` row found by a later attempt (its
    worker died mid-call, the call may have been paid) becomes ``interrupted`` and is not
    re-sent unless an organiser asks for it."""

    class Status(models.TextChoices):
        SENT = "sent", "Sent, no answer yet"
        LABELLED = "labelled", "Labelled"
        UNPARSEABLE = "unparseable", "Answered, no label in the answer"
        FAILED = "failed", "Failed (no answer after retries)"
        INTERRUPTED = "interrupted", "Interrupted (worker lost mid-call)"

    config = models.ForeignKey(ModelConfig, on_delete=models.PROTECT, related_name="calls")
    topic = models.ForeignKey(Topic, on_delete=models.PROTECT, related_name="+")
    doc_id = models.CharField(max_length=ID_MAX_LENGTH)
    status = models.CharField(max_length=20, choices=Status.choices)
    job = models.ForeignKey(
        "campaigns.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    tries = models.PositiveIntegerField(default=0)  # HTTP requests made, retries included
    http_status = models.PositiveIntegerField(null=True, blank=True)
    response = models.TextField(blank=True)  # the raw body of the last answer
    label = models.IntegerField(null=True, blank=True)
    # {"0": p, "1": p, ...} from the endpoint's logprobs, when it sent them.
    probabilities = models.JSONField(null=True, blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    sent_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    seconds = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["config", "topic", "doc_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["config", "topic", "doc_id"], name="model_call_pair_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.topic_id} {self.doc_id} {self.status}"


class GullibilityCall(models.Model):
    """A gullibility check's call (assess/gullibility.py): a pair people judged non-relevant and
    the configuration labelled non-relevant too, asked again with the topic's query terms stuffed
    into the document (``variant`` says how). Its own table, apart from :class:`ModelCall`: a
    stuffed answer is never a judgment, never in qrels or agreement, and never counted with the
    configuration's ordinary calls. Idempotent as those are: one row per (configuration, pair,
    variant), committed as ``sent`` before its request leaves."""

    class Variant(models.TextChoices):
        TERMS_APPENDED = "terms-appended", "The topic's query terms appended to the document"

    Status = ModelCall.Status  # the same outcomes as an ordinary call's

    config = models.ForeignKey(
        ModelConfig, on_delete=models.PROTECT, related_name="gullibility_calls"
    )
    topic = models.ForeignKey(Topic, on_delete=models.PROTECT, related_name="+")
    doc_id = models.CharField(max_length=ID_MAX_LENGTH)
    variant = models.CharField(max_length=30, choices=Variant.choices)
    status = models.CharField(max_length=20, choices=ModelCall.Status.choices)
    job = models.ForeignKey(
        "campaigns.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The configuration's own label on the unstuffed document when the pair was chosen.
    original_label = models.IntegerField()
    tries = models.PositiveIntegerField(default=0)
    http_status = models.PositiveIntegerField(null=True, blank=True)
    response = models.TextField(blank=True)
    label = models.IntegerField(null=True, blank=True)  # the label given to the stuffed text
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    sent_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    seconds = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["config", "variant", "topic", "doc_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["config", "topic", "doc_id", "variant"],
                name="gullibility_call_pair_unique",
            )
        ]

    def __str__(self) -> str:
        return f"{self.topic_id} {self.doc_id} {self.variant} {self.status}"


class RepeatVerdict(models.Model):
    """An assessor's verdict on a planted repeat: the same document served again later in their
    order, unannounced. Kept apart from judgments: it is never a revision, never in qrels, and
    only measures the assessor's consistency (self-agreement, assess/repeats.py)."""

    item = models.OneToOneField(
        AssignmentItem, on_delete=models.CASCADE, related_name="repeat_verdict"
    )
    assessor = models.ForeignKey(Assessor, on_delete=models.PROTECT, related_name="+")
    # The verdict the repeat is compared with: the assessor's own on this pair, and its label
    # when the repeat was given (a revision made after it does not rewrite the comparison).
    judgment = models.ForeignKey(Judgment, on_delete=models.PROTECT, related_name="repeats")
    first_label = models.IntegerField()
    label = models.IntegerField()
    note = models.TextField(blank=True)
    unreadable = models.BooleanField(default=False)
    unsure = models.BooleanField(default=False)
    served_at = models.DateTimeField(null=True, blank=True)
    judged_at = models.DateTimeField(default=timezone.now)
    seconds_on_screen = models.FloatField(null=True, blank=True)
    active_seconds = models.FloatField(null=True, blank=True)
    # As on a judgment's revision: a resubmitted form finds its verdict stored, records nothing.
    submission_id = models.UUIDField(unique=True)

    def __str__(self) -> str:
        return f"repeat of {self.judgment_id}: {self.first_label} then {self.label}"


class GoldVerdict(models.Model):
    """An assessor's verdict on a gold-only item (a pair added to their order only as a check,
    assess/gold.py). Append-only, one row per verdict (``version`` 1, then revisions): kept
    apart from judgments, never in qrels, agreement or label counts; compared with the known
    label for the assessor's accuracy on gold."""

    item = models.ForeignKey(AssignmentItem, on_delete=models.CASCADE, related_name="+")
    assessor = models.ForeignKey(Assessor, on_delete=models.PROTECT, related_name="+")
    version = models.PositiveIntegerField()
    label = models.IntegerField()
    rubric_version = models.ForeignKey(
        "campaigns.RubricVersion", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    note = models.TextField(blank=True)
    unreadable = models.BooleanField(default=False)
    unsure = models.BooleanField(default=False)
    served_at = models.DateTimeField(null=True, blank=True)
    judged_at = models.DateTimeField(default=timezone.now)
    seconds_on_screen = models.FloatField(null=True, blank=True)
    active_seconds = models.FloatField(null=True, blank=True)
    # As on a judgment's revision: a resubmitted form finds its verdict stored, records nothing.
    submission_id = models.UUIDField(unique=True)

    class Meta:
        ordering = ["item", "version"]
        constraints = [
            models.UniqueConstraint(fields=["item", "version"], name="gold_verdict_version_unique")
        ]

    def __str__(self) -> str:
        return f"v{self.version} on gold item {self.item_id}: {self.label}"


class TopicProgress(models.Model):
    """Judged and total items of one topic in one assignment (withdrawn items not counted), kept
    by database triggers on AssignmentItem (migration 0006) for every writer alike: the judging
    answer reads two numbers instead of counting the topic's items on every verdict, whose cost
    grew with the topic's size."""

    assignment = models.ForeignKey(Assignment, on_delete=models.CASCADE, related_name="+")
    topic = models.ForeignKey(Topic, on_delete=models.CASCADE, related_name="+")
    total = models.IntegerField(default=0)
    judged = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["assignment", "topic"], name="topic_progress_unique")
        ]

    def __str__(self) -> str:
        return f"{self.judged}/{self.total} of topic {self.topic_id} in {self.assignment_id}"


class QueueProgress(models.Model):
    """Done and total entries of one topic of a pool's shared queue, kept by database triggers
    on QueueItem (migration 0008), so a queue assessor's answer reads a few numbers instead of
    counting the topic's queue on every verdict. The totals live in slot 0, written when the
    queue is built or changed; the done counts in the slot of the assessor who held the claim,
    so two assessors' verdicts never update one shared row (no lock taken across assessors).
    A topic's progress is the sum over its slots."""

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="+")
    topic = models.ForeignKey(Topic, on_delete=models.CASCADE, related_name="+")
    slot = models.BigIntegerField()  # the claimer's assessor id; 0: totals, unclaimed entries
    total = models.IntegerField(default=0)
    done = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["pool", "topic", "slot"], name="queue_progress_unique")
        ]

    def __str__(self) -> str:
        return f"{self.done}/{self.total} of topic {self.topic_id} in pool {self.pool_id}"


class HybridPlan(models.Model):
    """A pool's hybrid budget (assess/hybrid.py): people are sent first to the pairs a model
    assessor is least sure of, up to a budget per topic (:class:`HybridBudget`); the pairs they
    were not sent to can then be filled with the model's labels calibrated on theirs."""

    class Routing(models.TextChoices):
        UNCERTAIN = "uncertain", "Least certain first (learns from each verdict)"
        BOUNDARY = "boundary", "Nearest the threshold first"
        RANDOM = "random", "Random (for comparison)"

    pool = models.OneToOneField(Pool, on_delete=models.CASCADE, related_name="hybrid_plan")
    model = models.ForeignKey(Assessor, on_delete=models.PROTECT, related_name="+")
    routing = models.CharField(max_length=20, choices=Routing.choices, default=Routing.UNCERTAIN)
    # Strata from the model's probabilities of relevance (its logprobs) instead of its labels.
    probabilities = models.BooleanField(default=False)
    # The campaign's relevance threshold when the plan was set: the strata were cut by it.
    threshold = models.IntegerField()
    seed = models.BigIntegerField()
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    def __str__(self) -> str:
        return f"hybrid budget of pool v{self.pool.version} by {self.model}"


class HybridBudget(models.Model):
    """One topic's budget: a share (percent) or a count of its routed pairs for people."""

    plan = models.ForeignKey(HybridPlan, on_delete=models.CASCADE, related_name="budgets")
    topic = models.ForeignKey(Topic, on_delete=models.PROTECT, related_name="+")
    percent = models.DecimalField(max_digits=5, decimal_places=2, null=True, blank=True)
    count = models.PositiveIntegerField(null=True, blank=True)
    # The pool's pairs of the topic the model labelled (routed), and how many of them people are
    # sent to: the budget worked out when it was set.
    routed = models.PositiveIntegerField(default=0)
    allowed = models.PositiveIntegerField(default=0)
    filled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["plan", "topic"]
        constraints = [
            models.UniqueConstraint(fields=["plan", "topic"], name="hybrid_budget_topic_unique"),
            models.CheckConstraint(
                condition=Q(percent__isnull=True) ^ Q(count__isnull=True),
                name="hybrid_budget_share_or_count",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.allowed}/{self.routed} of topic {self.topic_id}"

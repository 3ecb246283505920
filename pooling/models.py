"""Runs and pools.

Storage layout (measured in bench/import_runs.py): one row per (run, topic) holding that topic's
ranked list in trec_eval order (score descending compared as trec_eval's 32-bit float, ties by
document id descending; see pooling.formats) — document ids
newline-joined, scores as packed float64, the file's rank column as packed int32. A 5M-line import
is 5,000 rows instead of 5M, and pooling or evaluation reads a run's topic in one fetch.
"""

from __future__ import annotations

from array import array

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from campaigns.models import ID_MAX_LENGTH, Campaign, Job, Topic, id_validator
from pooling.spec import PoolSpec


class RunQuerySet(models.QuerySet):
    def current(self) -> RunQuerySet:
        """Runs not replaced by a re-import of the same tag."""
        return self.filter(superseded_at__isnull=True)


class Run(models.Model):
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="runs")
    tag = models.CharField(max_length=ID_MAX_LENGTH, validators=[id_validator])
    source_name = models.CharField(max_length=255, blank=True)
    sha256 = models.CharField(max_length=64, blank=True)
    line_count = models.PositiveIntegerField(default=0)
    topic_count = models.PositiveIntegerField(default=0)
    imported_at = models.DateTimeField(auto_now_add=True)
    imported_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # A replaced run is kept, not deleted: pools built from it must stay reproducible.
    superseded_at = models.DateTimeField(null=True, blank=True)

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["campaign", "tag", "-imported_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "tag"],
                condition=Q(superseded_at__isnull=True),
                name="run_current_tag_unique",
            )
        ]

    def __str__(self) -> str:
        return self.tag


class RunTopic(models.Model):
    """One topic of one run: its ranked list, best first, in trec_eval order."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="topics")
    topic = models.ForeignKey(Topic, on_delete=models.PROTECT, related_name="+")
    docids = models.TextField()
    scores = models.BinaryField()
    ranks = models.BinaryField()
    length = models.PositiveIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "topic"], name="run_topic_unique")]

    def __str__(self) -> str:
        return f"{self.run_id}/{self.topic_id}"

    @staticmethod
    def pack_scores(scores: list[float]) -> bytes:
        return array("d", scores).tobytes()

    @staticmethod
    def pack_ranks(ranks: list[int]) -> bytes:
        return array("q", ranks).tobytes()

    def doc_list(self) -> list[str]:
        return self.docids.split("\n") if self.docids else []

    def score_list(self) -> list[float]:
        values = array("d")
        values.frombytes(bytes(self.scores))
        return values.tolist()

    def rank_list(self) -> list[int]:
        values = array("q")
        values.frombytes(bytes(self.ranks))
        return values.tolist()


BUILD_JOB_KIND = "build_pool"  # the kind of the Job that builds a pool (pooling.pools)


class PoolQuerySet(models.QuerySet):
    def built(self) -> PoolQuerySet:
        """Pools whose build finished: their entries and statistics are stored."""
        return self.filter(built_at__isnull=False)


class Pool(models.Model):
    """A built pool is immutable: it records everything needed to rebuild it exactly, and
    building again makes a new version.

    Its build's status is its job's (``job``, a :class:`campaigns.models.Job`): the job row is
    the only record of it, and :attr:`status` reads it. ``built_at`` is set in the transaction
    that stores the entries (and the job's success), so a pool is built exactly when it has a
    ``built_at``."""

    class Strategy(models.TextChoices):
        DEPTH = "depth", "Depth-k"
        SAMPLE = "sample", "Stratified sample"
        RRF = "rrf", "Reciprocal rank fusion"
        RBP = "rbp", "Rank-biased precision"

    class Status(models.TextChoices):
        BUILDING = "building", "Building"
        BUILT = "built", "Built"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="pools")
    version = models.PositiveIntegerField()
    strategy = models.CharField(max_length=20, choices=Strategy.choices)
    # Strategy parameters, the ranked-list order ("trec_eval" or "file_rank"), and whether the
    # pool is residual (only pairs not yet judged when it was built).
    params = models.JSONField(default=dict)
    runs = models.ManyToManyField(Run, related_name="pools")
    topics = models.ManyToManyField(Topic, related_name="+", blank=True)
    seed = models.BigIntegerField(null=True, blank=True)
    software_version = models.CharField(max_length=40)
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    note = models.CharField(max_length=200, blank=True)
    size = models.PositiveIntegerField(default=0)
    stats = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    built_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    objects = PoolQuerySet.as_manager()

    class Meta:
        ordering = ["campaign", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "version"], name="pool_version_unique")
        ]

    def __str__(self) -> str:
        return f"{self.campaign.slug} pool v{self.version} ({self.strategy})"

    @property
    def status(self) -> str:
        """Built once the entries are stored (``built_at``); otherwise what the build job says:
        failed or cancelled when it ended so, building while it is queued or running (a failed
        job retried is building again), and building before it is queued."""
        if self.built_at is not None:
            return Pool.Status.BUILT
        job = self.build_job()
        if job is not None and job.status in (Job.Status.FAILED, Job.Status.CANCELLED):
            return Pool.Status(job.status)
        return Pool.Status.BUILDING

    @status.setter
    def status(self, value: str) -> None:
        """For a pool made built without a build job (fixtures, benchmarks):
        ``Pool(status=Pool.Status.BUILT)`` records it built now. A failed or cancelled build is
        its job's to record."""
        if value == Pool.Status.BUILT:
            self.built_at = self.built_at or timezone.now()
        elif value == Pool.Status.BUILDING:
            self.built_at = None
        else:
            raise ValueError(f"A pool's build is {value} only through its job.")

    def build_job(self) -> Job | None:
        """The job that builds the pool: ``job``, or (for a pool whose job was made apart from
        it) the latest build job naming it in its parameters."""
        if self.job_id is not None:
            return self.job
        if self.pk is None:
            return None
        return Job.objects.filter(kind=BUILD_JOB_KIND, params__pool=self.pk).order_by("-pk").first()

    def get_status_display(self) -> str:
        return Pool.Status(self.status).label

    @property
    def error(self) -> str:
        """Why the build did not finish (the job's error), or empty."""
        if self.status in (Pool.Status.FAILED, Pool.Status.CANCELLED):
            return self.build_job().error  # type: ignore[union-attr]
        return ""

    @property
    def spec(self) -> PoolSpec:
        """The pool's definition, typed (pooling.spec): read its parameters through this."""
        return PoolSpec.from_params(self.strategy, self.params, self.seed)

    @property
    def is_residual(self) -> bool:
        return self.spec.residual

    def describe(self) -> str:
        """Strategy and parameters in one line, for tables and the exported documentation."""
        return self.spec.describe()


class PoolEntry(models.Model):
    """One (topic, document) pair of a pool, with its provenance. Provenance never leaves the
    organiser's side: assessors see neither runs nor ranks nor strata."""

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="entries")
    topic = models.ForeignKey(Topic, on_delete=models.PROTECT, related_name="+")
    doc_id = models.CharField(max_length=ID_MAX_LENGTH)
    # [[run id, 1-based rank in the order used], ...]
    provenance = models.JSONField(default=list)
    stratum = models.PositiveSmallIntegerField(null=True, blank=True)
    inclusion_probability = models.FloatField(null=True, blank=True)
    # False for pooled-but-unsampled pairs of a sampled pool (exported as -1 when asked).
    sampled = models.BooleanField(default=True)
    fused_score = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["pool", "topic", "doc_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["pool", "topic", "doc_id"], name="pool_entry_pair_unique"
            )
        ]
        indexes = [models.Index(fields=["pool", "topic", "sampled"], name="pool_entry_topic_idx")]

    def __str__(self) -> str:
        return f"{self.topic_id} {self.doc_id}"


class AdaptiveTopic(models.Model):
    """One topic of a pool judged in adaptive order (pooling.adaptive): what the order has to
    remember beyond the judgments themselves. Locked (``SELECT … FOR UPDATE``) while the topic's
    next document is chosen, so concurrent assessors are served one after another."""

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="adaptive_topics")
    topic = models.ForeignKey(Topic, on_delete=models.PROTECT, related_name="+")
    # doc id -> run key whose turn chose it (move-to-front and pulled credit need it; assessors
    # never see it).
    chosen_by = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["pool", "topic"], name="adaptive_topic_unique")
        ]

    def __str__(self) -> str:
        return f"{self.pool_id}/{self.topic_id}"

"""Exports: bundles built by a job and kept in the database, so that a web process on any
machine can serve what a worker built (like campaigns.Upload and its chunks)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from campaigns.models import Campaign, Job


class Export(models.Model):
    """One export bundle (a zip) of a campaign: the options it was built with, the job that
    built it, and its bytes in :class:`ExportChunk` rows."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="exports")
    # policy, per_assessor, unjudged, binary, include_imported, include_models, include_filled,
    # usernames, pool (version)
    options = models.JSONField(default=dict)
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    file_name = models.CharField(max_length=255)
    size = models.PositiveBigIntegerField(default=0)
    sha256 = models.CharField(max_length=64, blank=True)
    # The bundle's README.md, for the preview on the export page.
    readme = models.TextField(blank=True)
    # Counts for the list of exports (judgments, qrels lines, assessors, fraction judged).
    summary = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.file_name

    @property
    def is_ready(self) -> bool:
        """Built completely: the job is done and the bytes are stored."""
        return bool(self.sha256) and self.job is not None and self.job.status == Job.Status.DONE


class ExportChunk(models.Model):
    export = models.ForeignKey(Export, on_delete=models.CASCADE, related_name="chunks")
    seq = models.PositiveIntegerField()
    data = models.BinaryField()

    class Meta:
        ordering = ["export", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["export", "seq"], name="export_chunk_seq_unique")
        ]

    def __str__(self) -> str:
        return f"{self.export_id}#{self.seq}"

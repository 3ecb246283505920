"""Read-mostly admin for runs and pools: both are records of what happened (a run as imported, a
pool as built), so the admin shows them and does not offer to edit their contents."""

from django.contrib import admin

from pooling import models


@admin.register(models.Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["tag", "campaign", "topic_count", "line_count", "imported_at", "superseded_at"]
    list_filter = ["campaign"]
    search_fields = ["tag", "source_name"]
    readonly_fields = [
        "campaign",
        "tag",
        "source_name",
        "sha256",
        "line_count",
        "topic_count",
        "imported_at",
        "imported_by",
    ]


@admin.register(models.Pool)
class PoolAdmin(admin.ModelAdmin):
    list_display = ["campaign", "version", "strategy", "status", "size", "created_at", "built_at"]
    list_filter = ["campaign", "strategy", "job__status"]
    readonly_fields = [
        "campaign",
        "version",
        "strategy",
        "params",
        "seed",
        "software_version",
        "job",
        "size",
        "stats",
        "created_at",
        "built_at",
        "created_by",
        "runs",
        "topics",
    ]

    def has_add_permission(self, request) -> bool:
        return False  # pools are defined on the campaign's pages or with `build_pool`


@admin.register(models.PoolEntry)
class PoolEntryAdmin(admin.ModelAdmin):
    list_display = ["pool", "topic", "doc_id", "sampled", "stratum", "fused_score"]
    list_filter = ["pool__campaign", "sampled"]
    search_fields = ["doc_id"]
    list_select_related = ["pool__campaign", "topic"]
    raw_id_fields = ["pool", "topic"]
    readonly_fields = [
        "pool",
        "topic",
        "doc_id",
        "provenance",
        "stratum",
        "inclusion_probability",
        "sampled",
        "fused_score",
    ]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

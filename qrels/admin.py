from django.contrib import admin

from qrels.models import Export


@admin.register(Export)
class ExportAdmin(admin.ModelAdmin):
    list_display = ("file_name", "campaign", "created_at", "created_by", "size", "sha256")
    list_filter = ("campaign",)
    readonly_fields = (
        "campaign",
        "options",
        "job",
        "file_name",
        "size",
        "sha256",
        "summary",
        "readme",
        "created_at",
        "finished_at",
        "created_by",
    )
    search_fields = ("file_name", "sha256")

from django.contrib import admin

from campaigns import models


class LabelInline(admin.TabularInline):
    model = models.Label
    extra = 0


@admin.register(models.Campaign)
class CampaignAdmin(admin.ModelAdmin):
    list_display = ["slug", "title", "relevance_threshold", "created_at"]
    search_fields = ["slug", "title"]


@admin.register(models.RubricVersion)
class RubricVersionAdmin(admin.ModelAdmin):
    list_display = ["campaign", "number", "note", "created_at"]
    list_filter = ["campaign"]
    inlines = [LabelInline]


@admin.register(models.Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["campaign", "user", "role"]
    list_filter = ["campaign", "role"]


@admin.register(models.Assessor)
class AssessorAdmin(admin.ModelAdmin):
    list_display = ["campaign", "name", "kind", "pseudonym", "user"]
    list_filter = ["campaign", "kind"]


@admin.register(models.Topic)
class TopicAdmin(admin.ModelAdmin):
    list_display = ["campaign", "topic_id", "title"]
    list_filter = ["campaign"]
    search_fields = ["topic_id", "title"]


@admin.register(models.Document)
class DocumentAdmin(admin.ModelAdmin):
    list_display = ["campaign", "doc_id", "title"]
    list_filter = ["campaign"]
    search_fields = ["doc_id"]


@admin.register(models.Judgment)
class JudgmentAdmin(admin.ModelAdmin):
    list_display = ["campaign", "topic", "doc_id", "assessor", "label", "version", "judged_at"]
    list_filter = ["campaign", "source"]
    search_fields = ["doc_id"]
    # History is append-only; the admin must not become a way around it.
    readonly_fields = [f.name for f in models.Judgment._meta.fields]

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(models.Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["id", "campaign", "kind", "status", "attempts", "created_at", "finished_at"]
    list_filter = ["status", "kind"]

from django.apps import AppConfig


class CampaignsConfig(AppConfig):
    name = "campaigns"
    verbose_name = "Campaigns"

    def ready(self) -> None:
        # Jobs are sent by task name: the web process must have the tasks registered too.
        from campaigns import tasks  # noqa: F401
        from campaigns.uploads import Importer, register

        register(
            Importer(
                kind="topics",
                title="Topics",
                task_name="campaigns.tasks.import_topics_task",
                help="TREC SGML (<top> … </top>), TSV (id, title), JSONL, or SMART (.I/.W).",
                formats=("trec", "tsv", "jsonl", "smart"),
                options=("format", "positional_ids", "encoding"),
            )
        )

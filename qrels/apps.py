from django.apps import AppConfig


class QrelsConfig(AppConfig):
    name = "qrels"
    verbose_name = "Qrels, exports and reports"

    def ready(self) -> None:
        # Jobs are sent by task name: the web process must have the tasks registered too.
        from campaigns.uploads import Importer, register
        from qrels import tasks  # noqa: F401

        register(
            Importer(
                kind="qrels",
                title="Qrels (earlier judgments)",
                task_name="qrels.tasks.import_qrels_task",
                help="topic iteration docid label; stored as the judgments of a named source "
                "(earlier qrels, or a model's labels: kept apart and never shown to assessors).",
                options=("assessor", "kind", "on_conflict", "encoding"),
            )
        )

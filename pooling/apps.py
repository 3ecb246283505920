from django.apps import AppConfig


class PoolingConfig(AppConfig):
    name = "pooling"
    verbose_name = "Runs and pools"

    def ready(self) -> None:
        # Jobs are sent by task name: the web process must have the tasks registered too.
        from campaigns.uploads import Importer, register
        from pooling import tasks  # noqa: F401

        # Documents are registered here rather than in campaigns because "only pooled documents"
        # needs the pools.
        register(
            Importer(
                kind="documents",
                title="Documents",
                task_name="pooling.tasks.import_documents_task",
                help="TREC SGML (<DOC><DOCNO>…), JSONL (id, title, text), TSV, or SMART; "
                "gzip allowed.",
                formats=("trec", "jsonl", "tsv", "smart"),
                options=("format", "only_pooled", "encoding"),
            )
        )
        register(
            Importer(
                kind="runs",
                title="Runs",
                task_name="pooling.tasks.import_runs_task",
                help="TREC run files (topic Q0 docid rank score tag), several at once; "
                "gzip allowed.",
                multiple=True,
                options=("replace", "split_tags", "encoding"),
            )
        )

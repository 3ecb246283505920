"""Store the ranked lists of run topics uncompressed on PostgreSQL (TOAST storage EXTERNAL).

Measured with bench/import_runs.py (100 runs x 50 topics x 1000 documents): PostgreSQL's default
pglz compression of these columns took most of the import's time (the packed int64 ranks and the
newline-joined docids compress slowly; the float64 scores do not compress at all), while storing
them uncompressed costs about 60% more disk. Uncompressed values are also read without
decompression by pooling and evaluation. Values stored before this migration stay as they are;
SQLite has no TOAST, so there is nothing to do there.
"""

from django.db import migrations

COLUMNS = ("docids", "scores", "ranks")


def _set_storage(apps, schema_editor, storage: str) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    table = schema_editor.quote_name(apps.get_model("pooling", "RunTopic")._meta.db_table)
    changes = ", ".join(
        f"ALTER COLUMN {schema_editor.quote_name(column)} SET STORAGE {storage}"
        for column in COLUMNS
    )
    schema_editor.execute(f"ALTER TABLE {table} {changes}")


def uncompressed(apps, schema_editor) -> None:
    _set_storage(apps, schema_editor, "EXTERNAL")


def compressed(apps, schema_editor) -> None:
    _set_storage(apps, schema_editor, "EXTENDED")


class Migration(migrations.Migration):
    dependencies = [("pooling", "0001_initial")]

    operations = [migrations.RunPython(uncompressed, compressed)]

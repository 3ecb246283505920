"""Indexes for searching a campaign's documents (the organisers' Documents page), PostgreSQL only.

- ``document_words_idx``: GIN over the words of a document's title and body (the expression of
  ``campaigns.models.document_words``, repeated here as a migration must not follow later code;
  tests/campaigns/test_document_search.py checks the planner uses it), so a word search reads
  the documents holding the words, not every document of the campaign.
- ``document_id_prefix_idx``: (campaign, doc_id) with ``varchar_pattern_ops``, so an id prefix
  (``LIKE 'abc%'``) is an index range whatever the database's collation (the unique index on
  (campaign, doc_id) serves ``LIKE`` only under the C collation).

SQLite has neither: its search is a scan, fine at a laptop's scale. The indexes are created and
dropped with ``IF [NOT] EXISTS`` so the migration can be applied and reversed on any database.
"""

from django.db import migrations

# The same text as campaigns.models.document_words() compiles to (Django's SearchVector:
# each field cast to text and coalesced, joined by ' ', in to_tsvector with the config).
WORDS = (
    "to_tsvector('simple'::regconfig, "
    "COALESCE((LEFT(\"title\", 100000))::text, '') || ' ' || "
    "COALESCE((LEFT(\"body\", 100000))::text, ''))"
)

CREATE = [
    f'CREATE INDEX IF NOT EXISTS document_words_idx ON "campaigns_document" USING gin ({WORDS})',
    'CREATE INDEX IF NOT EXISTS document_id_prefix_idx ON "campaigns_document" '
    '("campaign_id", "doc_id" varchar_pattern_ops)',
]
DROP = [
    "DROP INDEX IF EXISTS document_words_idx",
    "DROP INDEX IF EXISTS document_id_prefix_idx",
]


def _run(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return
        for statement in statements:
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0009_assessor_kind_filled"),
    ]

    operations = [
        migrations.RunPython(_run(CREATE), _run(DROP), elidable=False),
    ]

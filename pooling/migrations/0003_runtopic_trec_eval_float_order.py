"""Put every stored ranked list in trec_eval's order at trec_eval's precision.

Ranked lists used to be ordered by their scores as 64-bit floats. trec_eval, and pytrec_eval
with it, compare a run's scores as 32-bit floats, so scores that differ only beyond a float's
precision tie there and are ordered by document id descending; a depth-k pool cut from the old
order could hold documents outside the top k that trec_eval evaluates. Lists whose order changes
(in TREC-COVID round 1: topics of 2 of the 143 runs) are rewritten here. Pools already built are
records of what was built and stay as they are.
"""

from array import array

from django.db import migrations

BATCH = 500


def _trec_eval_positions(docids: list[str], scores: array) -> list[int]:
    keys = array("f", scores).tolist()
    return sorted(range(len(docids)), key=lambda i: (keys[i], docids[i]), reverse=True)


def reorder(apps, schema_editor) -> None:
    RunTopic = apps.get_model("pooling", "RunTopic")
    pks = list(RunTopic.objects.order_by("pk").values_list("pk", flat=True))
    for start in range(0, len(pks), BATCH):
        changed = []
        for row in RunTopic.objects.filter(pk__in=pks[start : start + BATCH]).order_by("pk"):
            if not row.docids:
                continue
            docids = row.docids.split("\n")
            scores, ranks = array("d"), array("q")
            scores.frombytes(bytes(row.scores))
            ranks.frombytes(bytes(row.ranks))
            positions = _trec_eval_positions(docids, scores)
            if positions == list(range(len(positions))):
                continue
            row.docids = "\n".join(docids[i] for i in positions)
            row.scores = array("d", (scores[i] for i in positions)).tobytes()
            row.ranks = array("q", (ranks[i] for i in positions)).tobytes()
            changed.append(row)
        if changed:
            RunTopic.objects.bulk_update(changed, ["docids", "scores", "ranks"])


class Migration(migrations.Migration):
    dependencies = [("pooling", "0002_runtopic_storage_external")]

    operations = [migrations.RunPython(reorder, migrations.RunPython.noop, elidable=True)]

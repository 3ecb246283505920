"""A pool's build status is its job's (issue 17): the mirrored ``status`` column goes. A pool
recorded built keeps that as ``built_at`` (every build sets it; pools made built by hand may
lack it); failed and cancelled builds are already recorded so by their jobs."""

from django.db import migrations
from django.db.models import F


def built_at_for_built_pools(apps, schema_editor):
    Pool = apps.get_model("pooling", "Pool")
    Pool.objects.filter(status="built", built_at__isnull=True).update(built_at=F("created_at"))


def status_from_built_at(apps, schema_editor):
    Pool = apps.get_model("pooling", "Pool")
    Pool.objects.filter(built_at__isnull=False).update(status="built")
    for status in ("failed", "cancelled"):
        Pool.objects.filter(built_at__isnull=True, job__status=status).update(status=status)


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0005_topic_original_id_judgment_iteration"),
        ("pooling", "0004_adaptive_topic"),
    ]

    operations = [
        migrations.RunPython(built_at_for_built_pools, status_from_built_at),
        migrations.RemoveField(model_name="pool", name="status"),
    ]

"""``manage.py demo``: a campaign worth judging, built from files that ship with Pooljudge.

The collection is the documentation of the Python standard library (2,373 docstrings), with
twenty TREC-style topics and ten runs from different retrieval systems (see pooljudge/demo/).
Everything goes through the normal paths: the importers, a depth pool built by the pool job, and
assignments with overlap on two topics so the agreement pages have something to show.

Idempotent: a second run finds the campaign built and only prints the logins.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from assess.assignments import assign
from assess.models import Assignment
from campaigns.imports import import_documents, import_topics
from campaigns.management.commands.local_accounts import ensure_account
from campaigns.members import add_member
from campaigns.models import Campaign, Job, LabelSpec, Membership
from pooling.imports import import_runs
from pooling.models import Pool
from pooling.pools import create_pool

DEMO_DIR = Path(settings.BASE_DIR) / "pooljudge" / "demo"
SLUG = "pydocs"


class Command(BaseCommand):
    help = "Create the demo campaign (standard-library docs, 20 topics, 10 runs) and its logins."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--url", default="http://127.0.0.1:8000/", help="Printed address.")

    def handle(self, *args, url: str, **options) -> None:
        organiser, organiser_password = ensure_account("organiser", can_create_campaigns=True)
        plan = json.loads((DEMO_DIR / "overlap.json").read_text())
        assessors = {name: ensure_account(name) for name in plan["assessors"]}
        campaign = Campaign.objects.filter(slug=SLUG).first()
        if campaign is None or not campaign.pools.built().exists():
            campaign = self._build(organiser, assessors, plan)
        elif not Assignment.objects.filter(campaign=campaign).exists():
            self._assign(campaign, assessors, plan)
        else:
            self.stdout.write(f"The demo campaign {SLUG!r} is ready (nothing changed).")
        self.stdout.write("")
        self.stdout.write(f"Pooljudge: {url}")
        self.stdout.write(f"  organiser  {organiser_password:<16} (campaign pages, pools, exports)")
        for name, (_, password) in assessors.items():
            self.stdout.write(f"  {name:<10} {password:<16} (assessor)")
        self.stdout.write("Logins are kept in " + str(settings.DATA_DIR / "local-accounts.json"))

    def _build(self, organiser, assessors, plan) -> Campaign:
        rubric = json.loads((DEMO_DIR / "rubric.json").read_text())
        with transaction.atomic():
            campaign, _created = Campaign.objects.get_or_create(
                slug=SLUG,
                defaults={
                    "title": rubric["title"],
                    "description": rubric["description"],
                    "guidelines": rubric["guidelines"],
                    "relevance_threshold": rubric["threshold"],
                    "created_by": organiser,
                },
            )
            if not campaign.rubric_versions.exists():
                labels = [
                    LabelSpec(
                        label["value"],
                        label["name"],
                        label["description"],
                        label["example"],
                        label["key"],
                    )
                    for label in rubric["labels"]
                ]
                campaign.save_rubric(
                    labels, by=organiser, note="Demo rubric", threshold=rubric["threshold"]
                )
            add_member(campaign=campaign, user=organiser, role=Membership.Role.ORGANISER)
            for user, _ in assessors.values():
                add_member(campaign=campaign, user=user, role=Membership.Role.ASSESSOR)
        self.stdout.write("Importing the demo topics, documents and runs …")
        if not campaign.topics.exists():
            summary = import_topics(
                campaign=campaign, source=str(DEMO_DIR / "topics.xml"), name="topics.xml"
            )
            self.stdout.write("  " + summary.message())
        if not campaign.documents.exists():
            summary = import_documents(
                campaign=campaign,
                source=str(DEMO_DIR / "documents.jsonl.gz"),
                name="documents.jsonl.gz",
            )
            self.stdout.write("  " + summary.message())
        if not campaign.runs.exists():
            runs = sorted((DEMO_DIR / "runs").glob("*.run.gz"))
            summary = import_runs(
                campaign=campaign,
                sources=[(path.name, str(path)) for path in runs],
                user=organiser,
            )
            self.stdout.write("  " + summary.message())
        pool = campaign.pools.built().first()
        if pool is None:
            pool = self._build_pool(campaign, organiser, plan["depth"])
        self._assign(campaign, assessors, plan)
        return campaign

    def _build_pool(self, campaign: Campaign, organiser, depth: int) -> Pool:
        self.stdout.write(f"Building a depth-{depth} pool (a background job) …")
        with transaction.atomic():
            pool = create_pool(
                campaign=campaign,
                strategy=Pool.Strategy.DEPTH,
                params={"depth": depth},
                note="Demo pool over all ten runs",
                user=organiser,
            )
        job = pool.job
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            job.refresh_from_db()
            if job.is_final:
                break
            time.sleep(0.3)
        pool.refresh_from_db()
        if pool.status != Pool.Status.BUILT:
            raise CommandError(
                f"The demo pool did not build (job {job.pk} {job.status}: "
                f"{job.error or 'waiting'}). "
                "Is a Celery worker running for this database?"
            )
        if job.status != Job.Status.DONE:
            raise CommandError(f"Pool job {job.pk} ended {job.status}: {job.error}")
        self.stdout.write(f"  Pool v{pool.version}: {pool.size} documents over 20 topics.")
        return pool

    def _assign(self, campaign: Campaign, assessors, plan) -> None:
        pool = campaign.pools.built().order_by("version").first()
        overlap = set(plan["overlap_topics"])
        names = list(plan["primary"])
        with transaction.atomic():
            for index, name in enumerate(names):
                user = assessors[name][0]
                partner = assessors[names[(index + 1) % len(names)]][0]
                topics = list(campaign.topics.filter(topic_id__in=plan["primary"][name]))
                shared = [t for t in topics if t.topic_id in overlap]
                assign(
                    campaign=campaign,
                    pool=pool,
                    user=user,
                    topics=topics,
                    seed=2026 + index,
                    overlap=1.0 if shared else None,
                    overlap_topics=shared or None,
                    partner=partner if shared else None,
                )
        spans = [
            f"{name} topics {plan['primary'][name][0]}-{plan['primary'][name][-1]}"
            for name in names
        ]
        self.stdout.write(
            f"Assigned {' and '.join(spans)}; both judge topics {' and '.join(sorted(overlap))}."
        )

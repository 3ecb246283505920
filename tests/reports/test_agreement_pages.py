"""The agreement pages: who may see them, seed 000's worked examples through the pages and their
downloads, graded and binary labels, the group statistics, and the empty state."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.urls import reverse

from campaigns.members import add_member
from campaigns.models import Assessor
from tests.reports import (
    DIFFERENT_RATES,
    RARE,
    TEXTBOOK,
    binary_campaign,
    judge,
    login,
    two_judges,
)

pytestmark = pytest.mark.django_db


def agreement_url(campaign, **query):
    url = reverse("qrels:agreement", args=[campaign.slug])
    return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def pair_url(campaign, a, b, **query):
    url = reverse("qrels:agreement_pair", args=[campaign.slug, a.pk, b.pk])
    return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


@pytest.fixture
def seed_campaign(organiser):
    campaign = binary_campaign()
    add_member(campaign=campaign, user=organiser, role="organiser")
    return campaign


def pair_json(client, campaign, a, b, **query) -> dict:
    response = client.get(pair_url(campaign, a, b, format="json", **query))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"].startswith("attachment;")
    (pair,) = json.loads(response.content)["pairs"]
    return pair


class TestWhoMaySee:
    def test_the_organiser_sees_the_reports_tab_and_pages(self, client, organiser, campaign):
        login(client, organiser)
        for name in ("qrels:reports", "qrels:agreement"):
            response = client.get(reverse(name, args=[campaign.slug]))
            assert response.status_code == 200
            assert b'aria-current="page">Reports</a>' in response.content

    @pytest.mark.parametrize("who", ["assessor_a", "outsider", "other_organiser"])
    def test_anyone_else_gets_404(self, client, campaign, who, request):
        login(client, request.getfixturevalue(who))
        make_pair = two_judges(campaign, TEXTBOOK)
        for url in (
            reverse("qrels:reports", args=[campaign.slug]),
            agreement_url(campaign),
            agreement_url(campaign, format="json"),
            pair_url(campaign, *make_pair),
            pair_url(campaign, *make_pair, format="csv"),
        ):
            assert client.get(url).status_code == 404, url

    def test_anonymous_visitors_are_sent_to_log_in(self, client, campaign):
        for url in (agreement_url(campaign), reverse("qrels:reports", args=[campaign.slug])):
            response = client.get(url)
            assert response.status_code == 302
            assert response["Location"].startswith(reverse("login"))

    def test_assessors_of_another_campaign_are_404_on_the_pair_page(
        self, client, organiser, campaign, other_campaign
    ):
        a, b = two_judges(other_campaign, TEXTBOOK)
        login(client, organiser)
        assert client.get(pair_url(campaign, a, b)).status_code == 404
        assert client.get(pair_url(other_campaign, a, b)).status_code == 404


class TestSeedExamples:
    """Seed 000's numbers, from judgments in the database to the page and its downloads."""

    def test_the_textbook_pair_has_kappa_0776_both_ways(self, client, organiser, seed_campaign):
        a, b = two_judges(seed_campaign, TEXTBOOK)
        login(client, organiser)
        pair = pair_json(client, seed_campaign, a, b)
        assert pair["n"] == 400
        assert pair["observed"] == pytest.approx(0.925)
        assert round(pair["pooled_kappa"], 3) == 0.776
        assert round(pair["cohen_kappa"], 3) == 0.776
        assert pair["confusion"] == [[70, 10], [20, 300]]  # labels 0, 1: rows judge1
        assert set(pair["ci95"]) >= {"cohen_kappa", "pooled_kappa", "observed"}
        low, high = pair["ci95"]["cohen_kappa"]
        assert low < pair["cohen_kappa"] < high
        assert sorted(pair["per_topic"]) == ["1", "2", "3", "4"]

        page = client.get(pair_url(seed_campaign, a, b)).content.decode()
        assert "0.776" in page
        assert "0.925" in page
        assert 'role="img"' in page
        assert "<title" in page
        assert "judge1 and judge2" in page

    def test_judges_with_different_rates_part_company(self, client, organiser, seed_campaign):
        a, b = two_judges(seed_campaign, DIFFERENT_RATES)
        login(client, organiser)
        pair = pair_json(client, seed_campaign, a, b)
        assert pair["observed"] == pytest.approx(0.85)
        assert round(pair["cohen_kappa"], 3) == 0.216
        assert round(pair["pooled_kappa"], 3) == 0.167
        page = client.get(pair_url(seed_campaign, a, b)).content.decode()
        assert "0.216" in page
        assert "0.167" in page

    def test_rare_relevance_gives_a_dubious_kappa(self, client, organiser, seed_campaign):
        a, b = two_judges(seed_campaign, RARE)
        login(client, organiser)
        pair = pair_json(client, seed_campaign, a, b)
        assert pair["observed"] == pytest.approx(0.925)
        assert round(pair["pooled_kappa"], 2) == 0.36
        assert round(pair["cohen_kappa"], 2) == 0.36
        assert pair["relevant_overlap"] == pytest.approx(10 / 40)
        matrix = client.get(agreement_url(seed_campaign)).content.decode()
        assert "kappa-dubious" in matrix
        assert "0.36" in matrix

    def test_the_matrix_and_its_csv(self, client, organiser, seed_campaign):
        two_judges(seed_campaign, TEXTBOOK)
        login(client, organiser)
        page = client.get(agreement_url(seed_campaign)).content.decode()
        assert "kappa-fair" in page  # 0.776 is in the fair band
        assert "n 400" in page
        response = client.get(agreement_url(seed_campaign, format="csv"))
        assert response["Content-Type"] == "text/csv; charset=utf-8"
        rows = list(csv.DictReader(io.StringIO(response.content.decode())))
        overall = [row for row in rows if row["topic"] == "all"]
        assert len(overall) == 1
        assert overall[0]["assessor_a"] == "judge1"
        assert round(float(overall[0]["cohen_kappa"]), 3) == 0.776
        assert len(rows) == 1 + 4  # overall and four topics


class TestChoices:
    def test_graded_and_binary_labels(self, client, organiser, campaign):
        # graded3 scale (0, 1, 2), threshold 1: disagreements between 1 and 2 vanish in binary.
        from tests.factories import make_topics

        make_topics(campaign, ["7"])
        a = judge(campaign, "x", [("7", f"d{i}", [0, 1, 2, 2, 1, 0][i % 6]) for i in range(60)])
        b = judge(campaign, "y", [("7", f"d{i}", [0, 2, 1, 2, 1, 0][i % 6]) for i in range(60)])
        login(client, organiser)
        graded = pair_json(client, campaign, a, b)
        assert graded["labels"] == [0, 1, 2]
        assert graded["weighted_kappa_linear"] is not None
        assert graded["weighted_kappa_quadratic"] > graded["cohen_kappa"]
        binary = pair_json(client, campaign, a, b, labels="binary")
        assert binary["labels"] == [0, 1]
        assert binary["cohen_kappa"] == pytest.approx(1.0)
        assert binary["weighted_kappa_linear"] is None
        page = client.get(pair_url(campaign, a, b)).content.decode()
        assert "Weighted kappa, quadratic" in page

    def test_three_assessors_get_fleiss_and_krippendorff(self, client, organiser, seed_campaign):
        two_judges(seed_campaign, TEXTBOOK)
        verdicts = [(f"{1 + n % 4}", f"doc{n:04d}", int(n % 3 == 0)) for n in range(400)]
        judge(seed_campaign, "judge3", verdicts)
        login(client, organiser)
        page = client.get(agreement_url(seed_campaign)).content.decode()
        assert "Fleiss&#x27; kappa" in page or "Fleiss' kappa" in page
        assert "Krippendorff" in page
        data = json.loads(client.get(agreement_url(seed_campaign, format="json")).content)
        assert data["group"]["items"] == 400
        assert data["group"]["fleiss_raters"] == 3
        assert len(data["pairs"]) == 3

    def test_choosing_assessors_narrows_the_matrix(self, client, organiser, seed_campaign):
        a, _b = two_judges(seed_campaign, TEXTBOOK)
        c = judge(seed_campaign, "judge3", [("1", "doc0000", 1)])
        login(client, organiser)
        data = json.loads(
            client.get(
                agreement_url(seed_campaign, assessors=a.pk, format="json") + f"&assessors={c.pk}"
            ).content
        )
        assert [x["name"] for x in data["assessors"]] == ["judge1", "judge3"]
        (pair,) = data["pairs"]
        assert pair["n"] == 1
        assert pair["small_n"] is True
        page = client.get(agreement_url(seed_campaign, assessors=a.pk) + f"&assessors={c.pk}")
        assert "too few pairs" in page.content.decode() or "fewer than" in page.content.decode()

    def test_an_unknown_assessor_choice_is_a_form_error(self, client, organiser, seed_campaign):
        two_judges(seed_campaign, TEXTBOOK)
        login(client, organiser)
        response = client.get(agreement_url(seed_campaign, assessors=999999))
        assert response.status_code == 400
        assert b'role="alert"' in response.content


class TestEmptyState:
    def test_no_overlap_says_what_to_do(self, client, organiser, campaign):
        login(client, organiser)
        page = client.get(agreement_url(campaign)).content.decode()
        assert "No overlap to compare yet" in page
        assert reverse("assess:assessors", args=[campaign.slug]) in page

    def test_a_pair_without_common_judgments(self, client, organiser, seed_campaign):
        from tests.factories import make_topics

        make_topics(seed_campaign, ["1"])
        a = judge(seed_campaign, "p", [("1", "x", 1)], kind=Assessor.Kind.PERSON)
        b = judge(seed_campaign, "q", [("1", "y", 0)])
        login(client, organiser)
        page = client.get(pair_url(seed_campaign, a, b)).content.decode()
        assert "No pair judged by both" in page
        download = client.get(pair_url(seed_campaign, a, b, format="json"))
        assert json.loads(download.content)["pairs"] == []


class TestCountsFromTheDatabase:
    @pytest.mark.parametrize("binary", [False, True])
    def test_the_databases_tallies_give_what_the_judgments_give(self, campaign, binary):
        """The pages tally confusion matrices in SQL (qrels.agreement.pairwise_from_counts);
        the figures and intervals equal pairwise_agreement on the judgments themselves."""
        import random

        from qrels import agreement_data
        from qrels.agreement import pairwise_agreement
        from tests.factories import make_topics

        rng = random.Random(3)
        make_topics(campaign, ["2", "10", "7"])
        verdicts = {}
        for name in ("ann", "ben", "cat"):
            given = {
                (topic, f"d{i}"): rng.choice([0, 0, 1, 2, -1])
                for topic in ("2", "10", "7")
                for i in range(40)
                if rng.random() < 0.8
            }
            judge(campaign, name, [(t, d, label) for (t, d), label in given.items()])
            verdicts[name] = given
        data = agreement_data.agreement_data(campaign=campaign, binary=binary, bootstrap=300)
        direct = pairwise_agreement(
            verdicts, labels=[0, 1, 2], threshold=1, binary=binary, bootstrap=300
        )
        assert [(p.a, p.b) for p in data.pairs] == [(p.a, p.b) for p in direct]
        for ours, theirs in zip(data.pairs, direct, strict=True):
            assert ours == theirs  # every figure, the confusion matrices, CIs, per topic
        assert list(data.pairs[0].per_topic) == ["2", "7", "10"]
        assert data.group is not None

"""A model judges a pool through a real HTTP server on loopback (tests/llm_server.py)."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.test import TestCase
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from assess import llm
from assess.model_judging import ConfigError, Execution, model_config, start_model_judging
from assess.models import ModelCall, ModelConfig
from campaigns.models import Assessor, Document, Job, Judgment, JudgmentRevision
from tests.factories import make_pool, make_run, make_topics
from tests.llm_server import FakeModel

DOCS = {
    "d01": "ANSWER-2-d01",
    "d02": "ANSWER-0-d02",
    "d03": "CHATTY-d03",
    "d04": "NOTJSON-d04",
    "d05": "SLOW-d05",
    "d06": "BUSY-2-d06",
    "d07": "DOWN-d07",
}
# A timeout well above an answer's time on a loaded machine, well below the slow answer's.
FAST = Execution(concurrency=3, per_minute=0, timeout=1.5, retries=2, backoff=0.01)


@pytest.fixture
def pool(campaign):
    make_topics(campaign, ["301"])
    Document.objects.bulk_create(
        Document(campaign=campaign, doc_id=d, title=f"Title {d}", body=f"Text: {body}.")
        for d, body in DOCS.items()
    )
    make_run(campaign, "r", {"301": [(d, 10.0 - i) for i, d in enumerate(DOCS)]})
    return make_pool(campaign, depth=10)


@pytest.fixture
def server():
    with FakeModel(slow=3.0) as fake:
        yield fake


def run(campaign, pool, server, execution=FAST, **config):
    # The job is sent on commit; the test's transaction never commits, so run the callbacks.
    with TestCase.captureOnCommitCallbacks(execute=True), transaction.atomic():
        cfg = model_config(campaign=campaign, endpoint=server.url, model="m", **config)
        job = start_model_judging(config=cfg, pool=pool, execution=execution)
    job.refresh_from_db()
    return cfg, job


def calls(cfg) -> dict[str, ModelCall]:
    return {c.doc_id: c for c in ModelCall.objects.filter(config=cfg)}


@pytest.mark.django_db
def test_the_job_labels_what_it_can_and_says_why_not_for_the_rest(campaign, pool, server):
    cfg, job = run(campaign, pool, server, logprobs=True)
    assert job.status == Job.Status.DONE, job.error
    got = calls(cfg)
    status = {d: c.status for d, c in got.items()}
    assert status == {
        "d01": "labelled",
        "d02": "labelled",
        "d03": "unparseable",
        "d04": "unparseable",
        "d05": "failed",
        "d06": "labelled",
        "d07": "failed",
    }
    assert (got["d01"].label, got["d02"].label, got["d06"].label) == (2, 0, 1)
    # Raw responses kept as received; the probabilities from the logprobs, renormalised.
    assert '"content": "2"' in got["d01"].response
    assert got["d04"].response == "<html>gateway says hello</html>"
    assert got["d01"].probabilities["2"] == pytest.approx(1 / (1 + pow(2.718281828, -1.7)), 1e-6)
    assert set(got["d01"].probabilities) == {"0", "2"}
    assert got["d03"].label is None
    assert "not a single number" in got["d03"].error
    assert "no message content" in got["d04"].error
    assert got["d05"].error == "no answer within 1.5 s (after 3 tries)"
    assert (got["d07"].http_status, got["d07"].error) == (503, "HTTP 503 (after 3 tries)")
    assert got["d06"].tries == 3  # two 429s, then the answer
    assert server.hits["BUSY-2-d06"] == 3
    assert got["d01"].prompt_tokens == 100
    # Labels become the model assessor's judgments, with the rubric the prompt listed.
    judgments = Judgment.objects.filter(assessor=cfg.assessor).order_by("doc_id")
    assert [(j.doc_id, j.label) for j in judgments] == [("d01", 2), ("d02", 0), ("d06", 1)]
    assert {j.rubric_version_id for j in judgments} == {cfg.rubric_version_id}
    assert cfg.assessor.kind == Assessor.Kind.MODEL
    assert JudgmentRevision.objects.filter(judgment__assessor=cfg.assessor).count() == 3
    # Tokens (and the cost, when prices are given) are on the job.
    assert job.result["prompt_tokens"] == 400  # four answers with usage (d04's is HTML)
    assert job.result["pairs"] == {"labelled": 3, "unparseable": 2, "failed": 2, "not asked": 0}
    assert "400 prompt + 4 completion tokens" in job.result["message"]


@pytest.mark.django_db
def test_a_second_run_never_pays_again_for_an_answered_pair(campaign, pool, server):
    cfg, _job = run(campaign, pool, server)
    before = dict(server.hits)
    cfg2, job = run(campaign, pool, server)
    assert cfg2 == cfg
    assert job.status == Job.Status.DONE
    again = {k: server.hits[k] - before.get(k, 0) for k in server.hits}
    # Only the failed pairs are asked again (timeouts and 503s: 3 tries each).
    assert {k: n for k, n in again.items() if n} == {"SLOW-d05": 3, "DOWN-d07": 3}
    assert Judgment.objects.filter(assessor=cfg.assessor).count() == 3


@pytest.mark.django_db
def test_a_call_left_out_by_a_dead_worker_is_not_sent_again(campaign, pool, server):
    with transaction.atomic():
        cfg = model_config(campaign=campaign, endpoint=server.url, model="m")
    # What a SIGKILL mid-call leaves: the row committed as sent, no answer.
    ModelCall.objects.create(
        config=cfg, topic=pool.topics.get(), doc_id="d01", status=ModelCall.Status.SENT
    )
    _cfg, job = run(campaign, pool, server)
    assert job.status == Job.Status.DONE
    assert server.hits["ANSWER-2-d01"] == 0
    assert calls(cfg)["d01"].status == "interrupted"
    assert job.result["pairs"]["interrupted"] == 1
    # Asked for explicitly, it is sent (once).
    _cfg, job = run(
        campaign, pool, server, Execution(**{**FAST.__dict__, "retry_interrupted": True})
    )
    assert server.hits["ANSWER-2-d01"] == 1
    assert calls(cfg)["d01"].status == "labelled"


@pytest.mark.django_db
def test_every_field_of_the_configuration_makes_its_own_assessor(campaign, server):
    base = {"campaign": campaign, "endpoint": server.url, "model": "m"}
    first = model_config(**base)
    assert model_config(**base) == first
    variants = [
        {"model": "m2"},
        {"endpoint": server.url + "/"},
        {"temperature": 0.5},
        {"seed": 1},
        {"max_tokens": 9},
        {"label_rule": "json"},
        {"logprobs": True},
        {"api_key_env": "OPENAI_API_KEY"},
        {"prompt_template": llm.DEFAULT_TEMPLATE + " "},
    ]
    made = {model_config(**{**base, **v}).assessor_id for v in variants}
    assert len(made | {first.assessor_id}) == len(variants) + 1
    assert ModelConfig.objects.count() == len(variants) + 1
    # A new rubric version is a new configuration too (the prompt lists its labels).
    campaign.save_rubric(campaign.current_rubric().specs(), note="same labels, new version")
    assert model_config(**base) != first


@pytest.mark.django_db
def test_the_key_is_read_from_the_environment_and_never_stored(
    campaign, pool, server, monkeypatch, settings
):
    settings.MODEL_API_KEY_VARIABLES = ["PJ_TEST_KEY"]
    monkeypatch.setenv("PJ_TEST_KEY", "sk-very-secret")
    cfg, job = run(campaign, pool, server, api_key_env="PJ_TEST_KEY")
    assert job.status == Job.Status.DONE
    assert {h.get("Authorization") for h in server.headers} == {"Bearer sk-very-secret"}
    stored = [str(v) for v in ModelConfig.objects.values().get(pk=cfg.pk).values()]
    stored += [str(job.params), str(job.result)]
    assert not any("sk-very-secret" in v for v in stored)
    monkeypatch.delenv("PJ_TEST_KEY")
    cfg, job = run(campaign, pool, server, api_key_env="PJ_TEST_KEY", seed=5)
    assert job.status == Job.Status.FAILED
    assert job.error == "The environment variable PJ_TEST_KEY is not set for the worker."
    # Taken off the list after the configuration was made: the job refuses to read it.
    monkeypatch.setenv("PJ_TEST_KEY", "sk-very-secret")
    settings.MODEL_API_KEY_VARIABLES = []
    with TestCase.captureOnCommitCallbacks(execute=True), transaction.atomic():
        job = start_model_judging(config=cfg, pool=pool, execution=FAST)
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED
    assert job.error.startswith("PJ_TEST_KEY is not one of the variables")


@pytest.mark.django_db
def test_bad_configurations_are_refused(campaign, pool, server):
    with pytest.raises(ConfigError, match="unknown placeholder \\$topic"):
        model_config(
            campaign=campaign, endpoint=server.url, model="m", prompt_template="$topic $document"
        )
    with pytest.raises(ConfigError, match="never shows the document"):
        model_config(campaign=campaign, endpoint=server.url, model="m", prompt_template="$title")
    with pytest.raises(ConfigError, match="not an http"):
        model_config(campaign=campaign, endpoint="file:///etc/passwd", model="m")
    with pytest.raises(ConfigError, match="NAME of an environment variable"):
        model_config(campaign=campaign, endpoint=server.url, model="m", api_key_env="sk-abc")
    # The worker would send the variable's value to the endpoint: only listed names.
    with pytest.raises(ConfigError, match="SECRET_KEY is not one of the variables"):
        model_config(campaign=campaign, endpoint=server.url, model="m", api_key_env="SECRET_KEY")
    assert not ModelConfig.objects.exists()


@pytest.mark.django_db(transaction=True)  # the command commits: its job is sent on commit
def test_the_command_runs_the_job_and_prints_the_summary(campaign, pool, server, capsys):
    call_command(
        "judge_with_model",
        campaign.slug,
        "--pool",
        str(pool.version),
        "--endpoint",
        server.url,
        "--model",
        "m",
        "--timeout",
        "1.5",
        "--retries",
        "0",
        "--rate",
        "0",
        "--price-in",
        "2",
        "--price-out",
        "10",
    )
    out = capsys.readouterr().out
    # Without retries the 429-then-answer pair fails too.
    assert "2 labelled, 2 unparseable, 3 failed" in out
    # 3 answers x 100 prompt tokens at $2/M + 3 completion tokens at $10/M = $0.00063.
    assert "300 prompt + 3 completion tokens, $0.0006." in out
    with pytest.raises(CommandError, match="No pool v9"):
        call_command(
            "judge_with_model",
            campaign.slug,
            "--pool",
            "9",
            "--endpoint",
            server.url,
            "--model",
            "m",
        )


def test_label_parsing_never_guesses() -> None:
    scale = {0, 1, 2}
    assert llm.parse_label(" 2\n", rule="exact", scale=scale) == (2, "")
    assert llm.parse_label("2.", rule="exact", scale=scale)[0] is None
    assert llm.parse_label("3", rule="exact", scale=scale) == (
        None,
        "3 is not a label of the scale",
    )
    assert llm.parse_label("Label: 1", rule="only-integer", scale=scale) == (1, "")
    assert llm.parse_label("1 or 2", rule="only-integer", scale=scale)[0] is None
    assert llm.parse_label("1.5", rule="only-integer", scale=scale)[0] is None
    assert llm.parse_label('{"label": 2}', rule="json", scale=scale) == (2, "")
    assert llm.parse_label('{"label": true}', rule="json", scale=scale)[0] is None
    assert llm.parse_label("label 2", rule="json", scale=scale)[0] is None


def test_rate_limiter_spaces_calls_across_threads() -> None:
    import threading
    import time

    limiter = llm.RateLimiter(600)  # one call every 0.1 s
    started = time.monotonic()
    threads = [threading.Thread(target=limiter.wait) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert time.monotonic() - started >= 0.3 - 0.01  # the 4th waited three intervals
    assert llm.RateLimiter(0).interval == 0


def test_chat_url() -> None:
    assert llm.chat_url("http://h:11434") == "http://h:11434/v1/chat/completions"
    assert llm.chat_url("http://h:8000/v1/") == "http://h:8000/v1/chat/completions"
    assert llm.chat_url("https://x/v1/chat/completions") == "https://x/v1/chat/completions"


# --- The organiser's page -----------------------------------------------------------------------


def _form(server, pool, **changes) -> dict:
    return {
        "pool": str(pool.version),
        "endpoint": server.url,
        "model": "m",
        "api_key_env": "",
        "prompt_template": llm.DEFAULT_TEMPLATE,
        "label_rule": "exact",
        "temperature": "0",
        "seed": "0",
        "max_tokens": "8",
        "concurrency": "3",
        "per_minute": "0",
        "timeout": "1.5",
        "retries": "2",
        "price_prompt": "1",
        "price_completion": "0",
        **changes,
    }


@pytest.mark.django_db
def test_an_organiser_starts_a_model_on_a_pool_from_the_page(
    client, organiser, campaign, pool, server, django_capture_on_commit_callbacks
):
    client.force_login(organiser)
    url = reverse("assess:model_judges", args=[campaign.slug])
    page = client.get(url)
    assert page.status_code == 200
    assert b"Start judging" in page.content
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, _form(server, pool))
    job = Job.objects.get(kind="judge_with_model")
    assert response.status_code == 302
    assert response["Location"] == reverse("campaigns:job", args=[campaign.slug, job.pk])
    job.refresh_from_db()
    assert job.status == Job.Status.DONE
    assert job.created_by == organiser
    shown = client.get(response["Location"]).content.decode()
    assert "3 labelled, 2 unparseable, 2 failed" in shown
    assert "400 prompt + 4 completion tokens, $0.0004" in shown
    listing = client.get(url).content.decode()
    assert ModelConfig.objects.get().assessor.name in listing
    # A bad template is refused on the form, and nothing is made.
    response = client.post(url, _form(server, pool, prompt_template="$title only", seed="3"))
    assert response.status_code == 200
    assert "never shows the document" in response.content.decode()
    assert ModelConfig.objects.count() == 1


@pytest.mark.django_db
def test_assessors_cannot_reach_the_model_page(client, assessor_a, campaign):
    client.force_login(assessor_a)
    assert client.get(reverse("assess:model_judges", args=[campaign.slug])).status_code == 404


@pytest.mark.django_db(transaction=True)  # the server's thread flags the job on its own connection
def test_a_cancelled_job_keeps_the_answers_it_paid_for(campaign, settings):
    settings.JOB_HEARTBEAT_SECONDS = 0  # eager jobs read the cancel flag at every check
    make_topics(campaign, ["301"])
    docs = [f"d{i:02d}" for i in range(1, 11)]
    Document.objects.bulk_create(
        Document(campaign=campaign, doc_id=d, body=f"ANSWER-1-{d}") for d in docs
    )
    make_run(campaign, "r", {"301": [(d, 10.0 - i) for i, d in enumerate(docs)]})
    pool = make_pool(campaign, depth=10)

    def cancel_at_the_third(total: int) -> None:
        if total == 3:
            Job.objects.filter(kind="judge_with_model").update(cancel_requested=True)

    with FakeModel(on_request=cancel_at_the_third) as server:
        cfg, job = run(campaign, pool, server, Execution(concurrency=1, per_minute=0))
        assert job.status == Job.Status.CANCELLED
        asked = sum(server.hits.values())
        assert asked == 3  # the third call was out: answered and kept, no fourth sent
        assert Judgment.objects.filter(assessor=cfg.assessor).count() == 3
        # What the cancelled attempt spent stays on the job (its page shows the message).
        assert job.result["prompt_tokens"] == 300
        assert "3 labelled" in job.result["message"]
        # Started again, it asks only the seven pairs never asked.
        _cfg, job = run(campaign, pool, server, Execution(concurrency=2, per_minute=0))
        assert job.status == Job.Status.DONE
        assert sum(server.hits.values()) == 10
        assert set(server.hits.values()) == {1}


@pytest.mark.django_db
def test_queries_per_pair_are_a_constant(campaign):
    make_topics(campaign, ["301"])
    docs = [f"d{i:02d}" for i in range(1, 21)]
    Document.objects.bulk_create(
        Document(campaign=campaign, doc_id=d, body=f"ANSWER-1-{d}") for d in docs
    )
    make_run(campaign, "r", {"301": [(d, 20.0 - i) for i, d in enumerate(docs)]})
    small = make_pool(campaign, depth=5)
    large = make_pool(campaign, depth=20)
    with FakeModel() as server:
        counts = []
        for pool, seed in ((small, 1), (large, 2)):
            with CaptureQueriesContext(connection) as queries:
                _cfg, job = run(campaign, pool, server, Execution(per_minute=0), seed=seed)
            assert job.status == Job.Status.DONE
            counts.append(len(queries))
    # Claim (an insert in a savepoint: 3), the answer (an update), and in a savepoint the
    # judgment (locked read, insert, its revision, in record_judgment's own savepoint): 11.
    per_pair = (counts[1] - counts[0]) / 15
    assert per_pair <= 11, counts  # 11 measured: nothing per pair beyond these


@pytest.mark.django_db
def test_probabilities_are_written_for_the_hybrid_simulation(campaign, pool, server, capsys):
    cfg, _job = run(campaign, pool, server, logprobs=True)
    call_command("model_probabilities", campaign.slug, "--assessor", cfg.assessor.name)
    captured = capsys.readouterr()
    lines = dict(line.rsplit(" ", 1) for line in captured.out.splitlines())
    # graded3 is relevant from 1: d01 answered 2 (p 0.846 on 2, the rest on 0), d02 answered 0
    # (its runner-up 1 gets the rest), d06 answered 1 (runner-up 0).
    p = 1 / (1 + pow(2.718281828459045, -1.7))
    assert float(lines["301 d01"]) == pytest.approx(p, abs=1e-6)
    assert float(lines["301 d02"]) == pytest.approx(1 - p, abs=1e-6)
    assert float(lines["301 d06"]) == pytest.approx(p, abs=1e-6)
    assert len(lines) == 3
    assert "3 pairs written" in captured.err
    with pytest.raises(CommandError, match="No model assessor"):
        call_command("model_probabilities", campaign.slug, "--assessor", "nobody")


@pytest.mark.django_db
def test_a_long_pool_is_judged_in_slices_each_a_job(campaign, pool, server, settings):
    settings.MODEL_JOB_SLICE_SECONDS = 0  # every job sends one call, then hands over
    _cfg, first = run(campaign, pool, server)  # FAST: 2 retries
    chain = list(Job.objects.filter(kind="judge_with_model").order_by("pk"))
    assert first == chain[0]
    assert len(chain) == 7  # one slice per pair
    assert all(job.status == Job.Status.DONE for job in chain)
    assert [job.result.get("continued_as") for job in chain] == [j.pk for j in chain[1:]] + [None]
    assert f"continues as job {chain[1].pk}" in first.result["message"]
    assert chain[-1].result["pairs"]["not asked"] == 0
    # Each pair asked in one slice only: a pair that failed is not asked again by a later slice
    # of the same run (3 = the call and its 2 retries).
    assert server.hits["SLOW-d05"] == 3
    assert server.hits["ANSWER-2-d01"] == 1
    assert max(server.hits.values()) == 3


def test_a_body_too_big_to_be_a_label_is_refused_unread(server) -> None:
    request = llm.Request(
        url=llm.chat_url(server.url),
        model="m",
        prompt="Passage: HUGE-x",
        temperature=0,
        seed=0,
        max_tokens=8,
        logprobs=False,
    )
    with pytest.raises(llm.CallFailed, match="larger than 1,000,000 bytes") as caught:
        llm.call(request, timeout=5, retries=3, backoff=0)
    assert not caught.value.retryable
    assert server.hits["HUGE-x"] == 1  # not retried: asking again would give the same
    assert len(caught.value.body) == 2000


@pytest.mark.django_db
def test_an_endpoint_that_is_down_stops_the_job(campaign):
    import socket

    make_topics(campaign, ["301"])
    docs = [f"d{i:02d}" for i in range(1, 31)]
    Document.objects.bulk_create(Document(campaign=campaign, doc_id=d, body="x") for d in docs)
    make_run(campaign, "r", {"301": [(d, 30.0 - i) for i, d in enumerate(docs)]})
    pool = make_pool(campaign, depth=30)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now: every call is refused at once

    class Down:
        url = f"http://127.0.0.1:{port}/v1"

    cfg, job = run(campaign, pool, Down(), Execution(concurrency=2, per_minute=0, backoff=0))
    assert job.status == Job.Status.FAILED
    assert job.error.startswith("The endpoint gave no answer to 8 calls in a row (the last: ")
    assert "cannot connect" in job.error
    failed = ModelCall.objects.filter(config=cfg, status=ModelCall.Status.FAILED).count()
    assert 8 <= failed <= 10  # the streak, and the calls already out when it was seen
    assert job.result["pairs"]["not asked"] == 30 - failed

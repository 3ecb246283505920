"""A database that does not answer is a 503 the client can act on, whichever layer meets it.

The judging view answers its own database failures (tests/assess/test_judging_integrity.py);
these are the failures before any view runs: the session and authentication middleware read the
database first. Without the project's handler500 they were a bare 500 page, and a verdict posted
without JavaScript was gone with it."""

from __future__ import annotations

import pytest
from django.contrib.sessions.backends.db import SessionStore
from django.db import OperationalError


@pytest.fixture
def database_down(monkeypatch):
    def load(self):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(SessionStore, "load", load)


@pytest.fixture
def logged_in(client, assessor_a):
    client.force_login(assessor_a)
    client.raise_request_exception = False
    return client


def test_a_page_read_while_the_database_is_down_is_a_503_with_retry_after(logged_in, database_down):
    response = logged_in.get("/")
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert response["Cache-Control"] == "no-store"
    assert b"could not reach its database" in response.content
    assert b"Traceback" not in response.content


def test_a_form_posted_while_the_database_is_down_is_kept_to_send_again(
    logged_in, database_down, campaign
):
    url = f"/c/{campaign.slug}/some/form/"
    response = logged_in.post(
        url, {"label": "2", "submission": "5f0c-id", "note": 'a "quoted" <note>'}
    )
    assert response.status_code == 503
    page = response.content.decode()
    assert f'action="{url}"' in page
    assert '<input type="hidden" name="label" value="2">' in page
    assert '<input type="hidden" name="submission" value="5f0c-id">' in page
    # What the assessor typed comes back escaped, never as markup.
    assert 'value="a &quot;quoted&quot; &lt;note&gt;"' in page


def test_other_errors_stay_a_plain_500(logged_in, monkeypatch):
    def broken(user):
        raise ValueError("not a database problem")

    monkeypatch.setattr("pooljudge.views.campaigns_for", broken)
    response = logged_in.get("/")
    assert response.status_code == 500
    assert b"Something went wrong on the server" in response.content
    assert "Retry-After" not in response

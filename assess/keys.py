"""The judging screen's keys, in one place: the keys page, the keys dialog and the screen's
script read them from here (through the ``assess/_keys.html`` partial and its ``data-`` names).

Labels come first: a rubric's label keys are the organiser's choice, and when a label takes a
command's letter the label wins and the command has no key on that campaign's screen (the list
says so). Navigation keys (``?``, ``[``, ``]``) can never be label keys (campaigns.models
RESERVED_KEYS).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from campaigns.models import Campaign, Label


@dataclass(frozen=True)
class Key:
    """One row of the keys list. ``command`` names what the screen's script binds (``data-
    command``; "label" for a label's key); ``key`` is what to press, empty when a label took
    the command's ``letter`` (``taken_by`` names that label)."""

    key: str
    action: str
    command: str
    letter: str
    taken_by: str = ""


@dataclass(frozen=True)
class Command:
    key: str
    command: str
    action: str
    # The campaign switch the command depends on (listed only when it is on).
    flag: str = ""


COMMANDS: tuple[Command, ...] = (
    Command("[", "previous", "Previous document in your order (to revise it)"),
    Command("]", "next", "Next unjudged document after this one"),
    Command("s", "skip", "Skip: judge this document later (it waits at the end of its topic)"),
    Command("r", "revise", "Your judged documents of this topic, to revise one"),
    Command("Enter", "begin", "Begin the new topic, on a topic break", flag="topic_breaks"),
    Command("u", "unsure", "Mark or unmark the judgment as unsure"),
    Command("x", "unreadable", "Mark or unmark the document as unreadable"),
    Command("n", "note", "Write a note with the judgment"),
    Command("Esc", "leave", "Leave the note field; close a panel"),
    Command("g", "guidelines", "Show or hide the guidelines"),
    Command("h", "highlight", "Show or hide the topic's terms in the document", "highlight_terms"),
    Command("?", "keys", "Show or hide this list of keys"),
)


def screen_keys(*, campaign: Campaign, labels: Iterable[Label]) -> list[Key]:
    """Every key of ``campaign``'s judging screen: its labels first (each judges the document
    and moves on), then the commands its settings switch on, a command without a key when a
    label took its letter."""
    labels = list(labels)
    taken = {label.key: label.name for label in labels}
    rows = [
        Key(label.key, f"{label.name}, and on to the next document", "label", label.key)
        for label in labels
    ]
    for command in COMMANDS:
        if command.flag and not getattr(campaign, command.flag):
            continue
        owner = taken.get(command.key, "")
        rows.append(
            Key(
                key="" if owner else command.key,
                action=command.action,
                command=command.command,
                letter=command.key,
                taken_by=owner,
            )
        )
    return rows

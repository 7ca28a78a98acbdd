"""The speakers a question names, and what naming one does to a Search.

A speaker is known to a user's memory in two ways: by the name its messages carry (a "Name: "
prefix or a role that is a name: the `speakers` table, the `s:` key of each message), or by the
name the conversation gives its role ("Hey Mel!" in the other side's turn: storage/speakers.py,
attached by analysis/speakers.py). `named` reads which of them a question names.

A name attached to a role is nowhere in that role's texts, where a "Name: " prefix would have put
it, and the question's name then finds only the other side's turns that address it ("Thanks,
Caroline"): the wrong speaker's. So `SpeakerTerm` counts the name as said once in each of the
role's turns near the question's hits (within SPEAKER_REACH of the best `limit`), with the IDF of
those turns and the texts that write it, as BM25 counts a prefix's name; the texts that write it
count for nothing. LoCoMo dev as the leaderboard sends it, with each turn's true speaker as its
role (the name finder's ceiling), the name also counted in the texts that write it: MRR .616 with
the speaker signal alone, .625 with the name counted in the role's turns among the hits only,
.651 in every one of the role's turns, .655 in those within two turns of the best hits (1:
.652, 3: .653), which also bounds the work by the hits, not by the memory. With the names found
in the conversation, not counting the texts that write the name: MRR .654 -> .658, R@10 .784 ->
.804, b@1000w .829 -> .850; the synthetic `speakers` suite MRR .354 -> .372.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from aml_retriever.analysis.features import SPEAKER_KEY, needle, unnamed_turn
from aml_retriever.analysis.speakers import NO_SPEAKERS
from aml_retriever.engine.candidates import Term, TermIndex, best, held_counts, idf, tf_part
from aml_retriever.engine.held import SMALL_BYTES, Held, content_bytes, text_bytes
from aml_retriever.engine.query import QueryPlan
from aml_retriever.engine.rows import held_turns
from aml_retriever.storage import speakers as stored
from aml_retriever.storage.store import rows_in
from aml_retriever.storage.timeline import Visibility

# How far from the best hits the named speaker's turns hold the name (see the docstring).
SPEAKER_REACH = 2


@dataclass(frozen=True)
class Named:
    """The speakers a question names: `names`, every one (the signal and the entity ranker read
    them), and `roles`, those known by the role the conversation gives them, with that role."""

    names: frozenset[str] = frozenset()
    roles: tuple[tuple[str, str], ...] = ()  # (name, role), by name

    @property
    def role_set(self) -> frozenset[str]:
        """The roles of the speakers known by their role."""
        return frozenset(role for _, role in self.roles)

    def said(self, role: str, signal_keys: str) -> list[dict[str, str]]:
        """Which of them said a message (its role and stored keys), and how that is known: by
        the name its keys hold ('text': a "Name: " prefix, or its role when a name), or by the
        name the conversation gives its role ('conversation'); for `explain`."""
        found = [{"name": name, "known_by": "text"} for name in sorted(self.names)
                 if needle(SPEAKER_KEY + name) in signal_keys]
        if unnamed_turn(role, signal_keys):
            found += [{"name": name, "known_by": "conversation", "role": r}
                      for name, r in self.roles if r == role and not any(
                          f["name"] == name for f in found)]
        return found


def named(conn: sqlite3.Connection, plan: QueryPlan, held: Held) -> Named:
    """This user's speakers the question names: a speaker its messages name (every word of the
    name in the question), and a name the conversation gives a role."""
    written: set[str] = set()
    if plan.exact:
        known = held.one("speakers", "written", lambda: frozenset(
            row[0] for row in conn.execute("SELECT speaker FROM speakers")), content_bytes)
        written = {s for s in known if set(s.split()) <= plan.exact}
    # Only a capitalised word names a speaker by the name the conversation gives it: "my first
    # sprint" asks nothing of a "First, ..." the replies open with.
    names = tuple(sorted(plan.names))
    if held.one("speakers named", names, lambda: stored.any_named(conn, names),
                lambda _: content_bytes(names)):  # the key is the question's names
        found = held.one("speakers", "attached", lambda: stored.read(conn), content_bytes)
    else:
        found = NO_SPEAKERS
    roles = sorted((name, role) for name in plan.names if (role := found.role_of(name)))
    return Named(frozenset(written) | {name for name, _ in roles}, tuple(roles))


class SpeakerTerm:
    """A named speaker's name as a term of the messages that speaker said (see the docstring)."""

    def __init__(self, conn: sqlite3.Connection, index: TermIndex, visible: Visibility,
                 held: Held) -> None:
        self.conn = conn
        self.index = index
        self.visible = visible
        self.held = held

    def split(self, plan: QueryPlan) -> tuple[tuple[Term, ...], list[tuple[Term, str]]]:
        """The question's terms less the names of speakers known by their role, and those names'
        terms with their roles (only roles with turns that name no speaker in their text: in a
        conversation whose every turn opens with "Name: ", nothing changes)."""
        roles = {name: role for name, role in plan.speaker_roles if self._unnamed(role) > 0}
        named_terms = [(t, roles[t.text]) for t in plan.lexical
                       if t.column == "words" and t.text in roles]
        if not named_terms:
            return plan.lexical, []
        taken = {t for t, _ in named_terms}
        return tuple(t for t in plan.lexical if t not in taken), named_terms

    def add(self, scores: dict[int, float], named_terms: list[tuple[Term, str]], limit: int,
            session_id: str | None) -> None:
        """Add each name's part to `scores`: once in each of its role's turns that name no
        speaker of their own near the best `limit` hits, with the IDF of those turns and the
        texts that write it. The texts that write it are the other side's ("Thanks, Caroline"):
        they speak to the speaker, not for them, and get nothing."""
        for term, role in named_terms:
            weight = term.weight * idf(self.index.size, self.index.doc_count(term) + self._unnamed(role))
            said = self._turns_of(role, self._near(best(scores, limit, self.index.said)))
            average = self.index.average_length
            for rowid, length in sorted(held_counts(self.conn, self.held, said).items()):
                if length > 0:
                    scores[rowid] += weight * tf_part(length, average)

    def _near(self, hits: list[tuple[int, float]]) -> list[int]:
        """The messages within SPEAKER_REACH of the hits."""
        return sorted({m for turn in held_turns(self.conn, self.held, [m for m, _ in hits],
                                                SPEAKER_REACH).values() for m in turn.run})

    def _unnamed(self, role: str) -> int:
        return self.held.one("unnamed", role, lambda: stored.unnamed(self.conn, role),
                             lambda _: SMALL_BYTES + text_bytes(role))  # a role of any length

    def _turns_of(self, role: str, near: Sequence[int]) -> list[int]:
        """The role's messages among these that name no speaker of their own (and are visible)."""
        if self.visible.hides:
            near = [m for m in near if self.visible.admits(m)]
        said = self.held.many("role and keys", near, self._roles_and_keys, _pair_bytes)
        return [m for m in near if m in said and said[m][0] == role
                and unnamed_turn(role, said[m][1])]

    def _roles_and_keys(self, ids: list[int]) -> dict[int, tuple[str, str]]:
        return {m: (role, keys) for m, role, keys in rows_in(
            self.conn, "SELECT id, role, signal_keys FROM messages WHERE id", ids)}



def _pair_bytes(said: tuple[str, str]) -> int:
    """A message's role and keys, each a string of its own (as SQLite returns them)."""
    return 64 + text_bytes(said[0]) + text_bytes(said[1])

"""The read paths: a Search's ranked evidence, stored messages by id, request, content, trust or
time, and pages of the audit log. A read never creates a user file: an unknown user has none."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from aml_retriever.analysis.dates import iso_utc
from aml_retriever.analysis.tokenizer import reading_words
from aml_retriever.analysis.tokens import pieces, pieces_within
from aml_retriever.engine import window
from aml_retriever.engine.candidates import Term, TermIndex
from aml_retriever.engine.held import Held
from aml_retriever.engine.provenance import held_neighbours
from aml_retriever.engine.query import plan
from aml_retriever.engine.retrieval import Result, Retrieval
from aml_retriever.engine.rows import load_rows
from aml_retriever.engine.speakers import Named
from aml_retriever.memory import reader_view
from aml_retriever.memory.parts import Part
from aml_retriever.memory.reader_view import ReaderView, Said
from aml_retriever.memory.validation import SearchRequest
from aml_retriever.storage import audit, timeline
from aml_retriever.storage.timeline import CURRENT, ReadFilter
from aml_retriever.storage.views import WINDOW_SEPARATOR

# The columns a single message is read with (`_messages`), in the order `message_row` takes them.
MESSAGE_COLUMNS = ("id, content, timestamp_ms, role, session_id, origin, trust, recorded_ms, "
                    "coalesce(valid_ms, timestamp_ms), retired_ms, superseded_by")


class Reads(Part):
    """Searches and reads of stored messages and of the audit log."""

    def search(self, request: SearchRequest, statements: bool = False) -> dict[str, Any]:
        """The user's best original evidence for the query, best first, each piece once; with
        `statements`, each result also carries the lifecycle fields of a statement (`origin`,
        `trust`, `valid_from`, `superseded_by`), as the agents' memory answers them."""
        max_words = request.max_words or self.service.default_max_words
        path = self.store.shard_path(request.user_id)
        with self.store.connection(request.user_id, create=False) as conn:
            if conn is None:
                self.service.held.drop(path)  # deleted, here or by another process
                return {"data": [], "words": 0} if max_words else {"data": []}
            with self.store.read(conn):
                held = self.service.held.of(path, self.store.stamp(conn))
                latest = held.one("latest said", None, lambda: timeline.latest_said(conn))
                query_plan = plan(request.query, request.options, latest)
                retrieval = Retrieval(conn, self.retrieval, request.read, request.explain, held)
                results = retrieval.run(query_plan, request.top_k, request.session_id, max_words)
                view = (held.one("reader view", None, lambda: ReaderView.read(conn),
                                 reader_view.view_bytes) if self.service.reader_view else None)
                places = reader_view.turn_places(conn, held, (
                    retrieval.rows[m].session_id for r in results for m in r.candidate.members)
                ) if view else {}
                lines = reader_view.held_said(held, view, retrieval.rows, places, (
                    m for r in results for m in r.candidate.members)) if view else {}
                shown = [[lines[m] for m in r.candidate.members] if view else None
                         for r in results]
                data = [self._result(r, retrieval.rows, statements, said, retrieval.named,
                                     retrieval.related_words)
                        for r, said in zip(results, shown, strict=True)]
                words = retrieval.words_returned
                if self.service.answer_window_tokens:
                    data, words = self._fill(conn, request, retrieval, results, data, max_words,
                                             view, shown, places)
        self.service.held.settle()
        found: dict[str, Any] = {"data": data}
        if max_words:
            found["words"] = words
        return found

    def _fill(self, conn: sqlite3.Connection, request: SearchRequest, retrieval: Retrieval,
              results: list[Result], data: list[dict[str, Any]], max_words: int | None,
              view: ReaderView | None, shown: list[list[Said] | None],
              places: dict[str, dict[int, int]]) -> tuple[list[dict[str, Any]], int]:
        """The ranked evidence's front, then context up to the answer window (window.py), less
        what the reader's prompt holds besides (window.prompt_pieces); a `max_words` budget
        bounds the whole answer too (the messages' own words). The window is counted in pieces
        (analysis/tokens.pieces) with the estimate's margin taken once, for the whole answer.
        Returns the items and their words."""
        outline = self._outline(conn, request, retrieval.held)
        outline.load([m for r in results for m in r.candidate.members])
        keep, _ = window.kept((sum(reading_words(retrieval.rows[m].content)
                                   for m in r.candidate.members) for r in results), request.top_k)
        budget = (pieces_within(self.service.answer_window_tokens)
                  - window.prompt_pieces(request.query, request.options))
        front: list[int] = []  # the kept items that fit: one too large for what is left is passed
        for i in range(keep):
            members = results[i].candidate.members
            cost = (sum(_pieces_of(outline, retrieval.rows, m) + 1 for m in members)
                    + window.ITEM_TOKENS + (reader_view.added_pieces(shown[i]) if shown[i] else 0))
            if cost <= budget:
                budget -= cost
                front.append(i)
        returned = {m for i in front for m in results[i].candidate.members}
        used = sum(reading_words(retrieval.rows[m].content) for m in returned)
        costs = window.Costs()
        if view is not None:
            costs = window.Costs(view.line_cost(),
                                 reader_view.DAY_TIME_PIECES + 1, reader_view.GAP_PIECES,
                                 reader_view.TURN_PIECES)
        # A query without any word (only marks or emoji) fills no context: nothing says what
        # of the memory it asks for. Its ranked front is still held to the window (it was not,
        # and an answer of emoji messages read 39,252 tokens of a 1,500-token window).
        worded = any(c.isalnum() for c in request.query)
        blocks = window.context(outline, [r.candidate.members for r in results], returned,
                                budget, request.top_k - len(front),
                                retrieval.named.role_set or window.USERS, costs) if worded else []
        rows = retrieval.rows
        load_rows(conn, rows, [m for block in blocks for m in block.ids], retrieval.held)
        texts = {m: rows[m].content for block in blocks for m in block.ids}
        seen = {retrieval.rows[m].content for m in returned}
        blocks = window.once(outline, blocks, texts, seen)
        if max_words is not None:
            blocks, used = _within(outline, blocks,
                                   {m: reading_words(texts[m]) for m in texts}, max_words, used)
        above: dict[str, frozenset[int]] = {}
        lines: dict[int, Said] = {}
        if view is not None:  # what the view shows of the context: turns, gaps, lines
            places.update(reader_view.turn_places(conn, retrieval.held, (
                outline.lines[block.ids[0]].session_id for block in blocks)))
            above = _above(places, {m: rows[m].session_id for m in returned})
            lines = reader_view.held_said(retrieval.held, view, rows, places, (
                m for block in blocks for m in block.ids))
        context = self._context_items(blocks, texts, outline, view, request.explain, above,
                                      lines)
        return [data[i] for i in front] + context, used

    @staticmethod
    def _outline(conn: sqlite3.Connection, request: SearchRequest, held: Held) -> window.Outline:
        """The fill's outline of the memory: held from an earlier Search of the same state when
        it was read whole (a paged one is read as far as each fill walks, and its READ_LIMIT
        counts one fill's reads: never held)."""
        where, params = request.read.clause()
        key = (where, tuple(params), request.session_id)
        outline: window.Outline | None = held.get("outline", key)
        if outline is None:
            outline = window.Outline(conn, request.read, request.session_id)
            if outline.whole:
                held.keep("outline", key, outline, window.outline_bytes)
        return outline

    def _context_items(self, blocks: list[window.Block], texts: dict[int, str],
                       outline: window.Outline, view: ReaderView | None, explain: bool,
                       above: dict[str, frozenset[int]], lines: dict[int, Said]
                       ) -> list[dict[str, Any]]:
        """Context items as answer items: each its session's messages the fill chose, whole,
        joined as a window's are (or as the reader's view shows them, with the places of its
        session's messages the ranked front shows, `above`), a GAP_LINE where it leaves messages
        out; with their provenance; a score of 0 (they are not ranked), after every ranked
        item."""
        items = []
        for block in blocks:
            first = outline.lines[block.ids[0]]
            said = [lines[m] for m in block.ids] if view else []
            item: dict[str, Any] = {
                "id": f"c{block.ids[0]}" if len(block.ids) == 1 else
                      f"c{block.ids[0]}-{block.ids[-1]}",
                "content": reader_view.render(said, block.gaps,
                                              above.get(first.session_id, frozenset()))
                           if view else
                           _joined([texts[m] for m in block.ids], block.gaps),
                "score": 0.0, "created_at": iso_utc(first.timestamp_ms),
                "role": ",".join(dict.fromkeys(outline.lines[m].role for m in block.ids)),
                "session_id": first.session_id}
            if self.service.provenance:
                item.update(view="context", source_message_ids=[f"m{m}" for m in block.ids],
                            evidence_flags=[])
            if explain:
                item["explain"] = {"signals": [], "context": [
                    {"message_id": f"m{m}", "chosen": reason}
                    for m, reason in zip(block.ids, block.reasons, strict=True)]}
                if view:
                    item["explain"]["reader_view"] = reader_view.added(said)
            items.append(item)
        return items

    def _result(self, result: Result, rows: dict[int, Any], statement: bool,
                said: list[Said] | None = None, named: Named | None = None,
                related: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
        """A ranked result as an answer item (as the reader's view shows its messages, `said`,
        when it is on); explained, with the speakers the question names who said it and the
        words nearest in meaning to the question's that it holds (`related`: (question word,
        neighbour) of each searched for)."""
        members = [rows[m] for m in result.candidate.members]
        first = members[0]
        kind = result.candidate.view
        item: dict[str, Any] = {
            "id": f"m{first.id}" if kind == "message" else
                  f"w{result.candidate.view_id}-" + "-".join(str(m.id) for m in members),
            "content": reader_view.render(said) if said else
                       WINDOW_SEPARATOR.join(m.content for m in members),
            "score": result.score,
            "created_at": iso_utc(first.timestamp_ms),
            "role": first.role if kind == "message" else
                    ",".join(dict.fromkeys(m.role for m in members)),
            "session_id": first.session_id,
        }
        if self.service.provenance:
            item.update(view=kind, source_message_ids=[f"m{m.id}" for m in members],
                        evidence_flags=list(result.flags))
        if result.parts is not None:
            item["explain"] = {"signals": [{"signal": p.signal, "rank": p.rank, "weight": p.weight,
                                            "share": p.share} for p in result.parts]}
            speakers = [dict(s, message_id=f"m{m.id}") for m in members
                        for s in (named.said(m.role, m.signal_keys) if named else [])]
            if speakers:
                item["explain"]["speakers"] = speakers
            held = held_neighbours(related, [m.content for m in members])
            if held:
                item["explain"]["related"] = held
            if said:
                item["explain"]["reader_view"] = reader_view.added(said)
        if statement:
            item.update(origin=first.origin, trust=first.trust,
                        valid_from=iso_utc(first.valid_ms or first.timestamp_ms),
                        superseded_by=None if first.superseded_by is None
                        else f"m{first.superseded_by}")
            return item
        # Only a read of the past or of proposals meets these, so a default answer is unchanged.
        if kind == "message" and first.superseded_by is not None:
            item["superseded_by"] = f"m{first.superseded_by}"
        if any(m.trust != "confirmed" for m in members):
            item["trust"] = "proposed"
        return item

    def messages(self, user_id: str, ids: Sequence[int]) -> list[dict[str, Any]]:
        """The user's messages with these ids (those that exist), in id order."""
        marks = ",".join("?" * len(ids))
        return self._messages(user_id, f"id IN ({marks}) ORDER BY id", list(ids))

    def messages_of_request(self, user_id: str, request_id: str) -> list[dict[str, Any]]:
        """The messages one Add stored (and still holds), in the order it sent them."""
        return self._messages(user_id, "id BETWEEN (SELECT first_message_id FROM requests WHERE "
                                       "request_id = ?1) AND (SELECT first_message_id + stored - 1 "
                                       "FROM requests WHERE request_id = ?1) ORDER BY id",
                              [request_id])

    def messages_with_content(self, user_id: str, content: str) -> list[dict[str, Any]]:
        """The user's messages whose content is exactly `content`, oldest first."""
        return self._messages(user_id, "content = ? ORDER BY id", [content])

    def proposed(self, user_id: str, limit: int) -> list[dict[str, Any]]:
        """Current statements awaiting a person's review, oldest first."""
        return self._messages(user_id, "trust = 'proposed' AND retired_ms IS NULL ORDER BY id "
                                       "LIMIT ?", [limit])

    def recent(self, user_id: str, limit: int, visible: ReadFilter = CURRENT,
               before: tuple[int, int] | None = None) -> list[dict[str, Any]]:
        """The user's `limit` newest messages that `visible` admits, by time (then arrival),
        newest first; with `before` (a time and an id), only those after it in that order."""
        where, params = visible.clause()
        if before is not None:
            where += " AND (timestamp_ms, id) < (?, ?)"
            params += list(before)
        return self._messages(user_id, f"{where} ORDER BY timestamp_ms DESC, id DESC LIMIT ?",
                              [*params, limit])

    def _messages(self, user_id: str, where: str, params: list[Any]) -> list[dict[str, Any]]:
        """Messages as results without a score; `where` is built from fixed clauses only, never
        from input (values are parameters)."""
        with self.store.connection(user_id, create=False) as conn:
            if conn is None:
                return []
            with self.store.read(conn):
                rows = conn.execute(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE {where}",
                                    params).fetchall()
        return [message_row(row) for row in rows]

    def audit(self, user_id: str, after: int, limit: int, newest: bool = False) -> dict[str, Any]:
        """A page of the user's audit log, oldest first or `newest` first (see audit.py); none
        for an unknown user (a read creates no file)."""
        events: list[dict[str, Any]] = []
        next_cursor = None
        with self.store.connection(user_id, create=False) as conn:
            if conn is not None:
                with self.store.read(conn):
                    events, next_cursor = audit.page(conn, after, limit, newest)
        return {"user_id": user_id, "events": events, "next_cursor": next_cursor}


    def document_counts(self, user_id: str, terms: Sequence[Term]) -> tuple[int, list[int]]:
        """How many messages the user's index holds, and how many hold each term (0 and none
        for an unknown user): what a caller needs to weigh terms across memories."""
        with self.store.connection(user_id, create=False) as conn:
            if conn is None:
                return 0, [0] * len(terms)
            with self.store.read(conn):
                index = TermIndex(conn)
                return index.size, [index.doc_count(term) for term in terms]


def _within(outline: window.Outline, blocks: list[window.Block], words: dict[int, int],
            max_words: int, used: int) -> tuple[list[window.Block], int]:
    """The context items that fit a `max_words` budget after `used` words, in order; the first
    that does not fit whole keeps the messages that do, in its order, and ends the answer."""
    kept: list[window.Block] = []
    for block in blocks:
        cost = sum(words[m] for m in block.ids)
        if used + cost <= max_words:
            kept.append(block)
            used += cost
            continue
        prefix: list[int] = []
        for m in block.ids:
            if used + words[m] > max_words:
                break
            prefix.append(m)
            used += words[m]
        if prefix:
            kept.append(window.Block(prefix, frozenset(i for i in block.gaps if i < len(prefix)),
                                     block.reasons[:len(prefix)]))
        break
    return kept, used


def _joined(contents: list[str], gaps: frozenset[int]) -> str:
    """Messages of one item as the answer joins them: a separator between two, a GAP_LINE
    between two the item does not hold all of the session between."""
    parts = []
    for i, content in enumerate(contents):
        if i in gaps:
            parts.append(window.GAP_LINE)
        parts.append(content)
    return WINDOW_SEPARATOR.join(parts)


def _pieces_of(outline: window.Outline, rows: dict[int, Any], m: int) -> int:
    """A ranked message's pieces: stored, or from its text when the fill may not see it."""
    line = outline.lines.get(m)
    return line.tokens if line is not None else pieces(rows[m].content)


def message_row(row: tuple[Any, ...]) -> dict[str, Any]:
    """A message read with `MESSAGE_COLUMNS`, as the lifecycle's callers see it."""
    (message_id, content, timestamp, role, session_id, origin, trust, recorded, valid, retired,
     superseded_by) = row
    return {"id": f"m{message_id}", "content": content, "created_at": iso_utc(timestamp),
            "timestamp_ms": timestamp, "role": role, "session_id": session_id, "origin": origin,
            "trust": trust, "recorded_at": iso_utc(recorded), "valid_from": iso_utc(valid),
            "retired_at": iso_utc(retired) if retired is not None else None,
            "superseded_by": f"m{superseded_by}" if superseded_by is not None else None}


def _above(places: dict[str, dict[int, int]], shown: dict[int, str]) -> dict[str, frozenset[int]]:
    """The places of the messages the ranked front shows (`shown`: each with its session), by
    session: what a context item's gap lines count as shown above."""
    found: dict[str, set[int]] = {}
    for m, session in shown.items():
        place = places.get(session, {}).get(m)
        if place:
            found.setdefault(session, set()).add(place)
    return {session: frozenset(found_places) for session, found_places in found.items()}

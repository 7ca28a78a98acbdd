"""The question's exact words in the candidates, as the words column sees them: what coverage and
supersession read of a candidate, what makes a message beyond the lexical lists a match
(`QuestionWords`), and a message's words (`exact_words`), which the versions read too."""

from __future__ import annotations

import re
from collections import defaultdict
from functools import cached_property

from aml_retriever.analysis.tokenizer import index_text, words_of
from aml_retriever.engine.candidates import TermIndex
from aml_retriever.engine.query import QueryPlan
from aml_retriever.engine.rows import MessageRow

_WORD = re.compile(r"[^\W_]+")
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")


class QuestionWords:
    """The question's exact words each message holds, each message read once a Search. Each
    ASCII word is looked for in ASCII text as a substring first (C speed, and most candidates
    lack most words), and only where it occurs is it checked to be a whole word. One alternation
    of every word run over every candidate's whole text took 28% of a top_k 100 Search on long
    messages (BEAM dev, profiled); the same words are found (a word is alphanumeric, so two
    whole-word occurrences never overlap)."""

    def __init__(self, wanted: frozenset[str], index: TermIndex, rows: dict[int, MessageRow]) -> None:
        self.wanted = wanted
        self.index = index
        self.rows = rows
        self._ascii = tuple(w for w in sorted(wanted) if w.isascii())  # the question's ASCII words
        self._ascii_wanted = frozenset(self._ascii)
        self._shared: dict[int, frozenset[str]] = {}  # message id -> the question's words it has

    def shared(self, members: tuple[int, ...]) -> frozenset[str]:
        """The question's exact words that a candidate contains."""
        shared: set[str] = set()
        for m in members:
            found = self._shared.get(m)
            if found is None:
                found = self._shared[m] = self.in_text(m, self.rows[m].content)
            shared |= found
        return frozenset(shared)

    def matches(self, message_id: int, plan: QueryPlan) -> bool:
        """Whether a message holds a word or an n-gram of the question (for a message beyond
        the lexical lists)."""
        if self.shared((message_id,)):
            return True
        content = self.rows[message_id].content
        return bool(plan.terms.grams) and not content.isascii() and bool(
            set(plan.terms.grams) & set(index_text(content).grams.split()))

    def in_text(self, message_id: int, content: str) -> frozenset[str]:
        """The question's words in a message's text. A word is looked for only in messages that
        hold its stem, when the lexical list read every such message: in most candidates most
        words are absent, and finding that scanned the whole text (top_k 100 on long messages,
        BEAM dev: 8 words looked for in each of 160 candidates of 460 words a Search)."""
        if not content.isascii():
            return self._in_any_text(content)
        held, unknown = self._stem_holders
        words = held.get(message_id, ()) + unknown
        if not words:
            return frozenset()
        lower = content.lower()
        return frozenset(w for w in words if _holds_word(lower, w))

    def _in_any_text(self, content: str) -> frozenset[str]:
        """`wanted & exact_words(content)` for text beyond ASCII (curly quotes and accents make
        most long English replies so), with the text's distinct words read once: its ASCII
        words are matched as a set, and only its other words normalised one by one (every word
        went through the loop, 20 long candidates a Search on BEAM dev)."""
        words = set(_WORD.findall(content.casefold()))
        found = set(self._ascii_wanted & words)
        for word in words:
            if not word.isascii():
                found.update(self.wanted.intersection(words_of(word)))
        return frozenset(found)

    @cached_property
    def _stem_holders(self) -> tuple[dict[int, tuple[str, ...]], tuple[str, ...]]:
        """The question's ASCII words by the messages holding their stems, for the words whose
        holders the lexical lists read in full, and the words whose holders are unknown. Read
        when first needed: after the lexical lists, which tell the index the holders."""
        held: dict[int, tuple[str, ...]] = defaultdict(tuple)
        unknown: list[str] = []
        for word in self._ascii:
            holders = self.index.holders(word)
            if holders is None:
                unknown.append(word)
            for message_id in holders or ():
                held[message_id] += (word,)
        return held, tuple(unknown)


def _holds_word(text: str, word: str) -> bool:
    """Whether lowercase ASCII `text` holds `word` as a whole word (no letter or digit on
    either side), found with str.find: most candidates lack most words, found at C speed."""
    at = text.find(word)
    while at >= 0:
        end = at + len(word)
        if (at == 0 or text[at - 1] not in _ALNUM) and (end == len(text) or text[end] not in _ALNUM):
            return True
        at = text.find(word, at + 1)
    return False


def exact_words(text: str) -> frozenset[str]:
    """A message's words as the words column sees them (tokenizer.words_of), computed cheaply:
    only words with non-ASCII letters go through the full normalisation."""
    words = set()
    for word in _WORD.findall(text.casefold()):
        if word.isascii():
            words.add(word)
        else:
            words.update(words_of(word))
    return frozenset(words)

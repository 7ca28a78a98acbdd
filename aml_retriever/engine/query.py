"""What a question asks for: its content terms, its exact words, the entities, numbers and dates
it names, and its temporal intent. Built once per Search; everything downstream reads this."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from aml_retriever.analysis.dates import RELATIVE_KINDS, date_mentions
from aml_retriever.analysis.features import entities_of, numbers_of
from aml_retriever.analysis.related import neighbours
from aml_retriever.analysis.stopwords import STOP_WORDS
from aml_retriever.analysis.tokenizer import (
    QueryTerms,
    light_stem,
    match_expression,
    normalize,
    query_terms,
    words_of,
)
from aml_retriever.engine.candidates import Term
from aml_retriever.engine.focus import ask_and_aside, weighted_terms

# Questions about a time: the evidence is the message that carries a date (said or implied).
_ASKS_WHEN = re.compile(r"\b(when|what (?:date|day|time|year|month|week)|which (?:date|day|year|"
                        r"month|week)|how long ago|since when|what time)\b", re.IGNORECASE)
# Questions about the present state of something that may have changed.
_ASKS_CURRENT = re.compile(r"\b(now|currently|current|these days|at the moment|still|latest|"
                           r"most recent|nowadays|today|anymore|presently)\b", re.IGNORECASE)
# Questions about the past state: supersession must not bury the older statement they ask for.
_ASKS_HISTORY = re.compile(r"\b(before|used to|first|originally|previously|earlier|initially|"
                           r"formerly|at first|at the time|back then|old|previous|former|ago|"
                           r"in (?:19|20)\d\d)\b", re.IGNORECASE)
# Questions about a past version of something that changed (versions.py): the first one, or the
# one before the latest (or before a value the question names).
_ASKS_FIRST = re.compile(r"\b(originally|at first|initially|first|in the beginning|to begin with|"
                         r"at the start)\b", re.IGNORECASE)
_ASKS_BEFORE = re.compile(r"\b(before|used to|previously|earlier|formerly|prior to|previous|former|"
                          r"old|back then|at the time)\b", re.IGNORECASE)
# The words that make a question about the present; they say when, not what, so they never count
# as the subject an update must share with the question ("now" is in half of all chatter).
CURRENT_CUES = frozenset({"now", "currently", "current", "these", "days", "moment", "still",
                          "latest", "most", "recent", "nowadays", "today", "anymore", "presently"})
# A question in the first person singular: it asks what the user said or did.
_FIRST_PERSON = re.compile(r"\b(i|me|my|mine|myself|i'm|i've|i'd|i'll)\b|我", re.IGNORECASE)
# A capitalised word that does not open a sentence: a name the question may give a speaker, stop
# word or not ("What did Will say?"; not the verb of "Will Caroline come?").
_WORD = re.compile(r"[^\W\d_][^\W\d_'’-]*")
# Dates relative to when a question is asked ("last year", "this week", "yesterday"), which the
# contract never says: a question keeps the periods it names (a month or a day without its year
# is read as the latest before the memory's last message).
_RELATIVE_TO_ASKING = RELATIVE_KINDS - {"month_name"}


@dataclass(frozen=True)
class QueryPlan:
    lexical: tuple[Term, ...]  # every content term of the question, weighted by where it sits
    exact: frozenset[str]
    entities: frozenset[str]
    numbers: frozenset[str]
    dates: tuple[str, ...]
    asks_when: bool
    asks_current: bool
    options: tuple[Term, ...]
    first_person: bool = False
    names: frozenset[str] = frozenset()  # its capitalised words within a sentence, normalised
    speakers: frozenset[str] = frozenset()  # speakers of this user the question names
    # Those known by the role the conversation gives them (engine/speakers.py): (name, role).
    speaker_roles: tuple[tuple[str, str], ...] = ()
    past: str | None = None  # which past version it asks for: 'first', 'before' or None
    ask_words: tuple[str, ...] = ()  # the content words of the part that asks

    @property
    def period(self) -> str | None:
        """The period the question names ("in 2021"), whose then-current version it asks for."""
        return self.dates[0] if self.dates else None

    @property
    def subject(self) -> frozenset[str]:
        """The exact words that say what the question is about (not when)."""
        return self.exact - CURRENT_CUES

    @cached_property
    def terms(self) -> QueryTerms:
        """The question's content terms by index column, without their weights."""
        return QueryTerms([t.text for t in self.lexical if t.column == "words"],
                          [t.text for t in self.lexical if t.column == "grams"])

    @cached_property
    def related(self) -> tuple[tuple[Term, tuple[str, ...]], ...]:
        """Each English word of the ask with the words nearest it in meaning that the question
        does not hold (analysis/related.py), nearest first: what the `related` signal may
        search for. Worked out when asked (the list is read on the first question that needs
        it: a process with the signal off never reads it)."""
        own = {light_stem(t.text) for t in self.lexical if t.column == "words"}
        return related_words(self.lexical, self.ask_words, self.names, own)

    @property
    def expression(self) -> str | None:
        """Every term OR-ed in one FTS5 expression (what a bare FTS5 search would ask)."""
        return match_expression(self.terms)


def content_terms(text: str) -> QueryTerms:
    """The query's terms without stop words and stray single letters (contractions' "s", "t");
    a query made only of such words keeps them, so it still answers."""
    terms = query_terms(text)
    kept = [w for w in terms.words if w not in STOP_WORDS and not (len(w) == 1 and w.isascii()
                                                                    and w.isalpha())]
    return QueryTerms(kept if kept or terms.grams else terms.words, terms.grams)


def plan(query: str, options: tuple[str, ...] = (), now_ms: int | None = None) -> QueryPlan:
    """What `query` asks for. Its features (exact words, names, numbers, dates, intent) are read
    from the part that asks; every term of the question counts lexically, the aside's less. A
    month or a day named without its year ("in June", "on 9 October") is read as of `now_ms`:
    the memory's latest message, the nearest to when it is asked that a Search knows (the
    contract sends no time with a question; without one, the present)."""
    ask, aside = ask_and_aside(query)
    ask_terms, aside_terms = content_terms(ask), content_terms(aside)
    lexical = tuple(weighted_terms(ask_terms, aside_terms))
    option_terms = content_terms(" ".join(options)) if options else QueryTerms([], [])
    own = {t.text for t in lexical}
    # An option's words that the question already has add nothing but weight to the distractors.
    option_terms = QueryTerms([w for w in option_terms.words if w not in own],
                              [g for g in option_terms.grams if g not in own])
    asks_history = _ASKS_HISTORY.search(ask) is not None
    return QueryPlan(
        lexical=lexical,
        exact=frozenset(ask_terms.words or aside_terms.words),
        entities=frozenset(entities_of(ask)),
        names=names_in(ask),
        numbers=frozenset(numbers_of(ask)),
        dates=tuple(dict.fromkeys(m.value for m in date_mentions(ask, now_ms)
                                  if m.kind not in _RELATIVE_TO_ASKING)),
        asks_when=_ASKS_WHEN.search(ask) is not None,
        asks_current=_ASKS_CURRENT.search(ask) is not None and not asks_history,
        options=tuple(weighted_terms(option_terms, QueryTerms([], []))),
        first_person=_FIRST_PERSON.search(ask) is not None,
        past="first" if _ASKS_FIRST.search(ask) else "before" if _ASKS_BEFORE.search(ask) else None,
        ask_words=tuple(ask_terms.words),
    )


def related_words(lexical: tuple[Term, ...], ask: tuple[str, ...], names: frozenset[str],
                  own: set[str]) -> tuple[tuple[Term, tuple[str, ...]], ...]:
    """Each English word of the ask but the names it gives (a capitalised word within its
    sentence: "Melanie"'s nearest words are other names), with its nearest words in meaning
    that the question does not hold as they stem (`own`: the light stems of its words)."""
    found = []
    for term in lexical:
        if term.column == "words" and term.text in ask and term.text.isascii() \
                and term.text not in names:
            near = tuple(n for n in neighbours(term.text) if light_stem(n) not in own)
            if near:
                found.append((term, near))
    return tuple(found)


def names_in(text: str) -> frozenset[str]:
    """The capitalised words of a text that do not open a sentence, normalised."""
    found = set()
    for match in _WORD.finditer(text):
        at = match.start() - 1
        while at >= 0 and text[at].isspace():
            at -= 1
        if match.group()[0].isupper() and at >= 0 and text[at] not in ".!?…\"“(":
            found.add(normalize(match.group().rstrip("'’").removesuffix("'s").removesuffix("’s")))
    return frozenset(found)


def exact_words(text: str) -> frozenset[str]:
    """The unstemmed words of a text, as compared with QueryPlan.exact."""
    return frozenset(words_of(text))

"""Which part of a question asks, and how much each of its terms counts.

A question may chat before it asks ("……人太多了，差点找不到朋友。对了，我真正想问的是：那场展会在
哪里举办？"; "I had a long day. Anyway, what did I say about the lease?"). The ask is the last
sentence that is a question (the last sentence when none is), cut after the last cue that
announces the real question; everything else is the aside. Aside terms still count, at a fraction
of the ask's weight: context before a question can name what it is about ("I adopted a dog. What
breed is it?"), but it must not outweigh the question (MemDaily dev, questions after an aside: MRR
.633 with every term equal and the first 64 kept, see docs/EVAL.md for the figures with weights).
"""

from __future__ import annotations

import re

from aml_retriever.analysis.tokenizer import QueryTerms
from aml_retriever.engine.candidates import Term

# The weight of a term only the aside has (the ask's terms weigh 1).
ASIDE_WEIGHT = 0.3
# A sentence ends at CJK sentence punctuation, or at . ! ? followed by a space when the word
# before it has three or more characters (so "U.S.", "Dr." and "C. S. Lewis" stay whole).
_SENTENCE = re.compile(r"(?<=[。！？!?])|(?<=\w{3}[.!?])\s+|\n+")
_QUESTION_END = re.compile(r"[?？]\W*$")
# Phrases that announce the real question: what follows the last one is the ask.
_PIVOT = re.compile(
    r"(真正|其实|实际上?|本来)[^，。：:,]{0,8}?(想问|想知道|想了解|想要了解|想弄清楚|想搞清楚|想说|问题)"
    r"[^，。：:,]{0,4}?[：:，,]"
    r"|(对了|话说回来|言归正传|回到正题|我想问一下|我想问)[，,：:]"
    r"|\b(what i (really |actually )?(want|wanted|meant) to (ask|know)( is| was)?"
    r"|my (real |actual )?question (is|was)|anyway|by the way|back to (my|the) question)\b[,:]?",
    re.IGNORECASE)


def ask_and_aside(question: str) -> tuple[str, str]:
    """The part of a question that asks, and the rest."""
    sentences = [s for s in _SENTENCE.split(question) if s and s.strip()]
    asking = [i for i, s in enumerate(sentences) if _QUESTION_END.search(s)]
    at = asking[-1] if asking else len(sentences) - 1
    ask = sentences[at] if sentences else question
    aside = [s for i, s in enumerate(sentences) if i != at]
    cut = max((m.end() for m in _PIVOT.finditer(ask)), default=0)
    if cut and ask[cut:].strip():
        aside.append(ask[:cut])
        ask = ask[cut:]
    return ask, " ".join(aside)


def weighted_terms(ask: QueryTerms, aside: QueryTerms) -> list[Term]:
    """Every distinct term of the question with its weight: the ask's first, then the aside's."""
    terms = [Term("words", w) for w in ask.words] + [Term("grams", g) for g in ask.grams]
    own = {(t.column, t.text) for t in terms}
    return terms + [Term(column, text, ASIDE_WEIGHT)
                     for column, texts in (("words", aside.words), ("grams", aside.grams))
                     for text in texts if (column, text) not in own]

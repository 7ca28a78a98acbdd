"""A second retrieval round, for evidence that shares no word with the question.

"Where does the person born on 14 November work?" finds "My uncle's birthday is 14 November."
but not "My uncle works at a hospital.", which holds none of the question's words: the two meet
only through "uncle". So the best hits of the first round lend terms the question lacks to a
second lookup, whose hits (less the first round's) form the `hop` list
(`hits.HitReader._bridged`). Deterministic like every list: the same store and question give
the same seeds, terms and hits.
"""

from __future__ import annotations

from aml_retriever.analysis.stopwords import STOP_WORDS
from aml_retriever.analysis.tokenizer import index_text
from aml_retriever.engine.candidates import Term

# How many of the first round's best messages seed the second.
HOP_SEEDS = 2
# How many terms each seed lends: its longest (a long word is likelier rare) that the question
# lacks, the earlier first among equals. Each costs one index lookup in the second round, where
# those too common to bridge anything are counted and skipped (MIN_BRIDGE_IDF). Three measured
# MemDaily dev R@100 1.000 (no filler) and .998 (x10) for +1.8 ms a LoCoMo Search (p50 20.6 ->
# 22.4 ms at top_k 100); six, .999 on x10 for +5 ms; choosing the rarest by the vocabulary first,
# the same figures for twice the time (~75 us a vocabulary seek).
BRIDGE_TERMS = 3
# The least (Lucene) IDF a bridging term needs, so a word held by most of a memory bridges
# nothing: "user" in both of "The user's editor is Helix." and "The user's shell is fish." (IDF
# .18) does not, "Lena" in two of three messages (.47) and 表弟 in five of nine (.60) do. MemDaily
# dev without filler, R@100: .990 at a floor of .5, 1.000 at .4.
MIN_BRIDGE_IDF = 0.4


def bridge_terms(seeds: list[str], question: tuple[Term, ...]) -> tuple[Term, ...]:
    """The terms the seed messages lend the second round: per seed, its BRIDGE_TERMS longest
    words and bigrams that the question lacks."""
    asked = {t.text for t in question}
    bridges: list[Term] = []
    for content in seeds:
        lent = [t for t in _terms_of(content) if t.text not in asked]
        bridges += sorted(lent, key=lambda t: -len(t.text))[:BRIDGE_TERMS]
    return tuple(dict.fromkeys(bridges))


def _terms_of(content: str) -> list[Term]:
    """A message's distinct content words and bigrams (single characters say too little)."""
    text = index_text(content)
    words = [w for w in text.words.split() if w not in STOP_WORDS and len(w) > 1]
    grams = [g for g in text.grams.split() if len(g) > 1]
    return [Term("words", w) for w in dict.fromkeys(words)] + \
           [Term("grams", g) for g in dict.fromkeys(grams)]

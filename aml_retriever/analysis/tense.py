"""The tense of the sentence a date is named in: whether "on Friday" in it is the Friday gone or
the one to come ("I hosted a class for them on Friday", said on a Monday, is the Friday before).
Read from the sentence's words alone, as dates.py asks: a past form ("went", "was", -ed), a
future ("will", "'ll", "going to"), a present progressive ("I'm flying"). Pure functions.
"""

from __future__ import annotations

import re

# A clause ends at these; a sentence's parts at these too when it speaks of both times.
_CLAUSE_MARKS = ".!?;\n"
PARTS = re.compile(r",|\s[-\u2013\u2014]\s|\b(?:and|but|so|because|while|though|although|then|"
                   r"when|after|before|until|since)\b")
_WORDS = re.compile(r"[a-z]+(?:['\u2019][a-z]+)?")
# What makes a sentence speak of a time to come: a word, or two in a row ("going to", "how
# about", "are you": "Are you free on Thursday?"); and, weaker, "I'm flying" (a present
# progressive, read only when nothing says past).
_FUTURE_WORDS = frozenset({"will", "shall", "gonna", "wanna", "tomorrow", "upcoming", "soon",
                           "won't", "let's", "planning", "scheduled", "hopefully"})
_FUTURE_PAIRS = frozenset({
    ("how", "about"), ("would", "you"), ("could", "we"), ("can", "we"), ("shall", "we"),
    ("are", "you"), ("going", "to"), ("plan", "to"), ("plans", "to"), ("hope", "to"),
    ("hoping", "to"), ("want", "to"), ("would", "like"), ("looking", "forward"), ("can't", "wait"),
    ("cannot", "wait"), ("about", "to"), ("need", "to"), ("have", "to"), ("has", "to"),
    ("intend", "to"), ("aim", "to")})
# What makes it speak of a time gone: these words, a past form (`IRREGULAR`, or -ed), "I read".
_PAST_WORDS = frozenset({"was", "were", "did", "didn't", "had", "hadn't", "wasn't", "weren't",
                         "ago", "yesterday", "last", "used"})
IRREGULAR = frozenset({
    "went", "came", "saw", "got", "made", "took", "gave", "ran", "met", "won", "lost", "bought",
    "brought", "thought", "caught", "taught", "found", "felt", "left", "kept", "slept", "spent",
    "sent", "built", "told", "said", "sold", "held", "stood", "sat", "ate", "drank", "swam", "sang",
    "began", "wrote", "rode", "drove", "flew", "threw", "grew", "knew", "drew", "wore", "tore",
    "broke", "spoke", "chose", "froze", "woke", "fell", "forgot", "heard", "paid", "meant",
    "fought", "became", "hung", "struck", "stuck", "dug", "shook", "hid", "slid", "spun", "wept",
    "crept", "dealt", "understood", "overcame", "forgave", "gone", "done", "seen", "taken",
    "given", "eaten", "written", "spoken", "begun", "driven", "flown", "grown", "known", "shown"})
# Words ending in -ed that are rarely a past tense where a time is named.
_NOT_PAST_ED = frozenset({
    "excited", "interested", "tired", "bored", "scared", "worried", "supposed", "scheduled",
    "detailed", "advanced", "limited", "related", "based", "talented", "beloved", "sacred", "naked",
    "wicked", "hundred", "kindred", "crooked", "rugged", "ragged", "jagged", "blessed", "aged",
    "skilled", "qualified", "experienced", "dedicated", "thrilled", "pleased", "delighted",
    "amazed", "stressed", "overwhelmed", "motivated", "embed", "shred"})
# A word before a past form that makes it an adjective or a passive present ("I'm so excited",
# "a detailed plan"), or a perfect that is a future ("will have finished").
_BEFORE_ADJECTIVE = frozenset({"am", "is", "are", "be", "being", "get", "getting", "feel",
                               "feeling", "look", "looks", "seem", "seems", "so", "very", "really",
                               "too", "pretty", "quite", "super", "totally", "all", "a", "an",
                               "the", "my", "your", "our", "his", "her", "their", "this", "that",
                               "these", "those", "more", "most", "gets"})
_SUBJECTS = frozenset({"i", "we", "he", "she", "they", "you"})
# How far around a mention its clause is read: bounded work on any text.
_CLAUSE_CHARS = 240


def clause_bounds(lowered: str, start: int, end: int) -> tuple[int, int]:
    """Where the sentence a mention stands in begins and ends (at most _CLAUSE_CHARS either
    side of it)."""
    low = max(0, start - _CLAUSE_CHARS)
    begin = max(low, max(lowered.rfind(mark, low, start) for mark in _CLAUSE_MARKS) + 1)
    high = min(len(lowered), end + _CLAUSE_CHARS)
    ends = [at for at in (lowered.find(mark, end, high) for mark in _CLAUSE_MARKS) if at >= 0]
    return begin, min(ends) if ends else high


def tense_at(lowered: str, start: int, end: int) -> str:
    """'past', 'future' or '' (not clear) of the sentence holding lowered[start:end]: read from
    its words ("went", "was", -ed; "will", "'ll", "going to", "I'm flying"), the mention's own
    left out; a sentence that speaks of both is read in its part around the mention."""
    begin, stop = clause_bounds(lowered, start, end)
    before, after = lowered[begin:start], lowered[end:stop]
    tense = _tense_of(before, after)
    if tense != "both":
        return tense
    tense = _tense_of(PARTS.split(before)[-1], PARTS.split(after)[0])
    return "" if tense == "both" else tense


def _tense_of(before: str, after: str) -> str:
    words = [*lowered_words(before), "|", *lowered_words(after)]
    past = future = progressive = False
    for i, word in enumerate(words):
        prev = words[i - 1] if i else ""
        if word in _FUTURE_WORDS or word.endswith("'ll") or (prev, word) in _FUTURE_PAIRS:
            if not (word == "to" and i > 1 and words[i - 2] in ("was", "were")):
                future = True
        elif word in _PAST_WORDS or (word == "read" and prev in _SUBJECTS):
            past = True  # "I read it in two days": after a subject, "read" is mostly a past
        elif (word in IRREGULAR or (len(word) >= 5 and word.endswith("ed")
                                     and not word.endswith("eed") and word not in _NOT_PAST_ED)):
            if prev not in _BEFORE_ADJECTIVE and not prev.endswith(("'m", "'re", "'s")):
                past = True
        elif word.endswith("ing") and (prev in ("am", "is", "are") or prev.endswith(("'m", "'re"))):
            progressive = True
    if past and future:
        return "both"
    if past:
        return "past"
    return "future" if future or progressive else ""


def lowered_words(text: str) -> list[str]:
    """The lowercase words of a text, with a typographic apostrophe written as "'"."""
    return [w.replace("\u2019", "'") for w in _WORDS.findall(text)]

"""How text becomes index terms and how a query becomes a safe FTS5 expression.

The original text is stored byte for byte elsewhere; this module only derives what the index sees.
Two index columns:

- `words`: space-delimited scripts (Latin, Cyrillic, Greek, Arabic, Hebrew, Devanagari, ...),
  NFKC-normalised, case-folded, Latin and Greek diacritics folded (Zürich = zurich). FTS5's
  unicode61 tokenizer splits it; combining marks count as letters so Devanagari words stay whole.
- `grams`: scripts written without spaces (Chinese, Japanese, Thai, Lao, Khmer, Myanmar) and
  Korean, whose particles stick to nouns (서울에), as character unigrams plus bigrams, and symbols
  such as emoji as unigrams. Bigrams make every two-character word findable (北京, 서울), which
  FTS5's trigram tokenizer cannot do; unigrams keep single-character words findable.

Every query term is double-quoted (inner quotes doubled) and scoped to its column, so no FTS5
syntax in a query (NEAR, *, ^, -, AND/OR/NOT, column filters) is ever obeyed.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from itertools import pairwise

# The FTS5 tokenizer of the message index. Marks (M*) are token characters so that scripts whose
# vowels are combining marks (Devanagari, Thai) are not cut inside words; symbols (So) are token
# characters so emoji written to the grams column are indexed. Part of the index identity.
FTS_TOKENIZE = "porter unicode61 remove_diacritics 2 categories 'L* N* Co M* So'"

# Scripts written without spaces between words, plus Hangul (see the module docstring).
_GRAM_RANGES = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x1780, 0x17FF),  # Khmer
    (0x2E80, 0x2FDF),  # CJK radicals
    (0x3005, 0x3007),  # 々 〆 〇
    (0x3021, 0x3029),  # Hangzhou numerals
    (0x3031, 0x3035),  # kana repeat marks
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3100, 0x312F),  # Bopomofo
    (0x3130, 0x318F),  # Hangul compatibility Jamo
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xA960, 0xA97F),  # Hangul Jamo extended A
    (0xAC00, 0xD7FF),  # Hangul syllables, Jamo extended B
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0x20000, 0x3FFFF),  # CJK extensions B and later
)
_GRAM_CLASS = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in _GRAM_RANGES)
# A word as a reader counts it (reading_words): one gram character, or a run of other characters
# between whitespace.
_READING_WORD = re.compile(f"[{_GRAM_CLASS}]|[^\\s{_GRAM_CLASS}]+")
# Characters that only select a presentation and carry no meaning of their own.
_IGNORABLE = {"\u200d", "\ufe0e", "\ufe0f"}
# ASCII text needs none of the Unicode work below (NFKC leaves it alone, it has no marks, no
# gram scripts and no So symbols), and most chat text is ASCII: only its letters and digits reach
# the words column, everything else becomes a space, as in the general path.
_ASCII_NON_WORD = str.maketrans({chr(c): " " for c in range(128) if not chr(c).isalnum()})
# What separates regular expressions' words (`\w`: letters, digits, underscore) in ASCII text:
# `text.translate(ASCII_WORD_GAPS).split()` lists its words as `\b...\b` sees them, at C speed.
ASCII_WORD_GAPS = str.maketrans({chr(c): " " for c in range(128) if not (chr(c).isalnum() or chr(c) == "_")})


@dataclass(frozen=True)
class IndexText:
    words: str
    grams: str


def is_gram_char(ch: str) -> bool:
    code = ord(ch)
    if code < _GRAM_RANGES[0][0]:  # most text: Latin, Cyrillic, Greek, Arabic, Devanagari...
        return False
    return any(lo <= code <= hi for lo, hi in _GRAM_RANGES)


def _foldable_base(ch: str) -> bool:
    """Latin and Greek letters lose their diacritics; other scripts keep their marks."""
    code = ord(ch)
    return code < 0x250 or 0x1E00 <= code <= 0x1EFF or 0x370 <= code <= 0x3FF or 0x1F00 <= code <= 0x1FFF


def normalize(text: str) -> str:
    """NFKC, case-folded, with Latin and Greek diacritics removed."""
    return text.lower() if text.isascii() else _normalize_unicode(text)


def _normalize_unicode(text: str) -> str:
    out: list[str] = []
    fold_marks = False
    for ch in unicodedata.normalize("NFKD", text.casefold()):
        if unicodedata.category(ch).startswith("M"):
            if fold_marks:
                continue
        else:
            fold_marks = _foldable_base(ch)
        out.append(ch)
    return unicodedata.normalize("NFKC", "".join(out))


def _clusters(run: str) -> list[str]:
    """Split a run of gram-script text into base characters with their combining marks."""
    clusters: list[str] = []
    for ch in run:
        if clusters and unicodedata.category(ch).startswith("M"):
            clusters[-1] += ch
        else:
            clusters.append(ch)
    return clusters


def _gram_runs(text: str) -> tuple[str, list[list[str]], list[str]]:
    """Split normalised text into the words part, the runs of gram-script clusters, and symbols.
    Whatever goes to the grams column leaves a space in the words part, so words never fuse."""
    if text.isascii():
        return text.translate(_ASCII_NON_WORD), [], []
    return _gram_runs_unicode(text)


def _gram_runs_unicode(text: str) -> tuple[str, list[list[str]], list[str]]:
    words: list[str] = []
    runs: list[list[str]] = []
    symbols: list[str] = []
    run = ""
    for ch in text:
        if is_gram_char(ch) or (run and unicodedata.category(ch).startswith("M")):
            run += ch
            continue
        if run:
            runs.append(_clusters(run))
            run = ""
            words.append(" ")
        if ch in _IGNORABLE:
            continue
        category = unicodedata.category(ch)
        if category == "So":
            symbols.append(ch)
        # Only letters, numbers, marks and private use reach the words column; everything else
        # becomes a space here, so FTS5 (whose Unicode tables may be older than Python's) never
        # has to decide whether a rare symbol is part of a word.
        words.append(ch if category[0] in "LNM" or category == "Co" else " ")
    if run:
        runs.append(_clusters(run))
    return "".join(words), runs, symbols


def _ngrams(clusters: list[str]) -> list[str]:
    return clusters + [a + b for a, b in pairwise(clusters)]


def index_text(text: str) -> IndexText:
    """What the FTS index stores for one text: its words (space-separated) and its n-grams."""
    words, runs, symbols = _gram_runs(normalize(text))
    grams = [g for run in runs for g in _ngrams(run)] + symbols
    return IndexText(words=" ".join(words.split()), grams=" ".join(grams))


def words_of(text: str) -> list[str]:
    """Every word of a text as the words column sees it (normalised, unstemmed), in order."""
    return _gram_runs(normalize(text))[0].split()


def reading_words(text: str) -> int:
    """How many words a reader counts in a text: its whitespace-separated words, with each
    character of a script written without spaces (Chinese, Japanese, Thai...) a word of its own,
    as the evaluation's word budgets count them. Counted by one pattern (a gram character, or a
    run of anything else but whitespace; no gram character is whitespace): character by
    character in Python, a long reply with a curly quote took 60 us."""
    if text.isascii():
        return len(text.split())
    return len(_READING_WORD.findall(text))


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


@dataclass(frozen=True)
class QueryTerms:
    words: list[str]
    grams: list[str]

    def __bool__(self) -> bool:
        return bool(self.words or self.grams)


def is_ideograph(cluster: str) -> bool:
    code = ord(cluster[0])
    return 0x3400 <= code <= 0x9FFF or 0xF900 <= code <= 0xFAFF or code >= 0x20000


def query_terms(query: str) -> QueryTerms:
    """The terms a query searches for. A gram run of two or more clusters is searched by its
    bigrams, which carry the meaning, plus its ideographs alone (妹 in 妹の仕事 must find
    妹は獣医です, whose bigrams differ); other single characters (kana particles, Hangul
    syllables, Thai letters) would match nearly everything and are left out. Every distinct
    term is kept, bigrams first: which ones a Search reads is chosen by what they say
    (candidates.informative), never by where they sit."""
    words, runs, symbols = _gram_runs(normalize(query))
    bigrams: list[str] = []
    ideographs: list[str] = []
    for run in runs:
        if len(run) == 1:
            bigrams += run
        else:
            bigrams += [a + b for a, b in pairwise(run)]
            ideographs += [c for c in run if is_ideograph(c)]
    return QueryTerms(words=_unique(words.split()), grams=_unique(bigrams + symbols + ideographs))


def quote(term: str) -> str:
    """One FTS5 string: double-quoted, inner quotes doubled, so it is only ever a phrase."""
    return '"' + term.replace('"', '""') + '"'


def match_expression(terms: QueryTerms) -> str | None:
    """An FTS5 MATCH expression OR-ing every term within its own column; None when there is
    nothing to search for (FTS5 must never receive an empty expression)."""
    parts = []
    if terms.words:
        parts.append("words : (" + " OR ".join(quote(t) for t in terms.words) + ")")
    if terms.grams:
        parts.append("grams : (" + " OR ".join(quote(t) for t in terms.grams) + ")")
    return " OR ".join(parts) or None


_INFLECTION = re.compile(r"(?<=[a-z]{3})(?:ing|ed|(?<!s)s)$")


def light_stem(word: str) -> str:
    """A word without the common English inflections, so that "lives" and "live", "targets" and
    "target", "moved" and "move" compare equal: for comparing texts' words outside the index
    (which stems with Porter inside SQLite), not for indexing."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    word = _INFLECTION.sub("", word)
    return word[:-1] if len(word) > 3 and word.endswith("e") else word

"""Words that mean nearly the same: for an English word of a question, the words nearest it in
meaning, which the `related` signal also searches for (engine/hits.py), so that "What
instruments does she play?" finds "my violin" and "hobbies" finds "painting".

The list ships inside the package (data/related.txt.gz: one line a word, its neighbours nearest
first), built once by scripts/build_related.py from static word vectors distilled out of the
sentence model all-MiniLM-L6-v2 (Apache-2.0; data/RELATED_NOTICE). No model runs here: a
lookup is a dict's. Read on the first question that asks for it (about 0.2 s), then held by the
process.
"""

from __future__ import annotations

import gzip
import itertools
import threading
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path

from aml_retriever.analysis.tokenizer import light_stem

DATA_FILE = Path(__file__).resolve().parent / "data" / "related.txt.gz"
# The most neighbours of one word a Search searches for: the nearest that the user's messages
# hold.
MOST_NEIGHBOURS = 5
# The file's first lines, as comments: what it is and where it comes from.
HEADER = (
    "Neighbour words: word<TAB>its nearest words in meaning, nearest first.",
    "Built by scripts/build_related.py from static word vectors distilled out of",
    "sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), its own WordPiece vocabulary.",
    "See RELATED_NOTICE beside this file.",
)

_lock = threading.Lock()


def neighbours(word: str) -> tuple[str, ...]:
    """The words nearest `word` in meaning, nearest first (none for a word the list lacks: a
    name, a number, a word of another script). A word the list lacks as written is looked up
    without its inflection ("hobbies" as "hobby")."""
    table = _table()
    found = table.get(word)
    if found is None:
        found = table.get(light_stem(word), "")
    return tuple(found.split())


def held(near: Iterable[str], holds: Callable[[str], bool]) -> list[str]:
    """The nearest MOST_NEIGHBOURS of these neighbours that a memory holds (`holds`), in order:
    what the `related` signal searches for (engine/hits.py) and recall's match counts
    (agents/scopes.py). Asked in order, so only as many as needed are looked up."""
    return list(itertools.islice((word for word in near if holds(word)), MOST_NEIGHBOURS))


@lru_cache(maxsize=1)
def _table() -> dict[str, str]:
    """Each word's neighbours as the file writes them (one string a word, split when asked: as
    tuples of words the table took 12.1 MB of a server's memory, so 3.8 MB)."""
    with _lock:
        with gzip.open(DATA_FILE, "rt", encoding="utf-8") as lines:
            return {word: near for word, _, near in
                    (line.rstrip("\n").partition("\t") for line in lines if not line.startswith("#"))}

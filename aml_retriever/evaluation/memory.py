"""One user's memory under construction: sessions of drafts, and the registry that keeps planted
facts consistent. The suites (suites.py) plant into it; the generator (synthetic.py) fills it with
chit-chat first and turns it into Adds afterwards.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from aml_retriever.evaluation import vocab

DIFFICULTIES = ("easy", "medium", "hard")
# Near-miss facts (the same topic about another owner) planted beside a question's evidence, as
# an inclusive range per difficulty: what makes a topic word alone stop finding the answer.
DISTRACTORS = {"easy": (0, 0), "medium": (1, 2), "hard": (3, 4)}


@dataclass
class Draft:
    role: str
    content: str
    key: str | None = None  # set on planted messages that questions cite


@dataclass
class Session:
    index: int
    day: dt.date
    start_ms: int
    drafts: list[Draft] = field(default_factory=list)


@dataclass(frozen=True)
class Planned:
    """A question before assembly: evidence named by the keys of planted drafts."""

    suite: str
    category: str
    difficulty: str
    question: str
    answer: str
    evidence: tuple[str, ...]
    adversarial: bool = False


class Memory:
    """One user's timeline under construction, with the registry that keeps facts consistent."""

    def __init__(self, rng: random.Random, sessions: list[Session]) -> None:
        self.rng = rng
        self.sessions = sessions
        # (owner, concept) -> value: each owner has one value per concept, so a distractor about
        # another owner never contradicts a question's answer. A None value reserves the pair
        # for an adversarial question that must stay unanswerable.
        self.facts: dict[tuple[str, str], str | None] = {}
        # Planted once, cited by several questions ("Lena is my sister"): (name, key, session).
        self.shared: dict[str, tuple[str, str, int]] = {}
        self._pools: dict[str, list[str]] = {}
        self._people: set[str] = set()
        self._keys = 0

    # ---- values -------------------------------------------------------------------------

    def draw(self, name: str, pool: Sequence[str], k: int = 1) -> list[str]:
        """k distinct values of a pool, without replacement across calls until it runs dry (then
        a fresh shuffle), so values rarely repeat within one user."""
        if k > len(pool):
            raise ValueError(f"pool {name} has fewer than {k} values")
        out: list[str] = []
        while len(out) < k:
            left = self._pools.get(name)
            if not left:
                left = self._pools[name] = self.rng.sample(list(pool), len(pool))
            value = left.pop()
            if value not in out:
                out.append(value)
        return out

    def person(self) -> str:
        """A name no one else in this user's memory has: first names, then (once every first
        name is taken) first name and surname."""
        while True:
            name = self.draw("first", vocab.FIRST_NAMES)[0]
            if len(self._people) >= len(vocab.FIRST_NAMES):
                name = f"{name} {self.draw('surname', vocab.SURNAMES)[0]}"
            if name not in self._people:
                self._people.add(name)
                return name

    def free(self, owner: str, concept: str) -> bool:
        return (owner, concept) not in self.facts

    def claim(self, owner: str, concept: str, value: str | None) -> None:
        self.facts[(owner, concept)] = value

    # ---- sessions -----------------------------------------------------------------------

    def sessions_apart(self, k: int) -> list[int]:
        """k distinct session indices in time order, spread over the whole timeline."""
        k = min(k, len(self.sessions))
        return sorted(self.rng.sample(range(len(self.sessions)), k))

    def plant(self, session: int, content: str, role: str = "user") -> str:
        """Insert a message at a random place in a session; returns its key."""
        self._keys += 1
        key = f"k{self._keys}"
        drafts = self.sessions[session].drafts
        drafts.insert(self.rng.randint(0, len(drafts)), Draft(role, content, key))
        return key

    def plant_exchange(self, session: int, statement: str, reply: str) -> str:
        """A user's statement at a random place in a session with the assistant's reply right
        after it; returns the statement's key."""
        key = self.plant(session, statement)
        drafts = self.sessions[session].drafts
        at = next(i for i, d in enumerate(drafts) if d.key == key)
        drafts.insert(at + 1, Draft("assistant", reply))
        return key

    def filler(self, template: str, **extra: str) -> str:
        values = {name: self.rng.choice(options) for name, options in vocab.FILLER_SLOTS.items()}
        return template.format(**values, **extra)

    def wrap(self, content: str, language: str = "en") -> str:
        """The fact inside a longer message of chatter (hard difficulty)."""
        if language == "en":
            before = self.filler(self.rng.choice(vocab.WRAP_BEFORE))
            after = self.filler(self.rng.choice(vocab.WRAP_AFTER))
        else:
            before, after = self.rng.sample(list(vocab.FOREIGN_FILLER[language]), 2)
        joiner = "" if language in vocab.NO_SPACE_LANGUAGES else " "
        return joiner.join((before, content, after))


def pick_difficulty(rng: random.Random, difficulty: str) -> str:
    return rng.choice(DIFFICULTIES) if difficulty == "mixed" else difficulty


def distractor_count(rng: random.Random, difficulty: str) -> int:
    return rng.randint(*DISTRACTORS[difficulty])


Planter = Callable[[Memory, str], list[Planned]]

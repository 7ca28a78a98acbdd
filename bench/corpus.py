"""The benchmarks' synthetic data and the stores built from it, shared by every bench_*.py.

Two generators, both pure functions of a seed (seeded `random`, no external data), so every run
on every machine writes the same text:

- **chat** (`conversation`, `chat_adds`, `chat_questions`): one user's chat history in sessions,
  with people, events, places and dates, and questions built from the slots of stored messages.
  Used where what is measured is one user's Search or Add, so the text should read like a chat.
- **words** (`word_messages`, `word_adds`, `word_queries`): ~20 words a message from a Zipf-weighted
  vocabulary of made-up words, common words, names and numbers, each user with favourite words of
  their own. Cheap to generate per user id, so it fills stores with many "other" users.

And the stores: `others_store` builds a store of N messages of other users (users of ~1,000
messages each) once, in parallel processes, with a manifest, so a kept work directory pays for a
1M-message build once; `prepare_store` makes a store that holds those other users (hard links to
their files, never written) plus the users a benchmark measures, built or reused by manifest.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import json
import multiprocessing
import os
import random
import shutil
import string
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

from benchlib import REPO_ROOT, log

from aml_retriever import __version__
from aml_retriever.common.signals import RetrievalConfig
from aml_retriever.engine.query import plan
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import AddRequest, Message
from aml_retriever.storage.catalog import index_identity
from aml_retriever.storage.store import Store

ADD_SIZE = 20  # messages per Add, the size a chat platform typically sends
# Monday 2 January 2023, 09:00 UTC: the first chat session starts here.
CHAT_BASE_TIME_MS = 1_672_650_000_000
WORD_BASE_TIME_MS = 1_700_000_000_000
WORD_SESSION_SIZE = 100  # messages per session id of a words user

# ---- chat: one user's history, and questions about it ------------------------------------

PEOPLE = """
    Lena Marco Priya Tomas Aisha Jonas Keiko Diego Nadia Felix Rosa Hamza Ingrid Luca Mei Oscar
    Carmen Viktor Esther Yusuf Greta Pablo Olga Sven Amara Bruno Chiara Farid Irene Nikos
""".split()
RELATIONS = ["sister", "brother", "mom", "dad", "cousin", "best friend", "coworker", "neighbour",
             "boss", "roommate", "partner", "aunt"]
EVENTS = ["concert", "wedding", "birthday party", "hiking trip", "book club", "yoga class",
          "job interview", "football match", "camping trip", "art exhibition", "cooking class",
          "marathon", "conference", "road trip", "picnic", "film festival", "charity run",
          "baby shower", "housewarming", "pottery workshop", "jazz night", "graduation",
          "farmers market", "museum tour", "board game night", "ski weekend"]
PLACES = ["Berlin", "Lisbon", "Osaka", "Denver", "Seattle", "Nairobi", "Tallinn", "Quito",
          "Montreal", "Porto", "the lake house", "downtown", "the old harbour", "the city park",
          "the beach", "the mountains", "the community centre", "grandma's place", "Brooklyn",
          "the botanical garden"]
JOBS = ["nurse", "teacher", "software engineer", "chef", "architect", "photographer",
        "accountant", "vet", "pilot", "barista", "lawyer", "graphic designer", "physiotherapist",
        "journalist", "electrician", "data analyst"]
HOBBIES = ["painting", "pottery", "running", "baking sourdough", "playing guitar",
           "learning Spanish", "gardening", "rock climbing", "knitting", "chess", "swimming",
           "birdwatching", "photography", "salsa dancing", "woodworking", "cycling"]
OBJECTS = ["tickets", "books", "plants", "cupcakes", "photos", "candles", "records", "shirts",
           "bottles of wine", "jars of jam", "postcards", "boxes", "flowers", "pies"]
ADJECTIVES = ["amazing", "exhausting", "fun", "stressful", "beautiful", "crowded", "relaxing",
              "loud", "weird", "unforgettable", "chaotic", "lovely", "boring", "emotional"]
RELATIVE_WHEN = ["yesterday", "last Saturday", "last Sunday", "last Friday", "last weekend",
                 "two weeks ago", "three days ago", "last month", "this morning", "a few days ago",
                 "last night", "on Monday", "last year", "a couple of weeks ago", "next Friday",
                 "this weekend", "next month"]
MONTH_NAMES = ["January", "February", "March", "April", "May", "June", "July", "August",
               "September", "October", "November", "December"]
TAILS = ["anyway, I need to get some sleep now", "let me know if you want to come along next time",
         "the weather was perfect all day", "honestly I did not expect that at all",
         "we should plan something like that again soon", "I am still thinking about it",
         "it took forever to find parking", "the food there was surprisingly good",
         "my phone died halfway through", "I will send you the pictures later",
         "we ended up staying much longer than planned", "traffic on the way back was terrible",
         "I think everyone had a great time", "no idea how we managed all of that",
         "remind me to call them about it", "it was raining the whole afternoon",
         "we grabbed coffee afterwards", "I was tired but it was worth it"]
# Made-up shop, café and street names: the long tail of rare terms real chats are full of.
SYLLABLES = ["ka", "lo", "mi", "ran", "tes", "vo", "bel", "dun", "fi", "gor", "ha", "jul", "nes",
             "pra", "qui", "sol", "tam", "ur", "wen", "zel"]
RARE_KINDS = ["café", "bakery", "bookshop", "street", "bar", "gym", "studio", "market", "hotel"]

# Templates: the slots a message fills are the words a question about it can use.
USER_TEMPLATES = [
    "{name} and I went to the {event} in {place} {when}, and honestly it was {adj}.",
    "My {rel} {rel_name} is now working as a {job} in {place}, started {when}.",
    "I bought {num} {objects} for the {event} {when}, it cost me about {money} dollars.",
    "{name} moved to {place} {when} and is currently looking for work as a {job}.",
    "Been doing a lot of {hobby} lately, {name} got me into it {when}.",
    "We finally booked the {event} for {date}, {name} is bringing {num} {objects}.",
    "My {rel} {rel_name} no longer does {hobby}, switched to {hobby2} {when}.",
    "Remember the {event} at {rare}? {name} stayed until {hour} and it was {adj}.",
    "{name} called {when} to say the {event} in {place} is moved to {date}.",
    "I met {name} at {rare} {when}, we talked about {hobby} for hours.",
]
ASSISTANT_TEMPLATES = [
    "That sounds {adj}! How did {name} like the {event} in {place}?",
    "Nice, {num} {objects} is a lot. Are you planning another {event} soon?",
    "Congratulations to your {rel} {rel_name}! Being a {job} in {place} must be {adj}.",
    "You mentioned {hobby} before. Is {name} still doing it with you on weekends?",
    "Good to know the {event} is on {date}. Should I remind you a week before?",
    "I hope the trip to {place} with {name} was {adj} despite everything.",
]
_FORMATTER = string.Formatter()


@dataclass(frozen=True)
class Persona:
    """The user's world: who is who, fixed by the seed."""
    relatives: dict[str, str]  # relation -> name ("sister" -> "Lena")
    rare: tuple[str, ...]  # made-up places ("the Kalomi café")


@dataclass(frozen=True)
class Generated:
    """One generated message with the slot values its text used (what a question may ask)."""
    session_id: str
    message: Message
    slots: dict[str, str]


def make_persona(seed: int) -> Persona:
    rng = random.Random(f"{seed}:persona")
    names = rng.sample(PEOPLE, len(RELATIONS))
    rare: list[str] = []
    seen: set[str] = set()
    while len(rare) < 600:
        word = "".join(rng.choice(SYLLABLES) for _ in range(rng.choice((2, 3)))).capitalize()
        if word not in seen:
            seen.add(word)
            rare.append(f"the {word} {rng.choice(RARE_KINDS)}")
    return Persona(dict(zip(RELATIONS, names, strict=True)), tuple(rare))


def _zipf_pick(rng: random.Random, items: Sequence[str]) -> str:
    """Low indexes far more often than high ones, as names of places come up in real chats."""
    return items[min(len(items) - 1, int(rng.paretovariate(1.1)) - 1)]


def _absolute_date(rng: random.Random, ts_ms: int) -> str:
    """A date near the message's own time, as people write them: "May 2023", "12 June 2023"."""
    day = (dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ts_ms)
           + dt.timedelta(days=rng.randint(-60, 60))).date()
    if rng.random() < 0.5:
        return f"{MONTH_NAMES[day.month - 1]} {day.year}"
    return f"{day.day} {MONTH_NAMES[day.month - 1]} {day.year}"


def _slot_values(rng: random.Random, persona: Persona, ts_ms: int) -> dict[str, str]:
    rel = rng.choice(RELATIONS)
    hobby, hobby2 = rng.sample(HOBBIES, 2)
    return {
        "name": rng.choice(PEOPLE), "rel": rel, "rel_name": persona.relatives[rel],
        "event": rng.choice(EVENTS), "place": rng.choice(PLACES), "job": rng.choice(JOBS),
        "hobby": hobby, "hobby2": hobby2, "objects": rng.choice(OBJECTS),
        "num": str(rng.randint(2, 40)), "money": str(rng.choice((15, 40, 85, 120, 350, 1200))),
        "adj": rng.choice(ADJECTIVES), "hour": f"{rng.randint(1, 11)} {rng.choice(('am', 'pm'))}",
        "when": _on_date(_absolute_date(rng, ts_ms)) if rng.random() < 0.2
                else rng.choice(RELATIVE_WHEN),
        "date": _absolute_date(rng, ts_ms), "rare": _zipf_pick(rng, persona.rare),
    }


def _on_date(date: str) -> str:
    return f"{'on' if date[0].isdigit() else 'in'} {date}"


def _text(rng: random.Random, persona: Persona, role: str, ts_ms: int) -> tuple[str, dict[str, str]]:
    """One message of 15-25 words (a template, topped up with everyday tails) and its slots."""
    template = rng.choice(USER_TEMPLATES if role == "user" else ASSISTANT_TEMPLATES)
    values = _slot_values(rng, persona, ts_ms)
    used = {name: values[name] for _, name, _, _ in _FORMATTER.parse(template) if name}
    text = template.format(**values)
    target = rng.randint(15, 25)
    while (short := target - len(text.split())) > 0:
        fitting = [t for t in TAILS if len(t.split()) <= short + 2]
        if not fitting:
            break
        tail = rng.choice(fitting)
        if short - len(tail.split()) >= 3 and rng.random() < 0.5:
            used.setdefault("rare", values["rare"])
            tail += f" near {values['rare']}"
        text += " " + tail[0].upper() + tail[1:] + "."
    return text, used


def conversation(seed: int) -> Iterator[Generated]:
    """An endless chat history, a pure function of the seed: any size is a prefix of any larger
    one. Messages 3-45 s apart, a 35-120 min pause now and then (a segment closes at 30 min of
    silence), and 1-10 h or 1-3 days between sessions of 20-40 messages."""
    rng = random.Random(f"{seed}:conversation")
    persona = make_persona(seed)
    now = CHAT_BASE_TIME_MS
    session = 0
    while True:
        for i in range(rng.randint(20, 40)):
            role = "user" if i % 2 == 0 else "assistant"
            content, slots = _text(rng, persona, role, now)
            yield Generated(f"s{session:05d}", Message(role, content, now), slots)
            now += (rng.randint(35, 120) * 60_000 if rng.random() < 0.03
                    else rng.randint(3, 45) * 1000)
        session += 1
        hours = rng.uniform(1, 10) if rng.random() < 0.7 else rng.uniform(24, 72)
        now += int(hours * 3_600_000)


def generated(seed: int, count: int) -> list[Generated]:
    """The first `count` messages of the conversation of `seed`."""
    stream = conversation(seed)
    return [next(stream) for _ in range(count)]


def chat_adds(user_id: str, messages: Sequence[Generated]) -> list[AddRequest]:
    """Consecutive messages of one session, at most ADD_SIZE per Add (a session of 30 is sent as
    20 + 10), as a chat platform sends them."""
    adds: list[AddRequest] = []
    batch: list[Generated] = []
    for g in [*messages, None]:
        if batch and (g is None or g.session_id != batch[0].session_id or len(batch) == ADD_SIZE):
            adds.append(AddRequest(f"r{len(adds):06d}", user_id, batch[0].session_id,
                                   tuple(b.message for b in batch)))
            batch = []
        if g is not None:
            batch.append(g)
    return adds


# Question templates by kind; a question is asked of a message whose text filled every slot it
# names, so its words are words of a stored message.
QUESTIONS: dict[str, list[str]] = {
    "when": ["When did {name} go to the {event}?", "When was the {event} in {place}?",
             "When did my {rel} start working as a {job}?", "When did I buy the {objects}?",
             "When did {name} move to {place}?", "When is the {event} with {name}?"],
    "now": ["What does my {rel} do now?", "Where does {rel_name} work now?",
            "Is {name} still into {hobby}?", "What is my {rel} doing these days?",
            "Where is {name} currently living?", "What hobby does my {rel} have now?"],
    "other": ["What did {name} say about the {event}?", "How many {objects} did I get?",
              "Who came to the {event} in {place}?", "How was the {event} with {name}?",
              "What happened at {rare}?", "Who got me into {hobby}?",
              "How much did the {objects} for the {event} cost?"],
}
QUESTION_MIX = (("when", 0.35), ("now", 0.25), ("other", 0.40))


def chat_questions(seed: int, source: Sequence[Generated],
                   count: int) -> list[tuple[str, str]]:
    """(kind, question) pairs, each built from the slots of one stored message."""
    rng = random.Random(f"{seed}:queries")
    kinds = [k for k, _ in QUESTION_MIX]
    weights = [w for _, w in QUESTION_MIX]
    queries: dict[str, str] = {}  # question -> kind; each question once
    for _ in range(count * 100):
        if len(queries) == count:
            break
        kind = rng.choices(kinds, weights)[0]
        slots = rng.choice(source).slots
        fitting = [t for t in QUESTIONS[kind]
                   if all(n in slots for _, n, _, _ in _FORMATTER.parse(t) if n)]
        if fitting:
            question = rng.choice(fitting).format(**slots)
            if question not in queries and plan(question).expression is not None:
                queries[question] = kind
    return [(kind, question) for question, kind in queries.items()]



# ---- words: many users' messages, cheap to generate per user -----------------------------

COMMON_WORDS = """
    the be to of and a in that have i it for not on with he as you do at this but his by from
    they we say her she or an will my one all would there their what so up out if about who get
    which go me when make can like time no just him know take people into year your good some
    could them see other than then now look only come its over think also back after use two how
    our work first well way even new want because any these give day most us is was are were
    been has had did said made going got need meeting tomorrow today yesterday week month plan
    call email send project idea remember please thanks sure maybe really think pretty great
    problem question answer
""".split()

NAMES = """
    Alice Bruno Chiara Dmitri Elena Farid Greta Hiro Ingrid Jonas Kavya Lars Mei Nadia Oscar
    Priya Quentin Rosa Sven Tariq Uma Viktor Wen Xavier Yara Zoltan Amara Bjorn Carmen Diego
    Esther Felix Gita Hamza Irene Jamal Keiko Luca Marta Nikos Olga Pablo Rania Stefan Tomas
    Ulla Vera Wanda Yusuf Berlin Lisbon Nairobi Osaka Quito Tallinn Zurich Monday Friday
""".split()

ONSETS = """
    b br ch d dr f fl g gl gr h j k kl kr l m n p pl pr qu r s sh sk sl st t th tr v w z zh
""".split()
VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "ie", "oa", "ou", "y"]
CODAS = ["", "", "", "n", "r", "s", "l", "k", "nd", "st", "x", "m", "rt"]


@dataclass(frozen=True)
class Vocabulary:
    """Words with Zipf-like weights (as cumulative weights, for random.choices)."""
    words: tuple[str, ...]
    cum_weights: tuple[float, ...]
    made_up: tuple[str, ...]


def _made_up_word(rng: random.Random) -> str:
    return "".join(rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS)
                   for _ in range(rng.choice((2, 2, 3))))


@cache
def vocabulary(seed: int, size: int = 3000) -> Vocabulary:
    """The shared vocabulary. Weights follow Zipf (1/rank) so a few words are everywhere and most
    are rare, as in real text; common English words take the top ranks."""
    rng = random.Random(f"{seed}:vocabulary")
    common = set(COMMON_WORDS)
    made_up: list[str] = []
    seen: set[str] = set()
    while len(made_up) < size:
        word = _made_up_word(rng)
        if word not in seen and word not in common:
            seen.add(word)
            made_up.append(word)
    words = list(dict.fromkeys(COMMON_WORDS)) + made_up
    total, cum = 0.0, []
    for rank in range(1, len(words) + 1):
        total += 1.0 / rank
        cum.append(total)
    return Vocabulary(tuple(words), tuple(cum), tuple(made_up))


def _number(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.4:
        return str(rng.randint(2, 99))
    if kind < 0.7:
        return str(rng.randint(1990, 2030))
    if kind < 0.85:
        return f"{rng.randint(1, 999)}.{rng.randint(0, 99):02d}"
    return f"{rng.randint(100, 999)}-{rng.randint(1000, 9999)}"


def _sentence(rng: random.Random, vocab: Vocabulary, favourites: Sequence[str]) -> str:
    """About 20 words: mostly the shared vocabulary, some of the user's favourite words (so each
    user has topics of their own), and now and then a name or a number."""
    count = max(6, min(40, round(rng.gauss(20, 5))))
    tokens = rng.choices(vocab.words, cum_weights=vocab.cum_weights, k=count)
    for i in range(count):
        roll = rng.random()
        if roll < 0.15:
            tokens[i] = rng.choice(favourites)
        elif roll < 0.21:
            tokens[i] = rng.choice(NAMES)
        elif roll < 0.25:
            tokens[i] = _number(rng)
        elif roll < 0.28:
            tokens[i] += ","
    tokens[0] = tokens[0][:1].upper() + tokens[0][1:]
    return " ".join(tokens).rstrip(",") + rng.choice(".....?!")


def word_messages(seed: int, user_id: str, count: int) -> list[Message]:
    """A user's messages, a pure function of (seed, user_id, count): a user is the same in every
    store, and a build can be split over processes without passing any text around."""
    vocab = vocabulary(seed)
    rng = random.Random(f"{seed}:user:{user_id}")
    favourites = rng.sample(vocab.made_up, 40)
    start = WORD_BASE_TIME_MS + rng.randint(0, 86_400_000)
    return [Message("user" if i % 2 == 0 else "assistant", _sentence(rng, vocab, favourites),
                    start + i * 45_000) for i in range(count)]


# Long messages: an assistant's reply of several paragraphs, a user's of a few sentences. Sentence
# counts follow a log-normal of mean 17 sentences of about 20 words, a tenth are one-liners: 308
# words a message on average (long-turn chats, BEAM dev: messages of 150+ words average 460).
LONG_SENTENCES_MU = 2.7
LONG_SENTENCES_SIGMA = 0.5
# A long reply is about a few of the user's topic words: drawn from all 40 at the rate of a short
# message, every word would be in nearly every reply, and no question's word would be rare.
LONG_TOPIC_WORDS = 4


def long_messages(seed: int, user_id: str, count: int) -> list[Message]:
    """A user of long messages, a pure function of (seed, user_id, count), as `word_messages`."""
    vocab = vocabulary(seed)
    rng = random.Random(f"{seed}:long:{user_id}")
    favourites = rng.sample(vocab.made_up, 40)
    start = WORD_BASE_TIME_MS + rng.randint(0, 86_400_000)
    messages = []
    for i in range(count):
        sentences = 1 if rng.random() < 0.1 else max(2, round(rng.lognormvariate(
            LONG_SENTENCES_MU, LONG_SENTENCES_SIGMA)))
        topic = rng.sample(favourites, LONG_TOPIC_WORDS)  # what this reply is about
        paragraphs = [" ".join(_sentence(rng, vocab, topic) for _ in range(min(5, sentences - done)))
                      for done in range(0, sentences, 5)]
        messages.append(Message("user" if i % 2 == 0 else "assistant", "\n\n".join(paragraphs),
                                start + i * 45_000))
    return messages


def adds_of(user_id: str, messages: Sequence[Message]) -> list[AddRequest]:
    """Messages as 20-message Adds, one session per 100 messages."""
    return [AddRequest(f"{user_id}-r{start // ADD_SIZE:05d}", user_id,
                       f"{user_id}-s{start // WORD_SESSION_SIZE:03d}",
                       tuple(messages[start:start + ADD_SIZE]))
            for start in range(0, len(messages), ADD_SIZE)]


def word_adds(seed: int, user_id: str, count: int) -> list[AddRequest]:
    """The user's messages as 20-message Adds, one session per 100 messages."""
    return adds_of(user_id, word_messages(seed, user_id, count))


def word_queries(seed: int, messages: Sequence[Message], count: int) -> list[str]:
    """Queries of 3-6 words from a user's own messages, so they have matches in that user's
    index; a third mix in a word from another message, as a real question would."""
    rng = random.Random(f"{seed}:queries")
    queries: list[str] = []
    for _ in range(count):
        words = _plain_words(rng.choice(messages).content)
        chosen = rng.sample(words, min(len(words), rng.randint(3, 6)))
        if rng.random() < 0.33:
            chosen[-1] = rng.choice(_plain_words(rng.choice(messages).content))
        queries.append(" ".join(chosen))
    return queries


def _plain_words(content: str) -> list[str]:
    return list(dict.fromkeys(w.strip(".,?!") for w in content.split()))



# ---- stores: other users built once, measured users added by manifest --------------------

# Bump when generation or building changes, so a kept store of an older version is rebuilt.
CORPUS_FORMAT = "bench-corpus-v1"
# The modules whose source shapes the rows an Add writes (schema, index terms, features, views):
# with the index identity they make the write identity a kept store records, so a store written
# by other code is rebuilt instead of measured as if it were current.
# The modules whose code decides what a built store holds (a kept build is reused until one
# changes), by their path in the package.
WRITE_MODULES = ("storage/migrations", "analysis/tokenizer", "analysis/features", "analysis/dates",
                 "analysis/speakers", "analysis/tokens", "storage/views", "storage/speakers",
                 "memory/writes", "memory/derived")
# Building is set-up, not the thing measured: written crash-safe, not power-safe.
BUILD_SYNCHRONOUS = "NORMAL"
# A checkpoint every this many Adds keeps a big user's WAL from growing to hundreds of MB (the
# server's checkpointer thread does this in production; in-process nobody else does).
CHECKPOINT_EVERY_ADDS = 50
PROGRESS_SECONDS = 5.0  # how often a long build reports its progress on stderr


@cache
def write_identity() -> str:
    digest = hashlib.sha256(index_identity(RetrievalConfig().index_identity()).encode())
    for name in WRITE_MODULES:
        digest.update((REPO_ROOT / "aml_retriever" / f"{name}.py").read_bytes())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class OthersPlan:
    """`messages` messages of words users, ~`per_user` each."""
    seed: int
    messages: int
    per_user: int = 1_000

    def users(self) -> list[tuple[str, int]]:
        """(user_id, message count): `messages` in all, split into users of ~per_user each (the
        remainder spread one by one). A smaller plan's users are a prefix of a larger one's."""
        if self.messages <= 0:
            return []
        users = max(1, round(self.messages / self.per_user))
        base, extra = divmod(self.messages, users)
        return [(f"other-{i:06d}", base + (1 if i < extra else 0)) for i in range(users)]

    def key(self) -> dict[str, Any]:
        """What a kept build must match to be reused."""
        return {"format": CORPUS_FORMAT, "aml_retriever": __version__,
                "write_identity": write_identity(), **asdict(self)}


@dataclass(frozen=True)
class OthersStore:
    """A built store of other users: the catalog path, its plan, and how its build went."""
    path: Path
    plan: OthersPlan
    build: dict[str, Any]


def shared_dir(root: Path) -> Path:
    """Stores several benchmarks use live beside their own work directories, in shared/."""
    return root.parent / "shared"


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One builder of a shared store at a time, across processes (two benchmarks started on one
    work directory would otherwise both build it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _write_words_users(job: tuple[str, int, list[tuple[str, int]], int, int]) -> tuple[int, float]:
    """Worker: write the given words users with svc.add. Each worker has its own Store (its own
    connections); users never span workers, so no two processes write one file."""
    path, seed, users, worker, workers = job
    store = Store(path, synchronous=BUILD_SYNCHRONOUS)
    svc = MemoryService(store)
    written, started = 0, time.perf_counter()
    try:
        for done, (user_id, count) in enumerate(users, 1):
            for request in word_adds(seed, user_id, count):
                svc.add(request)
            written += count
            # Keep every WAL small: otherwise each of the ~1,000 files keeps a few MB of WAL.
            store.checkpoint_dirty()
            if done % 50 == 0 or done == len(users):
                rate = written / (time.perf_counter() - started)
                log(f"  worker {worker + 1}/{workers}: {done}/{len(users)} users, "
                    f"{written:,} messages, {rate:,.0f} msg/s")
    finally:
        store.close()
    return written, time.perf_counter() - started


def build_words_users(path: Path, seed: int, users: list[tuple[str, int]],
                      jobs: int) -> dict[str, Any]:
    """Write words `users` into the store at `path` with `jobs` processes; returns timings."""
    Store(path, synchronous=BUILD_SYNCHRONOUS).close()  # the catalog once, before workers race
    jobs = max(1, min(jobs, len(users)))
    # Round-robin, so each worker gets a similar mix of sizes.
    work = [(str(path), seed, users[i::jobs], i, jobs) for i in range(jobs)]
    started = time.perf_counter()
    if jobs == 1:
        results = [_write_words_users(work[0])]
    else:
        # spawn: a fresh interpreter per worker, so no SQLite handle is inherited across fork.
        with multiprocessing.get_context("spawn").Pool(jobs) as pool:
            results = pool.map(_write_words_users, work)
    seconds = time.perf_counter() - started
    messages = sum(r[0] for r in results)
    return {"seconds": round(seconds, 2), "messages": messages, "users": len(users),
            "jobs": jobs, "messages_per_second": round(messages / seconds) if seconds else None}


def others_store(shared: Path, plan: OthersPlan, jobs: int) -> OthersStore:
    """The store of `plan`'s users under `shared`, built now or reused from a kept build of the
    same plan (its manifest is written only after a complete build)."""
    directory = shared / f"others-n{plan.messages}-u{plan.per_user}-s{plan.seed}"
    path, manifest_path = directory / "aml.db", directory / "manifest.json"
    key = plan.key()  # before building: the code that writes is the code recorded
    with _locked(shared / f"{directory.name}.lock"):
        if manifest_path.exists():
            manifest = json.loads(manifest_path.read_text())
            if manifest.get("plan") == key:
                log(f"others: reusing {plan.messages:,} messages built earlier in {directory}")
                return OthersStore(path, plan, {**manifest["build"], "reused": True})
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        users = plan.users()
        log(f"others: building {plan.messages:,} messages of {len(users):,} users with "
            f"{min(jobs, len(users))} process(es)")
        build = build_words_users(path, plan.seed, users, jobs)
        log(f"others: built in {build['seconds']:,.1f} s ({build['messages_per_second']:,} msg/s)")
        manifest_path.write_text(json.dumps({"plan": key, "build": build}, indent=2))
    return OthersStore(path, plan, {**build, "reused": False})


def user_files(path: Path) -> list[Path]:
    """Every user file of the store at `path` (the SQLite main files, not their -wal/-shm)."""
    return sorted(Path(str(path) + ".users").glob("??/*.db"))


def link_users(source: Path, target: Path) -> int:
    """Put every user file of the store `source` into the store `target` as a hard link (a copy
    where links are impossible). The benchmarks never write other users' files, only read a few,
    so a 1M-message crowd costs one build however many stores hold it."""
    linked = 0
    for file in user_files(source):
        dest = Path(str(target) + ".users") / file.parent.name / file.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(file, dest)
        except OSError:
            shutil.copy2(file, dest)
        linked += 1
    return linked


def prepare_store(path: Path, others: OthersStore | None, users: Mapping[str, Mapping[str, Any]],
                  write: Callable[[MemoryService, str], dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A store at `path` holding the users of `others` (linked) and `users` (user_id -> what
    makes it: a plan a kept build must match), each written by `write(svc, user_id)` unless the
    manifest beside the store shows a build of the same plan. Returns each user's build."""
    manifest_path = path.parent / "manifest.json"
    base = others.plan.key() if others else None
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    if manifest.get("base", "absent") != base:
        shutil.rmtree(path.parent, ignore_errors=True)
        path.parent.mkdir(parents=True)
        Store(path, synchronous=BUILD_SYNCHRONOUS).close()
        if others:
            log(f"linking {others.plan.messages:,} messages of other users into {path.parent}")
            link_users(others.path, path)
        manifest = {"base": base, "users": {}}
        manifest_path.write_text(json.dumps(manifest, indent=2))
    builds: dict[str, dict[str, Any]] = {}
    svc: MemoryService | None = None
    try:
        for user_id, user_plan in users.items():
            key = {**user_plan, "format": CORPUS_FORMAT, "write_identity": write_identity()}
            entry = manifest["users"].get(user_id)
            if entry and entry["plan"] == key:
                log(f"{user_id}: reusing the build in {path.parent}")
                builds[user_id] = {**entry["build"], "reused": True}
                continue
            if svc is None:
                svc = MemoryService.open(str(path), synchronous=BUILD_SYNCHRONOUS)
            shard = svc.store.shard_path(user_id)
            for stale in shard.parent.glob(shard.name + "*"):  # a partial or older build
                stale.unlink()
            build = write(svc, user_id)
            svc.store.checkpoint_dirty()
            manifest["users"][user_id] = {"plan": key, "build": build}
            manifest_path.write_text(json.dumps(manifest, indent=2))
            builds[user_id] = {**build, "reused": False}
    finally:
        if svc is not None:
            svc.close()
    return builds


def write_adds(svc: MemoryService, adds: Sequence[AddRequest], label: str) -> dict[str, Any]:
    """svc.add every request in order, with a checkpoint every CHECKPOINT_EVERY_ADDS and
    progress on stderr; returns timings."""
    total = sum(len(a.messages) for a in adds)
    started = last_log = time.perf_counter()
    written = 0
    for i, request in enumerate(adds, 1):
        svc.add(request)
        written += len(request.messages)
        if i % CHECKPOINT_EVERY_ADDS == 0:
            svc.store.checkpoint_dirty()
        if time.perf_counter() - last_log >= PROGRESS_SECONDS:
            last_log = time.perf_counter()
            rate = written / (last_log - started)
            log(f"  {label}: {written:,}/{total:,} messages, {rate:,.0f} msg/s, "
                f"~{(total - written) / rate:,.0f} s left")
    seconds = time.perf_counter() - started
    return {"seconds": round(seconds, 2), "messages": total, "adds": len(adds),
            "messages_per_second": round(total / seconds) if seconds else None}


def store_bytes(path: Path) -> dict[str, int]:
    """Bytes on disk of a store: catalog, user files, and their -wal/-shm files."""
    sizes = {"catalog": 0, "user_files": 0, "wal": 0, "shm": 0}
    for file in [*Path(path.parent).glob(path.name + "*"), *Path(str(path) + ".users").rglob("*")]:
        if not file.is_file():
            continue
        size = file.stat().st_size
        if file.name.endswith("-wal"):
            sizes["wal"] += size
        elif file.name.endswith("-shm"):
            sizes["shm"] += size
        elif file.parent == path.parent:
            sizes["catalog"] += size
        else:
            sizes["user_files"] += size
    sizes["total"] = sum(sizes.values())
    return sizes

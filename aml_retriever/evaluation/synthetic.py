"""Synthetic conversations with planted facts and gold evidence, deterministic by seed.

A user's memory is a timeline of chat sessions filled with chit-chat; each suite (suites.py)
plants facts into chosen sessions and writes questions whose gold evidence is exactly the planted
messages. The same (suite, scale, difficulty, seed) always gives byte-identical data: every random
choice comes from one `random.Random` per user seeded with a string (no hash randomisation), all
times are offsets from a fixed date, and `dataset.dumps` fixes the serialisation.

After assembly every gold evidence text must occur exactly once in the user's memory, as a whole
message and inside no other message; a question whose evidence fails this is dropped and counted
(`dropped_ambiguous`), so scoring by containment (metrics.py) is exact.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aml_retriever.evaluation import shapes, suites, vocab
from aml_retriever.evaluation.dataset import Conversation, Evidence, Question, dataset_to_json
from aml_retriever.evaluation.memory import DIFFICULTIES, Draft, Memory, Planned, Session, pick_difficulty
from aml_retriever.evaluation.suites import MULTILINGUAL_LANGUAGES, SUITES

# Every suite a run can name: `mixed` runs SUITES at once; the suites of other data shapes
# (shapes.py) run on their own, so the mixed figures keep their meaning.
ALL_SUITES = (*SUITES, *shapes.SHAPE_SUITES)
PLANTERS = {**suites.PLANTERS, **shapes.PLANTERS}


@dataclass(frozen=True)
class Scale:
    users: int
    messages: int  # chit-chat messages per user; planted facts come on top
    per_suite: int  # questions per suite per user in a `mixed` run


# `tiny` is for tests; `large` meets the >= 50k messages per user of a long-lived memory.
SCALES = {
    "tiny": Scale(users=1, messages=160, per_suite=2),
    "small": Scale(users=2, messages=600, per_suite=3),
    "medium": Scale(users=4, messages=2000, per_suite=6),
    "large": Scale(users=2, messages=50_000, per_suite=12),
}
# A run of one suite asks this many times the questions a `mixed` run asks of that suite, so
# single-suite numbers rest on a comparable count of questions.
SINGLE_SUITE_FACTOR = 3
DIFFICULTY_CHOICES = (*DIFFICULTIES, "mixed")
# Share of chit-chat that names a planted topic without stating a fact, by difficulty.
ECHO_SHARE = {"easy": 0.0, "medium": 0.04, "hard": 0.12}
# Share of chit-chat in other languages when the run includes the multilingual suite.
FOREIGN_SHARE = 0.12
SESSION_MESSAGES = (8, 32)
MESSAGE_GAP_SECONDS = (20, 150)
# Sessions start in one of three daily slots, each ending before the next starts (32 messages at
# most 150 s apart is 80 minutes), so every message of a session has the session's date: a
# relative date in a message resolves against that date.
SLOT_HOURS = (8, 13, 18)
MAX_ADD_MESSAGES = 20
PATIENCE = 5
EPOCH_DAY = dt.date(2023, 1, 2)


# ---- the timeline ----------------------------------------------------------------------------

def day_ms(day: dt.date, seconds: int = 0) -> int:
    return ((day - dt.date(1970, 1, 1)).days * 86_400 + seconds) * 1000


def build_sessions(rng: random.Random, messages: int, difficulty: str,
                   languages: Sequence[str]) -> list[Session]:
    """Sessions of chit-chat holding `messages` messages in all, alternating user and assistant."""
    sessions: list[Session] = []
    slot = 0
    left = messages
    while left > 0:
        size = min(left, rng.randint(*SESSION_MESSAGES))
        left -= size
        slot += rng.randint(1, 5)
        day = EPOCH_DAY + dt.timedelta(days=slot // len(SLOT_HOURS))
        hour = SLOT_HOURS[slot % len(SLOT_HOURS)]
        start = day_ms(day, hour * 3600 + rng.randint(0, 59) * 60)
        session = Session(len(sessions), day, start)
        for i in range(size):
            role = "user" if i % 2 == 0 else "assistant"
            session.drafts.append(Draft(role, _chit_chat(rng, role, difficulty, languages)))
        sessions.append(session)
    return sessions


def _chit_chat(rng: random.Random, role: str, difficulty: str, languages: Sequence[str]) -> str:
    slots = {name: rng.choice(options) for name, options in vocab.FILLER_SLOTS.items()}
    echo = ECHO_SHARE["medium" if difficulty == "mixed" else difficulty]
    draw = rng.random()
    if role == "user" and languages and draw < FOREIGN_SHARE:
        return rng.choice(vocab.FOREIGN_FILLER[rng.choice(languages)])
    if role == "user" and draw > 1.0 - echo:
        return rng.choice(vocab.ECHO_FILLER).format(noun=rng.choice(vocab.ECHO_NOUNS))
    pool = vocab.USER_FILLER if role == "user" else vocab.ASSISTANT_FILLER
    text = rng.choice(pool).format(**slots)
    return text[0].upper() + text[1:]


# ---- assembly --------------------------------------------------------------------------------

@dataclass
class UserData:
    conversation: Conversation
    dropped_ambiguous: int


def assemble(rng: random.Random, user_id: str, memory: Memory, planned: Sequence[Planned]) -> UserData:
    """Sessions -> Adds of at most MAX_ADD_MESSAGES in time order; evidence keys -> (request_id,
    position, content); questions whose evidence is not unique are dropped."""
    adds: list[dict[str, Any]] = []
    where: dict[str, Evidence] = {}
    contents: list[str] = []
    speakers = shapes.speaker_names(memory)
    for session in memory.sessions:
        session_id = f"{user_id}:s{session.index:04d}"
        stamp = session.start_ms
        drafts = session.drafts
        start = 0
        while start < len(drafts):
            size = min(len(drafts) - start, rng.randint(MAX_ADD_MESSAGES // 2, MAX_ADD_MESSAGES))
            request_id = f"{user_id}:a{len(adds):05d}"
            messages = []
            for position, draft in enumerate(drafts[start:start + size]):
                stamp += rng.randint(*MESSAGE_GAP_SECONDS) * 1000
                messages.append({"role": draft.role, "content": draft.content, "timestamp": stamp})
                contents.append(draft.content)
                if draft.key is not None:
                    where[draft.key] = Evidence(request_id, position, draft.content,
                                                speakers.get(draft.role, ""))
            adds.append({"request_id": request_id, "user_id": user_id, "session_id": session_id,
                         "messages": messages})
            start += size
    corpus = "\x00".join(contents)
    questions, dropped = [], 0
    for p in planned:
        evidence = tuple(where[key] for key in p.evidence)
        if any(corpus.count(e.content) != 1 for e in evidence):
            dropped += 1
            continue
        questions.append(Question(f"{user_id}:q{len(questions):03d}", p.question, p.suite,
                                  p.category, evidence, p.answer, p.adversarial, p.difficulty))
    return UserData(Conversation(user_id, tuple(adds), tuple(questions)), dropped)


# ---- entry points ----------------------------------------------------------------------------

def generate_user(suite: str, scale: str, difficulty: str, seed: int, index: int) -> UserData:
    if suite not in (*ALL_SUITES, "mixed"):
        raise ValueError(f"unknown suite {suite!r}; known: {', '.join((*ALL_SUITES, 'mixed'))}")
    if difficulty not in DIFFICULTY_CHOICES:
        raise ValueError(f"unknown difficulty {difficulty!r}; known: {', '.join(DIFFICULTY_CHOICES)}")
    size = SCALES[scale]
    user_id = f"{suite}-{scale}-{difficulty}-seed{seed}-u{index}"
    rng = random.Random(f"aml-eval|{user_id}")
    suites = SUITES if suite == "mixed" else (suite,)
    languages = MULTILINGUAL_LANGUAGES if "multilingual" in suites else ()
    memory = shapes.MEMORIES.get(suite, Memory)(rng, build_sessions(rng, size.messages, difficulty,
                                                                     languages))
    quota = size.per_suite * (1 if suite == "mixed" else SINGLE_SUITE_FACTOR)
    planned: list[Planned] = []
    counts = dict.fromkeys(suites, 0)
    misses = dict.fromkeys(suites, 0)
    # Round-robin over suites so no suite uses up the shared pools (names, owners) first. A
    # planter may come back empty when its random draw collides; a suite that does so
    # PATIENCE times in a row has used up its families at this scale.
    while any(counts[s] < quota and misses[s] < PATIENCE for s in suites):
        for name in suites:
            if counts[name] >= quota or misses[name] >= PATIENCE:
                continue
            made = PLANTERS[name](memory, pick_difficulty(rng, difficulty))[:quota - counts[name]]
            misses[name] = 0 if made else misses[name] + 1
            planned.extend(made)
            counts[name] += len(made)
    return assemble(rng, user_id, memory, planned)


def generate(suite: str, scale: str, difficulty: str, seed: int) -> tuple[list[Conversation],
                                                                          dict[str, Any]]:
    """Every user of one dataset, plus its description (parameters and counts)."""
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; known: {', '.join(SCALES)}")
    users = [generate_user(suite, scale, difficulty, seed, i) for i in range(SCALES[scale].users)]
    conversations = [u.conversation for u in users]
    meta = {"suite": suite, "scale": scale, "difficulty": difficulty, "seed": seed,
            "users": len(users), "messages": sum(c.message_count for c in conversations),
            "questions": sum(len(c.questions) for c in conversations),
            "dropped_ambiguous": sum(u.dropped_ambiguous for u in users)}
    return conversations, meta


def generate_json(suite: str, scale: str, difficulty: str, seed: int) -> dict[str, Any]:
    conversations, meta = generate(suite, scale, difficulty, seed)
    return dataset_to_json(conversations, meta)

"""The suites: each plants facts into a Memory and writes the questions they answer.

One suite stresses one ability:

  classic       planted names, places, numbers and dates among chit-chat
  update        a fact that changes ("moved to Berlin", later "moved to Munich"): the current
                state and the one before it
  temporal      relative dates ("yesterday", "last Saturday", "two weeks ago") that only the
                message's own time resolves; questions name absolute dates
  paraphrase    questions sharing few words with their evidence (synonyms, irregular inflections)
  multilingual  Chinese, Japanese, Korean, Cyrillic, Arabic, Latin with diacritics
  multi_hop     answers that need two or more messages from different sessions
  adversarial   the answer is not in memory; the right outcome is low confidence

A planter returns the questions of one fact family (possibly none when the user has used every
family up). Difficulty sets how many near-miss distractors surround the evidence (the same topic
about another owner, or the same event on another date), whether the fact sits inside a longer
message of chatter, and which phrasing the question takes.
"""

from __future__ import annotations

import datetime as dt
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from aml_retriever.evaluation import vocab
from aml_retriever.evaluation.memory import Memory, Planned, Planter, distractor_count

SUITES = ("classic", "update", "temporal", "paraphrase", "multilingual", "multi_hop", "adversarial")
MULTILINGUAL_LANGUAGES = ("zh", "ja", "ko", "ru", "ar", "latin")
# A planter tries this many random draws (topic, owner, date) before it reports a family used up.
ATTEMPTS = 30

# ---- owners and wording -----------------------------------------------------------------------


@dataclass(frozen=True)
class Owner:
    """Whose fact it is: the user ("I") or one of the user's relations."""

    key: str
    subject: str  # "I" / "My sister"
    possessive: str  # "My" / "My sister's"

    @property
    def first_person(self) -> bool:
        return self.key == "I"


ME = Owner("I", "I", "My")
RELATIVES = tuple(Owner(r, f"My {r}", f"My {r}'s") for r in vocab.RELATIONS)


def low(text: str) -> str:
    """Sentence-initial form to mid-sentence form ("My sister" -> "my sister"; "I" stays)."""
    return text if text == "I" or text.startswith("I ") else text[0].lower() + text[1:]


def article(noun: str) -> str:
    return ("an " if noun[0].lower() in "aeiou" else "a ") + noun


def strip_diacritics(text: str) -> str:
    decomposed = unicodedata.normalize("NFD", text)
    return unicodedata.normalize("NFC", "".join(c for c in decomposed if not unicodedata.combining(c)))


def choose_owner(mem: Memory, concept: str, owners: Sequence[Owner], prefer_me: bool = True) -> Owner | None:
    """A free owner for a concept; the user first half of the time, since most questions to a
    memory are about its user."""
    free = [o for o in owners if mem.free(o.key, concept)]
    if not free:
        return None
    if prefer_me and free[0].first_person and mem.rng.random() < 0.5:
        return free[0]
    return mem.rng.choice(free)


def say(mem: Memory, difficulty: str, content: str, language: str = "en") -> str:
    """Hard facts sit inside a longer message; easier ones stand alone."""
    return mem.wrap(content, language) if difficulty == "hard" else content


# ---- classic ----------------------------------------------------------------------------------

Values = Callable[[Memory], str]


def _pool(name: str, pool: Sequence[str]) -> Values:
    return lambda mem: mem.draw(name, pool)[0]


def _digits(n: int) -> Values:
    return lambda mem: "".join(str(mem.rng.randint(0, 9)) for _ in range(n))


def _day_month(mem: Memory) -> str:
    return f"{mem.rng.choice(vocab.MONTHS)} {mem.rng.randint(1, 28)}"


@dataclass(frozen=True)
class Fact:
    concept: str
    category: str
    statement: str  # {P}: possessive ("My sister's"), {S}: subject, {v}: value
    question: str  # {p}, {s}: the same in mid-sentence form
    values: Values


CLASSIC = (
    Fact("dentist", "name", "{P} dentist is Dr. {v}.", "Who is {p} dentist?",
         _pool("surname", vocab.SURNAMES)),
    Fact("piano_teacher", "name", "{P} piano teacher is called {v}.",
         "What is the name of {p} piano teacher?", lambda m: m.person()),
    Fact("tortoise", "name", "{P} tortoise is named {v}.", "What is {p} tortoise called?",
         _pool("pet", vocab.PET_NAMES)),
    Fact("restaurant", "place", "{P} favourite restaurant is {v}.", "What is {p} favourite restaurant?",
         _pool("restaurant", vocab.RESTAURANTS)),
    Fact("holiday", "place", "{P} next holiday is in {v}.", "Where is {p} next holiday?",
         _pool("city", vocab.CITIES)),
    Fact("gym", "place", "{P} gym is on {v}.", "Which street is {p} gym on?",
         _pool("street", vocab.STREETS)),
    Fact("school", "place", "{P} kids go to {v} Primary.", "Which school do {p} kids attend?",
         _pool("school", vocab.SCHOOLS)),
    Fact("locker", "number", "{P} locker code is {v}.", "What is {p} locker code?", _digits(4)),
    Fact("shoe", "number", "{P} shoe size is {v}.", "What is {p} shoe size?",
         lambda m: str(m.rng.randint(35, 47))),
    Fact("flat", "number", "{P} flat number is {v}.", "What is {p} flat number?",
         lambda m: str(m.rng.randint(2, 240))),
    Fact("bike_lock", "number", "{P} bike lock combination is {v}.",
         "What is {p} bike lock combination?", _digits(3)),
    Fact("birthday", "date", "{P} birthday is on {v}.", "When is {p} birthday?", _day_month),
    Fact("anniversary", "date", "{P} wedding anniversary is on {v}.",
         "When is {p} wedding anniversary?", _day_month),
    Fact("passport", "date", "{P} passport expires on {v}.", "When does {p} passport expire?",
         lambda m: f"{_day_month(m)}, {m.rng.randint(2026, 2034)}"),
)


def fact_text(fact: Fact, owner: Owner, value: str) -> str:
    return fact.statement.format(P=owner.possessive, S=owner.subject, v=value)


def fact_question(fact: Fact, owner: Owner) -> str:
    return fact.question.format(p=low(owner.possessive), s=low(owner.subject))


def _plant_fact(mem: Memory, fact: Fact, owner: Owner, difficulty: str, exclude: set[str]) -> tuple[str, str]:
    """Plant one owner's fact with a value not in `exclude`; returns (key, value)."""
    for _ in range(50):
        value = fact.values(mem)
        if value not in exclude:
            break
    exclude.add(value)
    mem.claim(owner.key, fact.concept, value)
    session = mem.rng.randrange(len(mem.sessions))
    return mem.plant(session, say(mem, difficulty, fact_text(fact, owner, value))), value


def _plant_near_misses(mem: Memory, fact: Fact, owners: Sequence[Owner], count: int,
                       difficulty: str, used: set[str]) -> None:
    for _ in range(count):
        other = choose_owner(mem, fact.concept, owners, prefer_me=False)
        if other is None:
            return
        _plant_fact(mem, fact, other, difficulty, used)


def _fact_planter(suite: str, facts: Sequence[Fact], owners: Sequence[Owner]) -> Planter:
    def plant(mem: Memory, difficulty: str) -> list[Planned]:
        open_facts = [f for f in facts if any(mem.free(o.key, f.concept) for o in owners)]
        if not open_facts:
            return []
        fact = mem.rng.choice(open_facts)
        owner = choose_owner(mem, fact.concept, owners)
        assert owner is not None
        used: set[str] = set()
        key, value = _plant_fact(mem, fact, owner, difficulty, used)
        _plant_near_misses(mem, fact, owners, distractor_count(mem.rng, difficulty), difficulty, used)
        return [Planned(suite, fact.category, difficulty, fact_question(fact, owner), value, (key,))]
    return plant


# ---- paraphrase -------------------------------------------------------------------------------

PARAPHRASE = (
    Fact("car", "synonym", "{S} purchased {v} second-hand.", "What automobile did {s} buy?",
         _pool("car", vocab.CARS)),
    Fact("physician", "synonym", "{P} physician is Dr. {v}.", "Who is {p} doctor?",
         _pool("surname", vocab.SURNAMES)),
    Fact("dog", "synonym", "{S} adopted a puppy called {v}.", "What is the name of {p} dog?",
         _pool("pet", vocab.PET_NAMES)),
    Fact("allergy", "synonym", "{S} gets hives after eating {v}.", "What food is {s} allergic to?",
         _pool("food", vocab.FOODS)),
    Fact("fear", "synonym", "{S} is terrified of {v}.", "What is {s} afraid of?",
         _pool("fear", vocab.FEARS)),
    Fact("job", "synonym", "{S} earns a living as {v}.", "What is {p} occupation?",
         lambda m: article(m.draw("job", vocab.JOBS)[0])),
    Fact("hometown", "synonym", "{S} grew up in {v}.", "What is {p} hometown?",
         _pool("city", vocab.CITIES)),
    Fact("spouse", "synonym", "{S} married {v} in a small ceremony.", "Who is {p} spouse?",
         lambda m: m.person()),
    Fact("instrument", "synonym", "{S} is taking {v} lessons.",
         "Which musical instrument is {s} learning?", _pool("instrument", vocab.INSTRUMENTS)),
    Fact("studies", "inflection", "{S} studied {v} at university.", "What subject does {s} study?",
         _pool("subject", vocab.SUBJECTS)),
    Fact("teaching", "inflection", "{S} taught {v} at a secondary school for years.",
         "What does {s} teach?", _pool("subject", vocab.SUBJECTS)),
    Fact("marathon", "inflection", "{S} ran the {v} marathon last spring.",
         "Which big race did {s} run?", _pool("city", vocab.CITIES)),
    Fact("conference", "inflection", "{S} flew to {v} for a conference.",
         "Where does {s} fly for work?", _pool("city", vocab.CITIES)),
)


# ---- update -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Changing:
    concept: str
    first_person: tuple[str, ...]  # one template per step of the chain
    third_person: tuple[str, ...]  # {S}: "My sister"
    current: tuple[str, str]  # (first person, third person); {s}
    previous: tuple[str, str]  # {latest}: the newest value
    values: Values
    bare: Callable[[str], str] = lambda v: v  # the value as named in a question


def _bare_article(value: str) -> str:
    return value.split(" ", 1)[1] if value.startswith(("a ", "an ")) else value


UPDATE = (
    Changing("residence",
             ("I just moved to {v}.", "I relocated to {v}, new flat and everything.",
              "Moving day is done, I'm settled in {v} now.", "Finally unpacked my last box in {v}."),
             ("{S} just moved to {v}.", "{S} relocated to {v}.", "{S} is settled in {v} now after the move.",
              "{S} finally unpacked the last box in {v}."),
             ("Which city do I live in now?", "Which city does {s} live in now?"),
             ("Where did I live before {latest}?", "Where did {s} live before {latest}?"),
             _pool("city", vocab.CITIES)),
    Changing("employer",
             ("I started a new job at {v}.", "I accepted the offer from {v}, starting Monday.",
              "First week at {v} went well.", "I switched jobs again, now at {v}."),
             ("{S} started a new job at {v}.", "{S} accepted an offer from {v}.",
              "{S} had a good first week at {v}.", "{S} switched jobs again, now at {v}."),
             ("Which company do I work for now?", "Which company does {s} work for now?"),
             ("Which company did I work for before {latest}?",
              "Which company did {s} work for before {latest}?"),
             _pool("company", vocab.COMPANIES)),
    Changing("car",
             ("I bought {v}.", "I traded in my old car for {v}.", "Picked up {v} from the dealer today.",
              "Sold the old one, I drive {v} now."),
             ("{S} bought {v}.", "{S} traded in the old car for {v}.", "{S} picked up {v} from the dealer.",
              "{S} sold the old one and drives {v} now."),
             ("What car do I drive now?", "What car does {s} drive now?"),
             ("What car did I have before the {latest}?", "What car did {s} have before the {latest}?"),
             _pool("car", vocab.CARS), _bare_article),
    Changing("phone",
             ("I got a new phone, {v}.", "Switched to {v} this week.", "My old phone died so now I use {v}.",
              "Upgraded again, I'm on {v} now."),
             ("{S} got a new phone, {v}.", "{S} switched to {v}.",
              "{S} now uses {v} after the old phone died.", "{S} upgraded again and is on {v} now."),
             ("Which phone do I use now?", "Which phone does {s} use now?"),
             ("Which phone did I have before the {latest}?", "Which phone did {s} have before the {latest}?"),
             _pool("phone", vocab.PHONES), _bare_article),
)
CHAIN_LENGTH = {"easy": (2, 2), "medium": (2, 3), "hard": (3, 4)}


def _change_text(change: Changing, owner: Owner, step: int, value: str) -> str:
    templates = change.first_person if owner.first_person else change.third_person
    return templates[step % len(templates)].format(S=owner.subject, v=value)


def draw_distinct(mem: Memory, values: Values, k: int) -> list[str]:
    out: list[str] = []
    for _ in range(k * 20):
        value = values(mem)
        if value not in out:
            out.append(value)
        if len(out) == k:
            break
    return out


def plant_update(mem: Memory, difficulty: str) -> list[Planned]:
    owners = (ME, *RELATIVES)
    open_changes = [c for c in UPDATE if any(mem.free(o.key, c.concept) for o in owners)]
    if not open_changes:
        return []
    change = mem.rng.choice(open_changes)
    owner = choose_owner(mem, change.concept, owners)
    assert owner is not None
    sessions = mem.sessions_apart(mem.rng.randint(*CHAIN_LENGTH[difficulty]))
    chain = draw_distinct(mem, change.values, len(sessions))
    if len(chain) < 2:
        return []
    mem.claim(owner.key, change.concept, chain[-1])
    keys = [mem.plant(session, say(mem, difficulty, _change_text(change, owner, step, value)))
            for step, (session, value) in enumerate(zip(sessions, chain, strict=False))]
    for _ in range(distractor_count(mem.rng, difficulty)):
        other = choose_owner(mem, change.concept, RELATIVES, prefer_me=False)
        if other is None:
            break
        value = draw_distinct(mem, change.values, 1)[0]
        mem.claim(other.key, change.concept, value)
        step = mem.rng.randrange(len(change.third_person))
        mem.plant(mem.rng.randrange(len(mem.sessions)),
                  say(mem, difficulty, _change_text(change, other, step, value)))
    person = 0 if owner.first_person else 1
    s = low(owner.subject)
    latest = change.bare(chain[-1])
    return [Planned("update", "current", difficulty, change.current[person].format(s=s), chain[-1],
                    (keys[-1],)),
            Planned("update", "previous", difficulty,
                    change.previous[person].format(s=s, latest=latest), chain[-2], (keys[-2],))]


# ---- temporal ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Activity:
    concept: str
    statement: str  # {v}, {when}: the relative date
    on_date: str  # {date}
    when: str  # {v}
    values: Values


ACTIVITIES = (
    Activity("lunch", "I had lunch with {v} {when}.", "Who did I have lunch with on {date}?",
             "When did I have lunch with {v}?", lambda m: m.person()),
    Activity("museum", "I visited {v} {when}.", "Which museum did I visit on {date}?",
             "When did I visit {v}?", _pool("museum", vocab.MUSEUMS)),
    Activity("concert", "I saw {v} play live {when}.", "Which band did I see live on {date}?",
             "When did I see {v} live?", _pool("band", vocab.BANDS)),
    Activity("run", "I ran {v} kilometres {when}.", "How far did I run on {date}?",
             "When did I run {v} kilometres?", lambda m: str(m.rng.randint(4, 42))),
    Activity("order", "I ordered {v} online {when}.", "What did I order online on {date}?",
             "When did I order {v}?", _pool("item", vocab.ITEMS)),
)
# How many same-activity events on other dates surround the one asked about.
TEMPORAL_DISTRACTORS = {"easy": (1, 1), "medium": (2, 3), "hard": (4, 5)}
# Share of questions asking "when" (the answer is a date) rather than naming the date.
WHEN_SHARE = 0.25


def relative_date(mem: Memory, day: dt.date) -> tuple[str, str, dt.date]:
    """A relative date expression said on `day`: (expression, category, the date it means)."""
    kind = mem.rng.choice(("yesterday", "days_ago", "last_weekday", "weeks_ago"))
    if kind == "yesterday":
        return "yesterday", kind, day - dt.timedelta(days=1)
    if kind == "days_ago":
        n = mem.rng.randint(2, 5)
        return f"{vocab.NUMBER_WORDS[n]} days ago", kind, day - dt.timedelta(days=n)
    if kind == "last_weekday":
        target = mem.rng.randrange(7)
        back = (day.weekday() - target) % 7 or 7
        return f"last {vocab.WEEKDAYS[target]}", kind, day - dt.timedelta(days=back)
    n = mem.rng.choice((1, 2, 3))
    phrase = "a week ago" if n == 1 else f"{vocab.NUMBER_WORDS[n]} weeks ago"
    return phrase, kind, day - dt.timedelta(days=7 * n)


def absolute_date(mem: Memory, day: dt.date) -> str:
    month = vocab.MONTHS[day.month - 1]
    weekday = vocab.WEEKDAYS[day.weekday()]
    return mem.rng.choice((f"{month} {day.day}, {day.year}", f"{day.day} {month} {day.year}",
                           day.isoformat(), f"{weekday}, {month} {day.day}, {day.year}"))


def _plant_event(mem: Memory, activity: Activity, difficulty: str,
                 fresh: bool) -> tuple[str, str, str, dt.date] | None:
    """One event said with a relative date, on a date no other event of this activity has. A
    `fresh` event (one a "when" question will name) takes a value no other event has or will
    have, so the question has one answer."""
    for _ in range(ATTEMPTS):
        session = mem.sessions[mem.rng.randrange(len(mem.sessions))]
        expression, kind, day = relative_date(mem, session.day)
        value = activity.values(mem)
        seen = mem.facts.get(("I", f"{activity.concept}={value}"))
        text = activity.statement.format(v=value, when=expression)
        # The same words on two dates ("I visited X yesterday", twice) would make the evidence
        # text ambiguous, so each event's sentence is said once.
        if (not mem.free("I", f"{activity.concept}@{day}") or seen == "asked" or (fresh and seen)
                or not mem.free("I", text)):
            continue
        mem.claim("I", f"{activity.concept}@{day}", value)
        mem.claim("I", f"{activity.concept}={value}", "asked" if fresh else "used")
        mem.claim("I", text, value)
        return mem.plant(session.index, say(mem, difficulty, text)), kind, value, day
    return None


def plant_temporal(mem: Memory, difficulty: str) -> list[Planned]:
    ask_when = mem.rng.random() < WHEN_SHARE
    for activity in mem.rng.sample(ACTIVITIES, len(ACTIVITIES)):
        event = _plant_event(mem, activity, difficulty, fresh=ask_when)
        if event is not None:
            break
    else:
        return []  # this user's calendar is full
    key, kind, value, day = event
    for _ in range(mem.rng.randint(*TEMPORAL_DISTRACTORS[difficulty])):
        _plant_event(mem, activity, difficulty, fresh=False)
    if ask_when:
        return [Planned("temporal", "when", difficulty, activity.when.format(v=value),
                        absolute_date(mem, day), (key,))]
    return [Planned("temporal", kind, difficulty, activity.on_date.format(date=absolute_date(mem, day)),
                    value, (key,))]


# ---- multilingual -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Phrase:
    """A fact in one language: owner fields (`o`, ...) and `v` fill the statement; the second
    question is the harder phrasing (fewer shared words, or diacritics and ё dropped)."""

    language: str
    concept: str
    statement: str
    questions: tuple[str, str]
    values: tuple[str, ...]


def _owners(*rows: dict[str, str]) -> tuple[dict[str, str], ...]:
    return rows


LANGUAGE_OWNERS: dict[str, tuple[dict[str, str], ...]] = {
    "zh": tuple({"key": o, "o": o} for o in ("我妹妹", "我哥哥", "我妈妈", "我爸爸", "我表姐", "我同事",
                                            "我邻居", "我室友")),
    "ja": tuple({"key": o, "o": o} for o in ("妹", "兄", "母", "父", "いとこ", "同僚", "隣の人", "友達")),
    "ko": tuple({"key": o, "o": o, "t": t} for o, t in (
        ("제 동생", "은"), ("제 언니", "는"), ("제 형", "은"), ("저희 엄마", "는"), ("저희 아빠", "는"),
        ("제 친구", "는"), ("제 사촌", "은"), ("제 동료", "는"))),
    "ru": tuple({"key": o, "O": o, "o": low(o), "g": g} for o, g in (
        ("Моя сестра", "моей сестры"), ("Мой брат", "моего брата"), ("Моя мама", "моей мамы"),
        ("Мой папа", "моего папы"), ("Мой друг", "моего друга"), ("Моя коллега", "моей коллеги"),
        ("Мой сосед", "моего соседа"), ("Моя подруга", "моей подруги"))),
    "ar": tuple({"key": o, "o": o, "live": "يسكن" if m else "تسكن", "live2": "يعيش" if m else "تعيش",
                 "work": "يعمل" if m else "تعمل"} for o, m in (
        ("أخي", True), ("أختي", False), ("أمي", False), ("أبي", True), ("صديقي", True), ("جاري", True),
        ("زميلي", True), ("ابن عمي", True))),
    "fr": tuple({"key": o, "O": o, "o": low(o)} for o in (
        "Mon frère", "Ma sœur", "Ma mère", "Mon père", "Mon cousin", "Ma collègue", "Mon voisin",
        "Ma tante")),
    "de": tuple({"key": o, "O": o, "o": low(o)} for o in (
        "Meine Schwester", "Mein Bruder", "Meine Mutter", "Mein Vater", "Mein Cousin", "Meine Kollegin",
        "Mein Nachbar", "Meine Tante")),
    "es": tuple({"key": o, "O": o, "o": low(o)} for o in (
        "Mi abuela", "Mi hermano", "Mi tía", "Mi primo", "Mi jefe", "Mi vecina", "Mi cuñado", "Mi suegra")),
    "pt": tuple({"key": o, "O": o, "o": low(o)} for o in (
        "O meu irmão", "A minha irmã", "A minha avó", "O meu avô", "O meu tio", "A minha prima",
        "O meu chefe", "A minha vizinha")),
}
# The suite's categories, named for the script; Latin covers four languages with diacritics.
SCRIPT_OF = {"zh": "chinese", "ja": "japanese", "ko": "korean", "ru": "cyrillic", "ar": "arabic",
             "fr": "latin", "de": "latin", "es": "latin", "pt": "latin"}
FILLER_LANGUAGE = {"fr": "latin", "de": "latin", "es": "latin", "pt": "latin"}

PHRASES = (
    Phrase("zh", "city", "{o}住在{v}。", ("{o}住在哪里？", "{o}现在住哪儿？"),
           ("成都", "杭州", "西安", "南京", "厦门", "青岛", "昆明", "大连", "苏州", "长沙", "武汉",
            "哈尔滨")),
    Phrase("zh", "cat", "{o}养了一只猫，叫{v}。", ("{o}的猫叫什么名字？", "{o}家的猫咪叫啥？"),
           ("小白", "豆豆", "球球", "花花", "咪咪", "团子", "年糕", "橘子", "布丁", "芝麻")),
    Phrase("zh", "job", "{o}是一名{v}。", ("{o}是做什么工作的？", "{o}的职业是什么？"),
           ("医生", "律师", "工程师", "厨师", "护士", "会计", "摄影师", "翻译", "飞行员", "建筑师")),
    Phrase("zh", "drink", "{o}每天早上都喝{v}。", ("{o}早上喝什么？", "{o}早餐时一般来点什么饮品？"),
           ("豆浆", "绿茶", "咖啡", "牛奶", "乌龙茶", "橙汁", "红茶", "椰子水")),
    Phrase("ja", "city", "{o}は{v}に住んでいます。",
           ("{o}はどこに住んでいますか？", "{o}の住まいはどこですか？"),
           ("札幌", "福岡", "仙台", "神戸", "金沢", "広島", "長崎", "那覇", "横浜", "名古屋", "松本")),
    Phrase("ja", "dog", "{o}の犬の名前は{v}です。",
           ("{o}の犬の名前は何ですか？", "{o}が飼っているワンちゃんは何という名前？"),
           ("ポチ", "ハナ", "モモ", "コロ", "クッキー", "ソラ", "マル", "チビ", "リク", "ココ")),
    Phrase("ja", "job", "{o}は{v}として働いています。", ("{o}の仕事は何ですか？", "{o}はどんな職業ですか？"),
           ("看護師", "弁護士", "大工", "薬剤師", "教師", "料理人", "記者", "獣医", "通訳")),
    Phrase("ja", "hobby", "{o}の趣味は{v}です。", ("{o}の趣味は何ですか？", "{o}は暇なとき何をしますか？"),
           ("釣り", "書道", "登山", "盆栽", "将棋", "茶道", "陶芸", "写真")),
    Phrase("ko", "city", "{o}{t} {v}에 살아요.", ("{o}{t} 어디에 살아요?", "{o}{t} 요즘 어디 살아요?"),
           ("부산", "대구", "광주", "인천", "대전", "전주", "춘천", "제주", "수원", "울산", "포항")),
    Phrase("ko", "cat", "{o}의 고양이 이름은 {v}예요.",
           ("{o}의 고양이 이름이 뭐예요?", "{o}네 고양이는 이름이 뭐죠?"),
           ("나비", "보리", "루루", "모모", "치즈", "쿠키", "두부", "호두", "자두")),
    Phrase("ko", "job", "{o}{t} {v}로 일해요.", ("{o}{t} 무슨 일을 해요?", "{o}의 직업이 뭐예요?"),
           ("의사", "간호사", "요리사", "교사", "기자", "변호사", "회계사", "디자이너", "수의사")),
    Phrase("ko", "food", "{o}{t} {v}를 제일 좋아해요.",
           ("{o}{t} 무슨 음식을 제일 좋아해요?", "{o}의 최애 음식은 뭐예요?"),
           ("김치찌개", "떡볶이", "잡채", "순두부찌개", "된장찌개", "부대찌개")),
    Phrase("ru", "city", "{O} живёт в {v}.", ("Где живёт {o}?", "Где живет {o}?"),
           ("Казани", "Самаре", "Твери", "Перми", "Уфе", "Омске", "Томске", "Новосибирске", "Иркутске",
            "Калининграде", "Ярославле", "Сочи")),
    Phrase("ru", "dog", "Собаку {g} зовут {v}.", ("Как зовут собаку {g}?", "Какая кличка у собаки {g}?"),
           ("Шарик", "Бобик", "Жучка", "Тузик", "Дружок", "Лайка", "Барон", "Рекс", "Бублик", "Пушок")),
    Phrase("ru", "job", "{O} работает {v}.", ("Кем работает {o}?", "Какая профессия у {g}?"),
           ("врачом", "учителем", "инженером", "поваром", "юристом", "бухгалтером", "пилотом",
            "журналистом", "программистом", "архитектором")),
    Phrase("ru", "instrument", "{O} играет на {v}.", ("На чём играет {o}?", "На чем играет {o}?"),
           ("гитаре", "скрипке", "пианино", "барабанах", "флейте", "виолончели", "аккордеоне", "трубе")),
    Phrase("ar", "city", "{o} {live} في {v}.", ("أين {live} {o}؟", "أين {live2} {o}؟"),
           ("دبي", "القاهرة", "عمّان", "الدوحة", "تونس", "الرباط", "بيروت", "مسقط", "الرياض", "الكويت",
            "الإسكندرية", "مراكش")),
    Phrase("ar", "work", "{o} {work} في {v}.", ("أين {work} {o}؟", "في أي مكان {work} {o}؟"),
           ("مستشفى", "مدرسة", "مصرف", "مطعم", "مكتبة", "صيدلية", "فندق", "مطار", "مصنع", "جامعة")),
    Phrase("ar", "cat", "اسم قطة {o} {v}.", ("ما اسم قطة {o}؟", "ماذا تسمى قطة {o}؟"),
           ("لولو", "ميمي", "سكر", "عسل", "فلفل", "قمر", "زيتون", "بسبوسة", "كراميل")),
    Phrase("fr", "city", "{O} habite à {v}.", ("Où habite {o} ?", "Ou habite {o} ?"),
           ("Besançon", "Orléans", "Nîmes", "Angoulême", "Béziers", "Sète", "Évry", "Montbéliard",
            "Pézenas", "Épinal", "Créteil")),
    Phrase("fr", "work", "{O} travaille à la {v}.", ("Où travaille {o} ?", "Ou travaille {o} ?"),
           ("boulangerie", "pharmacie", "mairie", "médiathèque", "préfecture", "crèche", "clinique",
            "fromagerie")),
    Phrase("de", "commute", "{O} fährt jeden Morgen mit dem Fahrrad nach {v}.",
           ("Wohin fährt {o} jeden Morgen?", "Wohin fährt {o} morgens mit dem Rad?"),
           ("Düsseldorf", "Lübeck", "Göttingen", "Würzburg", "Tübingen", "Fürth", "Görlitz",
            "Saarbrücken", "Nürnberg", "Köln", "Osnabrück", "Gießen")),
    Phrase("es", "city", "{O} vive en {v}.", ("¿Dónde vive {o}?", "Donde vive {o}?"),
           ("Cádiz", "Málaga", "León", "Córdoba", "Almería", "Jaén", "Cáceres", "Ávila", "Logroño",
            "Valparaíso", "Mérida", "Bogotá")),
    Phrase("pt", "work", "{O} trabalha numa {v} perto da estação.",
           ("Onde trabalha {o}?", "Onde é que {o} trabalha?"),
           ("padaria", "farmácia", "livraria", "oficina", "fábrica", "clínica", "escola", "pastelaria",
            "biblioteca", "lavandaria")),
)


def _phrase_owner_key(phrase: Phrase, owner: dict[str, str]) -> str:
    return f"{phrase.language}:{owner['key']}"


def _plant_phrase(mem: Memory, phrase: Phrase, owner: dict[str, str], difficulty: str,
                  used: set[str]) -> tuple[str, str]:
    value = mem.rng.choice([v for v in phrase.values if v not in used] or list(phrase.values))
    used.add(value)
    mem.claim(_phrase_owner_key(phrase, owner), phrase.concept, value)
    text = phrase.statement.format(**owner, v=value)
    language = FILLER_LANGUAGE.get(phrase.language, phrase.language)
    session = mem.rng.randrange(len(mem.sessions))
    return mem.plant(session, say(mem, difficulty, text, language)), value


def plant_multilingual(mem: Memory, difficulty: str) -> list[Planned]:
    def free_owners(phrase: Phrase) -> list[dict[str, str]]:
        return [o for o in LANGUAGE_OWNERS[phrase.language]
                if mem.free(_phrase_owner_key(phrase, o), phrase.concept)]

    # Pick the script first so each script gets its share whatever its number of phrases.
    scripts = sorted({SCRIPT_OF[p.language] for p in PHRASES if free_owners(p)})
    if not scripts:
        return []
    script = mem.rng.choice(scripts)
    phrase = mem.rng.choice([p for p in PHRASES if SCRIPT_OF[p.language] == script and free_owners(p)])
    owner = mem.rng.choice(free_owners(phrase))
    used: set[str] = set()
    key, value = _plant_phrase(mem, phrase, owner, difficulty, used)
    for _ in range(distractor_count(mem.rng, difficulty)):
        others = free_owners(phrase)
        if not others:
            break
        _plant_phrase(mem, phrase, mem.rng.choice(others), difficulty, used)
    question = phrase.questions[1 if difficulty == "hard" else 0].format(**owner)
    if difficulty == "hard" and script == "latin":
        question = strip_diacritics(question)
    return [Planned("multilingual", script, difficulty, question, value, (key,))]


# ---- multi-hop --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Trait:
    concept: str
    statement: str  # {n}: the person's name
    question: str  # {r}: "sister", or "sister's daughter"
    values: Values


TRAITS = (
    Trait("residence", "{n} lives in {v} these days.", "Where does my {r} live?",
          _pool("city", vocab.CITIES)),
    Trait("job", "{n} works as {v}.", "What does my {r} do for work?",
          lambda m: article(m.draw("job", vocab.JOBS)[0])),
    Trait("instrument", "{n} plays the {v} in a local band.", "Which instrument does my {r} play?",
          _pool("instrument", vocab.INSTRUMENTS)),
    Trait("car", "{n} drives {v}.", "What car does my {r} drive?", _pool("car", vocab.CARS)),
    Trait("parrot", "{n} has a parrot called {v}.", "What is my {r}'s parrot called?",
          _pool("pet", vocab.PET_NAMES)),
)
INTRODUCTIONS = ("{n} is my {r}.", "My {r}'s name is {n}.", "You know {n}? That's my {r}.",
                 "I should mention that {n} is my {r}.")
LINKS = ("{n}'s {r} is called {m}.", "{m} is {n}'s {r}.")
AGGREGATES = (
    ("trips", ("I just got back from a trip to {v}.", "Spent a week in {v}, loved it.",
               "Our holiday in {v} was far too short.", "Still jet-lagged after {v}."),
     "Which countries have I travelled to?", vocab.COUNTRIES),
    ("courses", ("I signed up for a {v} course.", "Finished my {v} class today.",
                 "Started {v} lessons on Tuesday evenings.", "Got my certificate for the {v} workshop."),
     "Which classes have I taken?", vocab.COURSES),
)
HOPS = {"easy": (2, 2), "medium": (2, 3), "hard": (3, 4)}


def _introduce(mem: Memory, holder: str, text: Callable[[str], str]) -> tuple[str, str, int]:
    """The person holding a relation ("sister", or "sister/daughter"), introduced by one message
    the first time it is needed and cited from then on: (name, key, session)."""
    found = mem.shared.get(holder)
    if found is not None:
        return found
    name = mem.person()
    session = mem.rng.randrange(len(mem.sessions))
    found = (name, mem.plant(session, text(name)), session)
    mem.shared[holder] = found
    return found


def _introduction(mem: Memory, relation: str) -> Callable[[str], str]:
    template = mem.rng.choice(INTRODUCTIONS)
    return lambda name: template.format(n=name, r=relation)


def _link(mem: Memory, first: str, relation: str) -> Callable[[str], str]:
    template = mem.rng.choice(LINKS)
    return lambda name: template.format(n=first, r=relation, m=name)


def _other_session(mem: Memory, taken: set[int]) -> int:
    free = [i for i in range(len(mem.sessions)) if i not in taken]
    return mem.rng.choice(free) if free else mem.rng.randrange(len(mem.sessions))


def plant_multi_hop(mem: Memory, difficulty: str) -> list[Planned]:
    hops = mem.rng.randint(*HOPS[difficulty])
    if hops == 4 or mem.rng.random() < 0.2:
        made = _plant_aggregate(mem, difficulty)
        if made:
            return made
    three = hops >= 3
    for _ in range(ATTEMPTS):
        trait = mem.rng.choice(TRAITS)
        relation = mem.rng.choice(vocab.RELATIONS)
        second = mem.rng.choice(vocab.SECOND_RELATIONS) if three else ""
        holder = f"{relation}/{second}" if three else relation
        if mem.free(holder, trait.concept):
            break
    else:
        return []
    name, intro, intro_session = _introduce(mem, relation, _introduction(mem, relation))
    evidence, sessions = [intro], {intro_session}
    if three:
        name, link, link_session = _introduce(mem, holder, _link(mem, name, second))
        evidence.append(link)
        sessions.add(link_session)
    value = trait.values(mem)
    mem.claim(holder, trait.concept, value)
    statement = say(mem, difficulty, trait.statement.format(n=name, v=value))
    evidence.append(mem.plant(_other_session(mem, sessions), statement))
    for _ in range(distractor_count(mem.rng, difficulty)):
        other = mem.rng.choice(vocab.RELATIONS)
        if not mem.free(other, trait.concept):
            continue
        other_name, _, other_session = _introduce(mem, other, _introduction(mem, other))
        other_value = trait.values(mem)
        mem.claim(other, trait.concept, other_value)
        mem.plant(_other_session(mem, {other_session}),
                  say(mem, difficulty, trait.statement.format(n=other_name, v=other_value)))
    asked = f"{relation}'s {second}" if three else relation
    return [Planned("multi_hop", "three_hop" if three else "two_hop", difficulty,
                    trait.question.format(r=asked), value, tuple(evidence))]


def _plant_aggregate(mem: Memory, difficulty: str) -> list[Planned]:
    open_ones = [a for a in AGGREGATES if mem.free("I", f"aggregate:{a[0]}")]
    if not open_ones:
        return []
    name, templates, question, pool = mem.rng.choice(open_ones)
    count = {"easy": 2, "medium": 3, "hard": 4}[difficulty]
    values = mem.draw(name, pool, count)
    mem.claim("I", f"aggregate:{name}", ", ".join(values))
    keys = tuple(mem.plant(session, say(mem, difficulty, templates[i % len(templates)].format(v=v)))
                 for i, (session, v) in enumerate(zip(mem.sessions_apart(count), values, strict=False)))
    return [Planned("multi_hop", "aggregate", difficulty, question, ", ".join(values[:len(keys)]), keys)]


# ---- adversarial ------------------------------------------------------------------------------

NOT_IN_MEMORY = "(not in memory)"


def plant_adversarial(mem: Memory, difficulty: str) -> list[Planned]:
    """Half the questions ask about a topic never mentioned; half about an owner who has no such
    fact while other owners do (the near misses are in memory, the answer is not)."""
    if mem.rng.random() < 0.5:
        topics = [t for t in vocab.ABSENT_TOPICS if mem.free("I", f"absent:{t[0]}")]
        if topics:
            topic, question = mem.rng.choice(topics)
            mem.claim("I", f"absent:{topic}", None)
            return [Planned("adversarial", "absent", difficulty, question, NOT_IN_MEMORY, (), True)]
    owners = (ME, *RELATIVES)
    open_facts = [f for f in CLASSIC if sum(mem.free(o.key, f.concept) for o in owners) >= 2]
    if not open_facts:
        return []
    fact = mem.rng.choice(open_facts)
    asked = choose_owner(mem, fact.concept, owners)
    assert asked is not None
    mem.claim(asked.key, fact.concept, None)
    used: set[str] = set()
    _plant_near_misses(mem, fact, owners, max(1, distractor_count(mem.rng, difficulty)), difficulty, used)
    return [Planned("adversarial", "near_miss", difficulty, fact_question(fact, asked), NOT_IN_MEMORY,
                    (), True)]


PLANTERS: dict[str, Planter] = {
    "classic": _fact_planter("classic", CLASSIC, (ME, *RELATIVES)),
    "update": plant_update,
    "temporal": plant_temporal,
    "paraphrase": _fact_planter("paraphrase", PARAPHRASE, RELATIVES),
    "multilingual": plant_multilingual,
    "multi_hop": plant_multi_hop,
    "adversarial": plant_adversarial,
}

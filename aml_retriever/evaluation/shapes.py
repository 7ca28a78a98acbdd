"""Suites of other data shapes than the user-and-assistant chat of suites.py, run on their own
(not in `mixed`):

  long_turn   a user's short statements, each answered by a 300-900 word assistant reply that
              repeats the question's words at length; half the facts change once or twice
              and are asked for as they are now.
              The evidence is the user's own short message; the reply is what a ranking that
              rewards length returns instead.
  chinese     Chinese statements about the user's relations, several facts per person (the one
              whose attribute is asked must beat its siblings), Chinese filler, and questions
              that half the time chat for a few sentences before they ask; near misses are the
              same attribute of other relations.
  speakers    two people talking, sent as `user` and `assistant` with the bare text (no "Name: "
              prefix), who call each other by name in some turns (one side often, the other
              rarely); both tell the same kinds of things in the same words ("I painted ..."),
              and each question names its speaker ("What did Grace paint?"): only knowing who
              said which turn finds the evidence.

Same contract as suites.py: a planter plants into a Memory and returns its questions.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from aml_retriever.evaluation import vocab
from aml_retriever.evaluation.memory import Memory, Planned, Planter, Session, distractor_count
from aml_retriever.evaluation.suites import (
    ATTEMPTS,
    CLASSIC,
    ME,
    draw_distinct,
    fact_question,
    fact_text,
    say,
)

SHAPE_SUITES = ("long_turn", "chinese", "speakers")

# ---- long turns ----------------------------------------------------------------------------

# An assistant reply is this many words, drawn per reply (BEAM's replies: median 557).
REPLY_WORDS = (300, 900)
# Sentences of a reply; {t} is the topic the user spoke of.
_REPLY_SENTENCES = (
    "That is a great point about your {t}, and it is worth thinking through carefully.",
    "Many people find that keeping track of their {t} gets easier with a simple routine.",
    "When it comes to your {t}, consistency matters more than any single decision.",
    "You might write down everything related to the {t} in one place so nothing gets lost.",
    "It can also help to review the {t} once a month and adjust whatever no longer fits.",
    "Some people share details of their {t} with a trusted friend, just in case.",
    "If anything about the {t} changes, updating your notes right away saves time later.",
    "There is no single right answer here, but a clear plan for the {t} reduces stress.",
    "Small habits around the {t} add up over weeks and months.",
    "Let me know if you would like a checklist for the {t}; I am happy to put one together.",
)


def long_reply(mem: Memory, topic: str) -> str:
    """An assistant reply of REPLY_WORDS words that repeats the topic in every sentence."""
    target = mem.rng.randint(*REPLY_WORDS)
    sentences: list[str] = []
    while sum(len(s.split()) for s in sentences) < target:
        sentences.append(mem.rng.choice(_REPLY_SENTENCES).format(t=topic))
    return " ".join(sentences)


def _topic(concept: str) -> str:
    return concept.replace("_", " ")


def plant_long_turn(mem: Memory, difficulty: str) -> list[Planned]:
    """A fact the user states once, or (half the time) changes once or twice afterwards and is
    asked for as it is now. Every statement is answered at length, and distractor replies about
    the same topic stand in other sessions."""
    open_facts = [f for f in CLASSIC if mem.free(ME.key, f.concept)]
    if not open_facts:
        return []
    fact = mem.rng.choice(open_facts)
    changes = mem.rng.choice((0, 0, 1, 2))
    chain = draw_distinct(mem, fact.values, 1 + changes)
    mem.claim(ME.key, fact.concept, chain[-1])
    topic = _topic(fact.concept)
    sessions = mem.sessions_apart(len(chain))
    texts = [fact_text(fact, ME, chain[0])] + [
        mem.rng.choice(_CHANGED).format(t=topic, v=value) for value in chain[1:]]
    keys = [mem.plant_exchange(session, text, long_reply(mem, topic))
            for session, text in zip(sessions, texts, strict=False)]
    _plant_replies(mem, topic, difficulty)
    if len(keys) == 1:
        return [Planned("long_turn", "statement", difficulty, fact_question(fact, ME), chain[0],
                        (keys[0],))]
    question = fact_question(fact, ME).rstrip("?") + " now?"
    return [Planned("long_turn", "changed", difficulty, question, chain[-1], (keys[-1],))]


# How a user says a fact changed; {t}: the topic, {v}: the new value.
_CHANGED = ("Quick update: my {t} changed, it is {v} now.", "Heads up, the {t} is now {v}.",
            "Small change: I switched my {t} to {v}.")


def _plant_replies(mem: Memory, topic: str, difficulty: str) -> None:
    for _ in range(distractor_count(mem.rng, difficulty)):
        mem.plant(mem.rng.randrange(len(mem.sessions)), long_reply(mem, topic), role="assistant")


# ---- Chinese ---------------------------------------------------------------------------------

ZH_RELATIONS = ("表弟", "表姐", "表哥", "表妹", "舅舅", "舅妈", "叔叔", "婶婶", "姑姑", "姨妈",
                "外婆", "爷爷", "同事", "上司", "下属", "室友", "邻居", "同学", "老板", "师傅")
ZH_CITIES = ("北京", "上海", "杭州", "深圳", "成都", "南京", "武汉", "西安", "青岛", "厦门")
ZH_JOBS = ("医生", "老师", "工程师", "律师", "厨师", "护士", "会计", "设计师", "记者", "警察")
ZH_HOBBIES = ("爬山", "游泳", "下棋", "画画", "摄影", "阅读", "跑步", "钓鱼", "书法", "弹吉他")


@dataclass(frozen=True)
class ZhFact:
    concept: str
    statement: str  # {r}: the relation, {v}: the value
    question: str
    values: Callable[[Memory], str]


# Questions name the attribute in other words than the statement does where people would ("多大"
# for "岁"), and sibling statements share words with other attributes' questions ("工作" in the
# job statement, asked "在哪儿工作" of the city): the attribute asked must still win.
ZH_FACTS = (
    ZhFact("age", "我{r}今年{v}岁。", "我{r}多大年纪了？", lambda m: str(m.rng.randint(20, 70))),
    ZhFact("city", "我{r}在{v}上班。", "我{r}在哪儿工作？", lambda m: m.rng.choice(ZH_CITIES)),
    ZhFact("job", "我{r}的工作是{v}。", "我{r}是做什么职业的？", lambda m: m.rng.choice(ZH_JOBS)),
    ZhFact("hobby", "我{r}特别喜欢{v}。", "我{r}的爱好是什么？", lambda m: m.rng.choice(ZH_HOBBIES)),
    ZhFact("birthday", "我{r}的生日是{v}。", "我{r}哪天过生日？",
           lambda m: f"{m.rng.randint(1, 12)}月{m.rng.randint(1, 28)}号"),
    ZhFact("phone", "我{r}的电话号码是{v}。", "我{r}的手机号是多少？",
           lambda m: "1" + "".join(str(m.rng.randint(0, 9)) for _ in range(10))),
)
# Chinese chit-chat planted beside the facts (ZH_FILLER_PER_FACT a fact), and the asides some
# questions open with; each aside ends by announcing the real question.
ZH_FILLER_PER_FACT = 3
ZH_CHATTER = (*vocab.FOREIGN_FILLER["zh"],
              "昨天晚上看了一场球赛，比分咬得很紧。", "楼下新开了一家面馆，味道还可以。",
              "最近在读一本关于历史的书。", "周末想去郊外走走，放松一下。",
              "今天地铁特别挤，差点没挤上车。", "家里的猫最近总是半夜叫。",
              "这几天降温了，出门要多穿点。", "朋友推荐了一部纪录片，还没来得及看。")
ZH_PIVOTS = ("对了，我真正想问的是：", "不好意思，我其实想问的是，", "话说回来，我想问一下，",
             "哎，说正事，我的问题是：")


def plant_chinese(mem: Memory, difficulty: str) -> list[Planned]:
    """Two or three facts about one relation (siblings of the asked one), filler, and a question
    about one of them, after an aside of two to four chatty sentences half the time."""
    relations = [r for r in ZH_RELATIONS if mem.free(r, "zh")]
    if not relations:
        return []
    relation = mem.rng.choice(relations)
    mem.claim(relation, "zh", None)
    facts = mem.rng.sample(ZH_FACTS, mem.rng.randint(2, 3))
    values = [fact.values(mem) for fact in facts]
    keys = [mem.plant(mem.rng.randrange(len(mem.sessions)), fact.statement.format(r=relation, v=v))
            for fact, v in zip(facts, values, strict=True)]
    for _ in range(ZH_FILLER_PER_FACT * len(facts)):
        mem.plant(mem.rng.randrange(len(mem.sessions)), "".join(mem.rng.sample(ZH_CHATTER, 2)))
    at = mem.rng.randrange(len(facts))
    _plant_zh_near_misses(mem, facts[at], distractor_count(mem.rng, difficulty))
    question = facts[at].question.format(r=relation)
    category = "attribute"
    if mem.rng.random() < 0.5:
        aside = "".join(mem.rng.sample(ZH_CHATTER, mem.rng.randint(2, 4)))
        question = aside + mem.rng.choice(ZH_PIVOTS) + question
        category = "aside"
    return [Planned("chinese", category, difficulty, question, values[at], (keys[at],))]


def _plant_zh_near_misses(mem: Memory, fact: ZhFact, count: int) -> None:
    """The same attribute of other relations (the relation then has its own questions' slot
    taken, so no question asks about it with a sibling missing)."""
    for relation in [r for r in ZH_RELATIONS if mem.free(r, "zh")][:count]:
        mem.claim(relation, "zh", None)
        mem.plant(mem.rng.randrange(len(mem.sessions)),
                  fact.statement.format(r=relation, v=fact.values(mem)))


# ---- two people, bare text -------------------------------------------------------------------

ROLES = ("user", "assistant")
# Share of one side's turns that call the other by name, drawn per user: the side addressed
# often (LoCoMo: about a third of the turns name the other side) and the side addressed rarely
# (a few dozen times in a medium memory; LoCoMo's least named speaker: 32 times).
OFTEN_ADDRESSED = (0.3, 0.5)
RARELY_ADDRESSED = (0.02, 0.06)
# A planted statement calls its listener by name as often as chit-chat does, times this: never
# when easy, twice as often when hard, where the other side's statement then names the asked
# speaker ("I painted a fox in the snow, Grace!"), putting the name in the wrong speaker's turn.
ADDRESS_FACTOR = {"easy": 0.0, "medium": 1.0, "hard": 2.0}
# How often a person with a short name is called by it ("Mel"); questions use the full name.
SHORT_SHARE = 0.7


@dataclass(frozen=True)
class Person:
    name: str
    pronoun: str  # "she" / "he"
    short: str = ""

    @property
    def possessive(self) -> str:
        return "her" if self.pronoun == "she" else "his"

    @property
    def forms(self) -> tuple[str, ...]:
        return (self.name, self.short) if self.short else (self.name,)


def other(role: str) -> str:
    return ROLES[1 - ROLES.index(role)]


def _pair(rng: random.Random) -> tuple[Person, Person]:
    """Two people whose names do not begin one another (the name finder would read "Will" and
    "William" as one person)."""
    people = [Person(*row) for row in vocab.SPEAKER_PEOPLE]
    first = rng.choice(people)
    second = rng.choice([p for p in people if not any(
        a.lower().startswith(b.lower()) or b.lower().startswith(a.lower())
        for a in p.forms for b in first.forms)])
    return first, second


def _mid(text: str) -> str:
    """A turn's opening in mid-sentence form, after "Hi Grace, " ("I" stays)."""
    return text if re.match(r"I\b", text) else text[0].lower() + text[1:]


class Chat(Memory):
    """The memory of two people talking: `people` maps each role to its speaker, `addressed`
    each role to the share of the other side's turns that call it by name, and `rare` is the
    side addressed rarely. The chit-chat is addressed here; the planter addresses what it plants."""

    def __init__(self, rng: random.Random, sessions: list[Session]) -> None:
        super().__init__(rng, sessions)
        self.people = dict(zip(ROLES, _pair(rng), strict=True))
        self.rare = rng.choice(ROLES)
        self.addressed = {role: rng.uniform(*(RARELY_ADDRESSED if role == self.rare else OFTEN_ADDRESSED))
                          for role in ROLES}
        for session in sessions:
            for draft in session.drafts:
                listener = other(draft.role)
                draft.content = self.address(listener, draft.content, self.addressed[listener])

    def address(self, listener: str, text: str, share: float) -> str:
        """The turn calling `listener` by name (one of vocab.ADDRESS_FORMS), with probability `share`."""
        if self.rng.random() >= share:
            return text
        person = self.people[listener]
        name = person.short if person.short and self.rng.random() < SHORT_SHARE else person.name
        stop = text[-1] if text[-1] in ".!?" else ""
        return self.rng.choice(vocab.ADDRESS_FORMS).format(
            n=name, t=text, l=_mid(text), b=text[:len(text) - len(stop)], e=stop or "!")

    def tell(self, role: str, text: str, difficulty: str) -> str:
        """Plant a turn of `role` in a random session, calling the listener by name as often as the
        difficulty says; returns its key."""
        share = min(1.0, ADDRESS_FACTOR[difficulty] * self.addressed[other(role)])
        return self.plant(self.rng.randrange(len(self.sessions)), self.address(other(role), text, share),
                          role=role)


@dataclass(frozen=True)
class Telling:
    """A kind of thing both people tell of themselves, in the same templates."""

    concept: str
    first: tuple[str, ...]  # a speaker's own: {v} the value, {m} the month
    third: tuple[str, ...]  # a relative's (near misses): {r} the relation
    questions: tuple[str, ...]  # {n} the speaker's name, {pr} pronoun, {pos} possessive, {m}
    values: tuple[str, ...]
    dated: bool = False  # told of one month: each month is a concept of its own


# Every statement, near miss and question of a kind shares its word ("paint", "bake", the month
# of a trip), so the words find both speakers' turns; the rest of the wording varies, and both
# people draw from the same templates, so a question's words favour neither speaker's turn.
TELLINGS = (
    Telling("painting",
            ("I finally finished painting {v}.", "Spent the whole afternoon painting {v}.",
             "My latest painting is {v}, still drying on the easel.",
             "I painted {v} for the art fair at the library."),
            ("My {r} painted {v} for the school fair.", "My {r} has been painting {v} all week."),
            ("What did {n} paint?", "What did {n} say {pr} painted?", "What is {n}'s latest painting?"),
            ("a sunset over the harbour", "a lighthouse in a storm", "a field of sunflowers",
             "the old mill by the river", "a fox in the snow", "a city skyline at night",
             "a vase of tulips", "a bowl of lemons", "a sailing boat at anchor", "a forest in autumn",
             "a busy street market", "two herons by a pond")),
    Telling("trip",
            ("I spent a week in {v} in {m}.", "Back from {v}! We went in {m} and loved it.",
             "In {m} I finally made it to {v}.", "My {m} trip to {v} was the best part of the year."),
            ("My {r} went to {v} in {m}.", "My {r} spent {m} travelling around {v}."),
            ("Where did {n} travel in {m}?", "Which city did {n} visit in {m}?",
             "Where did {n} go in {m}?"),
            vocab.CITIES, dated=True),
    Telling("baking",
            ("I baked {v} for my neighbour's birthday.", "Tried a new baking recipe last night: {v}.",
             "I baked {v} from scratch on Sunday.", "Everyone at the potluck loved the {v} I baked."),
            ("My {r} baked {v} for the street party.", "My {r} brought home-baked {v} to dinner."),
            ("What did {n} bake?", "What did {n} say {pr} baked?", "What has {n} been baking?"),
            ("lemon tart", "banana bread", "cinnamon rolls", "carrot cake", "apple pie", "sourdough",
             "blueberry muffins", "ginger biscuits", "cheesecake", "focaccia", "plum crumble")),
    Telling("book",
            ("I just finished reading {v}.", "Stayed up way too late reading {v}, could not put it down.",
             "My book club picked {v} and I loved reading it.",
             "I'm halfway through reading {v} and hooked."),
            ("My {r} keeps telling me to read {v}.", "My {r} is reading {v} for a book club."),
            ("What book did {n} read?", "Which book did {n} finish reading?", "What was {n} reading?"),
            ("The Salt Road", "A House of Paper Birds", "The Last Lighthouse Keeper", "The Glass Orchard",
             "Winter at Hollow Farm", "The Clockmaker's Daughter", "Songs of the Open Sea",
             "The Quiet Valley", "Letters from the Coast", "The Silver Thread", "Under the Olive Trees")),
    Telling("concert",
            ("I saw {v} in concert on Friday, what a show.",
             "Got front-row concert tickets for {v} and they were amazing.",
             "I finally caught {v} in concert.", "My ears are still ringing from the {v} concert."),
            ("My {r} saw {v} in concert last month.", "My {r} got concert tickets for {v}."),
            ("Which band did {n} see in concert?", "What concert did {n} go to?",
             "Which band's concert did {n} say {pr} saw?"),
            vocab.BANDS),
    Telling("class",
            ("I signed up for a {v} class.", "My {v} class starts next week.",
             "Just had my first {v} class, so much fun.", "I joined a {v} class on Thursday evenings."),
            ("My {r} signed up for a {v} class.", "My {r} is taking a {v} class."),
            ("What class did {n} sign up for?", "Which class is {n} taking?", "What class did {n} join?"),
            vocab.COURSES),
    Telling("purchase",
            ("I bought {v} last week.", "Finally bought myself {v}.",
             "I bought {v} online and it arrived today.", "I splurged and bought {v} this weekend."),
            ("My {r} bought {v}.", "My {r} bought {v} on sale."),
            ("What has {n} bought recently?", "What did {n} say {pr} bought?",
             "What was the thing {n} bought?"),
            vocab.ITEMS),
    Telling("pet",
            ("I adopted a kitten and named her {v}.", "My new puppy is named {v}.",
             "Meet {v}, the rescue dog I adopted on Saturday.", "I adopted a rabbit and named it {v}."),
            ("My {r} adopted a kitten named {v}.", "My {r} has a new puppy named {v}."),
            ("What did {n} name {pos} new pet?", "What is the name of the pet {n} adopted?",
             "What did {n} name the animal {pr} adopted?"),
            vocab.PET_NAMES),
    Telling("garden",
            ("I planted {v} in the back garden.", "Spent Saturday planting {v}.",
             "The balcony is full of {v} I planted in spring.", "I'm planting {v} this year."),
            ("My {r} planted {v} along the fence.", "My {r} has been planting {v} in the greenhouse."),
            ("What did {n} plant?", "What has {n} been planting?", "What did {n} say {pr} planted?"),
            ("tomatoes", "sunflowers", "lavender", "strawberries", "runner beans", "tulip bulbs",
             "courgettes", "peppers", "basil", "potatoes", "raspberry canes")),
    Telling("race",
            ("I finished {v} on Sunday, legs are sore.",
             "Finished {v} for charity and raised a bit of money.", "I finally finished {v} this morning.",
             "Signed up for {v} and actually finished it."),
            ("My {r} finished {v} last weekend.", "My {r} is training to finish {v}."),
            ("What race did {n} finish?", "Which event did {n} finish?", "What did {n} say {pr} finished?"),
            ("the city 10k", "a half marathon", "a sprint triathlon", "a charity swim",
             "a mountain bike race", "a trail run", "a rowing regatta", "an obstacle race", "a fell run")),
    Telling("gift",
            ("My friends got me {v} for my birthday.", "The best birthday present I got was {v}.",
             "I unwrapped {v} on my birthday and nearly cried.", "For my birthday I got {v}."),
            ("My {r} got {v} for a birthday.", "My {r} was given {v} as a birthday present."),
            ("What did {n} get for {pos} birthday?", "What birthday present did {n} receive?",
             "What did {n} say {pr} got for {pos} birthday?"),
            ("a silver necklace", "a leather journal", "a pottery mug", "a wool scarf", "concert tickets",
             "a bonsai tree", "a polaroid camera", "a chess set", "a hammock", "a cookbook")),
)


def _chat(mem: Memory) -> Chat:
    """The memory as a Chat: only a Chat knows who speaks each role."""
    if not isinstance(mem, Chat):
        raise TypeError("the speakers suite plants into a Chat (shapes.MEMORIES)")
    return mem


def _open_telling(mem: Memory) -> tuple[Telling, str, str] | None:
    """A kind of thing neither speaker has told yet: (telling, month or "", concept)."""
    for _ in range(ATTEMPTS):
        telling = mem.rng.choice(TELLINGS)
        month = mem.rng.choice(vocab.MONTHS) if telling.dated else ""
        concept = f"{telling.concept}:{month}" if month else telling.concept
        if all(mem.free(role, concept) for role in ROLES):
            return telling, month, concept
    return None


def plant_speakers(mem: Memory, difficulty: str) -> list[Planned]:
    """Both people tell one kind of thing (a painting, a trip in one month, ...), each with their
    own value in their own turn, near misses tell it of relatives (either side saying them), and
    each is asked about by name: the gold is that speaker's turn, the other's its near twin."""
    chat = _chat(mem)
    found = _open_telling(mem)
    if found is None:
        return []
    telling, month, concept = found
    values = mem.draw(telling.concept, telling.values, len(ROLES) + distractor_count(mem.rng, difficulty))
    keys: dict[str, str] = {}
    for role, value in zip(ROLES, values, strict=False):
        mem.claim(role, concept, value)
        text = say(mem, difficulty, mem.rng.choice(telling.first).format(v=value, m=month))
        keys[role] = chat.tell(role, text, difficulty)
    for value in values[len(ROLES):]:
        text = mem.rng.choice(telling.third).format(r=mem.rng.choice(vocab.RELATIONS), v=value, m=month)
        chat.tell(mem.rng.choice(ROLES), say(mem, difficulty, text), difficulty)
    return [_ask(chat, telling, month, role, value, keys[role], difficulty)
            for role, value in zip(ROLES, values, strict=False)]


def _ask(chat: Chat, telling: Telling, month: str, role: str, value: str, key: str,
         difficulty: str) -> Planned:
    person = chat.people[role]
    question = chat.rng.choice(telling.questions).format(n=person.name, pr=person.pronoun,
                                                         pos=person.possessive, m=month)
    category = "rarely_addressed" if role == chat.rare else "often_addressed"
    return Planned("speakers", category, difficulty, question, value, (key,))


def speaker_names(mem: Memory) -> dict[str, str]:
    """Who speaks each role, where a suite's memory names its speakers (the evidence keeps it,
    for the reader's `speaker visible`); {} for the plain user-and-assistant memory."""
    return {role: person.name for role, person in mem.people.items()} if isinstance(mem, Chat) else {}


PLANTERS: dict[str, Planter] = {"long_turn": plant_long_turn, "chinese": plant_chinese,
                                 "speakers": plant_speakers}
# The memory a suite plants into, where it is not the plain Memory.
MEMORIES: dict[str, type[Memory]] = {"speakers": Chat}

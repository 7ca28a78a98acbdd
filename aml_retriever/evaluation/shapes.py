"""Suites of other data shapes than short English chat, run on their own (not in `mixed`):

  long_turn   a user's short statements, each answered by a 300-900 word assistant reply that
              repeats the question's words at length; half the facts change once or twice
              and are asked for as they are now.
              The evidence is the user's own short message; the reply is what a ranking that
              rewards length returns instead.
  chinese     Chinese statements about the user's relations, several facts per person (the one
              whose attribute is asked must beat its siblings), Chinese filler, and questions
              that half the time chat for a few sentences before they ask; near misses are the
              same attribute of other relations.

Same contract as suites.py: a planter plants into a Memory and returns its questions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aml_retriever.evaluation import vocab
from aml_retriever.evaluation.memory import Memory, Planned, Planter, distractor_count
from aml_retriever.evaluation.suites import CLASSIC, ME, draw_distinct, fact_question, fact_text

SHAPE_SUITES = ("long_turn", "chinese")

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


PLANTERS: dict[str, Planter] = {"long_turn": plant_long_turn, "chinese": plant_chinese}

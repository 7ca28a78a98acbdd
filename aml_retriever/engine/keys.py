"""The question's signal keys, as a Search looks them up in its candidates: each message's names,
numbers, dates and speaker are stored at Add time beside it (`messages.signal_keys`, each key
between newlines) and read with its row, so a ranker asks whether a candidate holds one of the
question's keys instead of parsing every candidate's features.

Parsing each candidate's stored features took 14% of a top_k 100 Search on long messages (BEAM
dev, profiled, 160 candidates of 460 words each). An index of the keys (a table by key, read with
one lookup a key) cost an Add of long messages 120 to 180 us a message, a third of its time
besides the features, for the same Search; the keys read with the row cost it nothing more."""

from __future__ import annotations

from functools import cached_property

from aml_retriever.analysis.features import DATE_KEY, ENTITY_KEY, KEY_END, NUMBER_KEY, SPEAKER_KEY, needle
from aml_retriever.engine.query import QueryPlan

Needles = dict[str, tuple[str, ...]]  # a question's value -> what finds it in a message's keys


class QuestionKeys:
    """What finds each of the question's names, numbers, periods and speakers (`plan`, with its
    speakers named) in a message's stored keys: a message holds a value when its keys hold one
    of the value's needles."""

    def __init__(self, plan: QueryPlan) -> None:
        self.plan = plan

    @cached_property
    def entities(self) -> Needles:
        return {e: (needle(ENTITY_KEY + e),) for e in sorted(self.plan.entities)}

    @cached_property
    def numbers(self) -> Needles:
        return {n: (needle(NUMBER_KEY + n),) for n in sorted(self.plan.numbers)}

    @cached_property
    def speakers(self) -> Needles:
        return {s: (needle(SPEAKER_KEY + s),) for s in sorted(self.plan.speakers)}

    @cached_property
    def periods(self) -> Needles:
        """Each period the question names -> the dates that meet it (dates.covers): any date
        that starts with it ("2023-05" holds "2023-05-20"; a key's start, without its end), and
        the dates it starts with ("2023" and "2023-05" around "2023-05-20"; whole keys)."""
        return {p: (KEY_END + DATE_KEY + p, *(needle(DATE_KEY + p[:end]) for end in range(1, len(p))))
                for p in self.plan.dates if p}

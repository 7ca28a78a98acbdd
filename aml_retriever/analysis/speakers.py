"""Who is who in a conversation, read from its text.

A chat sent as `role` `user` and `assistant` with the bare text never says who spoke, yet the
conversation does: a third of LoCoMo's turns address the other side by name ("Hey Mel!",
"Thanks, Caroline.", "Caroline, that's great"), and now and then a speaker names itself ("I'm
Caroline", "my name is Caroline"). `mentions` reads both from one message at Add time;
`attach` decides, from every mention a user's memory holds, which name belongs to which role.

A name is attached to a role only on clear evidence, so that common words in a name's place
("Yeah, ...", "Cool!"), a side never addressed by name and a role several people share attach
nothing: a name needs MIN_VOTES mentions, most of them (NAME_SHARE) for one role, and the role's
names must be one person's (ROLE_SHARE). Pure functions of strings and counts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from aml_retriever.analysis.tokenizer import normalize

# The kinds of mention: a name the other side calls this role by, or one this role gives itself.
ADDRESSED, INTRODUCED = "addressed", "introduced"

# A name as people write one: a capital and letters ("Mel", "Zoë", "O'Brien", "Anne-Marie").
_NAME = r"([^\W\d_][^\W\d_'’-]{0,30}(?:['’-][^\W\d_]{1,30})?)"
# Words that open a greeting or a thanks, after which a capitalised word is a name ("Hey Mel
# how are you", "Thanks Caroline"), and interjections, after which it is one only when a comma
# or a stop follows ("Oh Mel, ...", "Wow, Caroline!"; not "Oh My God", "Great Barrier Reef").
_GREETING = (r"(?i:hey|hi|hiya|hello|howdy|dear|thanks|thank\s+you|thx|congrats|congratulations|"
             r"bye|goodbye|good\s+(?:morning|afternoon|evening|night|luck)|cheers|"
             r"welcome(?:\s+back)?|miss\s+you|love\s+you|see\s+you(?:\s+soon)?|"
             r"(?:good|great|nice)\s+to\s+(?:see|hear\s+from|meet)\s+you)")
_INTERJECTION = r"(?i:oh|wow|aw{1,3}|ha(?:ha){1,3}|ok(?:ay)?|yes|yeah|yep|sure|sorry|well|right|no|omg)"
# A name addressed: after a greeting, or an interjection and a comma or stop; closing a sentence
# after a comma ("That's so cool, Caroline!"); opening the message before a comma ("Caroline,
# that's great"; only the message: within a text, "However, ..." and "Andrew, your colleague,
# ..." open sentences as often as names do: BEAM dev's long replies). Four patterns, a greeting's
# and an interjection's tried only where one of their first words stands (found by str.find):
# one alternation of them all, tried at every character, cost 38 us a LoCoMo turn.
_AFTER_GREETING = re.compile(rf"(?<![\w'’]){_GREETING},?\s+{_NAME}(?=[\s,.!?;:)…]|$)")
_AFTER_INTERJECTION = re.compile(rf"(?<![\w'’]){_INTERJECTION},?\s+{_NAME}(?=[,.!?;…]|$)")
_CLOSING = re.compile(rf",\s*{_NAME}\s*[!?.…]+(?=\s|$)")
_OPENING = re.compile(rf"\s*{_NAME}(?=,\s)")
# A speaker naming itself: "I'm Caroline.", "my name is Caroline", "call me Caroline".
_INTRODUCED = re.compile(
    rf"(?<![\w'’])(?i:i'm|i’m|i\s+am|my\s+name\s+is|my\s+name's|my\s+name’s|call\s+me)\s+{_NAME}"
    rf"(?=\s*(?:[,.!?;…]|\s+(?i:and|here)\b|$))")
# The words each pattern needs the text to hold (lowercase): the first word of a greeting, an
# interjection; and what every self-introduction holds.
_GREETING_WORDS = frozenset({"hey", "hi", "hiya", "hello", "howdy", "dear", "thanks", "thank", "thx",
                             "congrats", "congratulations", "bye", "goodbye", "good", "cheers",
                             "welcome", "miss", "love", "see", "great", "nice"})
_INTERJECTION_WORDS = frozenset({"oh", "wow", "aw", "aww", "awww", "haha", "hahaha", "hahahaha",
                                 "ok", "okay", "yes", "yeah", "yep", "sure", "sorry", "well",
                                 "right", "no", "omg"})
_INTRODUCTION_CUES = ("i'm", "i’m", "i am", "my name", "call me")
_LOWER_WORD = re.compile(r"[^\W\d_]+")
# Words that stand where a name would and are not one: interjections and sentence openers that
# people put before a comma or after a greeting ("Yeah, ...", "Hey there!", "Oh Sure.").
_NOT_NAMES = frozenset("""
absolutely agreed alright also anyway anyways appreciate awesome aww aw bravo btw but cheers
congrats congratulations cool damn dear definitely exactly fantastic fine glad good gosh great
guys haha hahaha hello hey hi hmm honestly hooray hopefully how indeed it interesting lately
let lol look love man mate nice no nope now oh ok okay omg oops ouch perfect please plus pretty
really right seriously so sorry still super sure sweet thanks that then there though totally
true ugh um umm unfortunately upd well what whoa woah wonderful woohoo wow yay yea yeah yep yes
yikes you your yup anyway everyone everybody folks friend friends buddy pal all both mom mum
dad sir madam bro sis dude babe baby honey sweetie darling boss doc team guy girl kids
first second third finally lastly next however additionally therefore instead specifically
remember certainly meanwhile otherwise similarly overall basically actually ideally
alternatively importantly fortunately sadly luckily personally generally typically currently
recently again today tonight yesterday tomorrow here besides yet of course sometimes often
world ha hah heh huh ah ahh eh meh ooh oooh uh whew phew
""".split()) | frozenset(("i", "the", "a", "we", "they", "he", "she", "this", "these", "those",
                          "and", "or", "if", "when", "why", "who", "my", "our", "his", "her"))
# A contraction is no name ("I'm, ...", "That's, ...").
_CONTRACTION = re.compile(r"['’](?:m|s|d|ll|re|ve|t)$|n['’]t$", re.IGNORECASE)
# A long text is read for names at its start and its end only: people address each other when a
# turn opens or closes, and the work stays bounded however long a message is (a 3,700-character
# reply read whole cost 60 us; its two ends 12 us).
_READ_WHOLE = 1200
_END = 400

# How much evidence attaches a name to a role (LoCoMo dev, platform format: the ten speakers are
# addressed 32 to 191 times each; the most frequent word that is no name, 4 times, 4 to 1 across
# the two roles).
MIN_VOTES = 2  # a single "Thanks, Will" attaches nothing
NAME_SHARE = 0.75  # of a name's mentions, the share that must point at one role
ROLE_SHARE = 2 / 3  # of a role's names' mentions, the share its one person must hold


@dataclass(frozen=True)
class Mention:
    """A name a message gives: `kind` ADDRESSED (the other side's) or INTRODUCED (its own)."""

    name: str  # normalised (tokenizer.normalize)
    kind: str
    written: str = ""  # as the text writes it ("Zoë")


def mentions(text: str, words: Iterable[str] | None = None) -> tuple[Mention, ...]:
    """The names one message addresses and the names its speaker gives itself, each once, in
    text order. Names are capitalised words of a script with capitals; nothing else is read.
    `words`: the text's lowercase words, when the caller has them (features.extract)."""
    if len(text) > _READ_WHOLE:
        return tuple(dict.fromkeys(_mentions(text[:_END]) + _mentions(text[-_END:])))
    return tuple(dict.fromkeys(_mentions(text, None if words is None else frozenset(words))))


def _mentions(text: str, words: frozenset[str] | None = None) -> list[Mention]:
    """The mentions of one text (or one end of a long one), in text order."""
    lowered = text.lower()
    if words is None:
        words = frozenset(_LOWER_WORD.findall(lowered))
    greetings = words & _GREETING_WORDS
    interjections = words & _INTERJECTION_WORDS
    cues = [cue for cue in _INTRODUCTION_CUES if cue in lowered]
    matches = _at(_AFTER_GREETING, text, lowered, greetings) + _at(
        _AFTER_INTERJECTION, text, lowered, interjections) + _at(_INTRODUCED, text, lowered, cues)
    if "," in text:
        matches += list(_CLOSING.finditer(text)) + [m for m in [_OPENING.match(text)] if m]
    found = {(m.start(1), m.group(1), INTRODUCED if m.re is _INTRODUCED else ADDRESSED)
             for m in matches}
    return [Mention(name, kind, written) for _, written, kind in sorted(found)
            if (name := _name(written))]


def _at(pattern: re.Pattern[str], text: str, lowered: str, starts: Iterable[str]) -> list[re.Match[str]]:
    """The pattern's matches that start where one of `starts` stands in the lowercase text
    (each found by str.find), or, where lowering moved characters, anywhere."""
    if not starts:
        return []
    if len(lowered) != len(text):
        return list(pattern.finditer(text))
    found = []
    for start in sorted(starts):
        at = lowered.find(start)
        while at >= 0:
            match = pattern.match(text, at)
            if match:
                found.append(match)
            at = lowered.find(start, at + 1)
    return found


def _name(written: str) -> str:
    """A name as written, normalised, or "" when it is no name: one letter, not capitalised, all
    capitals ("LOL"), a word that stands where names do (_NOT_NAMES), a contraction."""
    name = normalize(written)
    if len(written) > 1 and written[0].isupper() and not written.isupper() \
            and name not in _NOT_NAMES and not _CONTRACTION.search(written):
        return name
    return ""


@dataclass(frozen=True)
class Evidence:
    """How often a user's memory gives a name to a role, by kind of mention."""

    name: str
    role: str
    addressed: int = 0
    introduced: int = 0
    written: str = ""  # the name as first written

    @property
    def votes(self) -> int:
        return self.addressed + self.introduced


@dataclass(frozen=True)
class Speakers:
    """The names attached to roles: `roles` maps a name to its role, `names` a role to its
    names, most mentioned first, and `evidence` keeps what attached each name."""

    roles: dict[str, str]
    names: dict[str, tuple[str, ...]]
    evidence: dict[str, Evidence]

    @property
    def written(self) -> dict[str, str]:
        """Each attached name as the conversation first wrote it."""
        return {name: e.written or name.title() for name, e in self.evidence.items()}

    def role_of(self, name: str) -> str | None:
        """The role a name is attached to: the name itself, or one it shortens or that shortens
        it ("Mel" found, "Melanie" asked: three letters or more), when that names one role."""
        if name in self.roles:
            return self.roles[name]
        found = {role for known, role in self.roles.items()
                 if min(len(known), len(name)) >= 3
                 and (name.startswith(known) or known.startswith(name))}
        return found.pop() if len(found) == 1 else None


NO_SPEAKERS = Speakers({}, {}, {})


def attach(evidence: Iterable[Evidence]) -> Speakers:
    """Which names belong to which roles, on clear evidence only (see the module docstring):
    the same evidence always attaches the same names, whatever order it comes in."""
    by_name: dict[str, list[Evidence]] = {}
    for item in evidence:
        if item.votes > 0:
            by_name.setdefault(item.name, []).append(item)
    candidates: dict[str, list[Evidence]] = {}
    for _, items in sorted(by_name.items()):
        best = max(items, key=lambda e: (e.votes, e.role))
        total = sum(e.votes for e in items)
        runner_up = max((e.votes for e in items if e is not best), default=0)
        if best.votes >= MIN_VOTES and best.votes >= NAME_SHARE * total and best.votes > runner_up:
            candidates.setdefault(best.role, []).append(best)
    roles: dict[str, str] = {}
    names: dict[str, tuple[str, ...]] = {}
    kept: dict[str, Evidence] = {}
    for role, items in sorted(candidates.items()):
        person = _one_person(items)
        if person:
            names[role] = tuple(e.name for e in person)
            for e in person:
                roles[e.name] = role
                kept[e.name] = e
    return Speakers(roles, names, kept)


def _one_person(items: list[Evidence]) -> list[Evidence]:
    """The names of a role that are one person's: the most mentioned name with the names that
    begin it or that it begins ("Mel", "Melanie"), when they hold ROLE_SHARE of the role's
    mentions; none when the role's mentions are spread over several people."""
    ranked = sorted(items, key=lambda e: (-e.votes, e.name))
    top = ranked[0].name
    person = [e for e in ranked if top.startswith(e.name) or e.name.startswith(top)]
    if sum(e.votes for e in person) < ROLE_SHARE * sum(e.votes for e in ranked):
        return []
    return person

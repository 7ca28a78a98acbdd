"""Who is who in a conversation, read from its text.

A chat sent as `role` `user` and `assistant` with the bare text never says who spoke, yet the
conversation does: a third of LoCoMo's turns address the other side by name ("Hey Mel!",
"Thanks, Caroline.", "Caroline, that's great"), and now and then a speaker names itself ("I'm
Caroline", "my name is Caroline"). `mentions` reads both from one message at Add time;
`attach` decides, from every mention a user's memory holds and from how its texts write each
word (`usage_of`), which name belongs to which role.

A word in a name's place is not a name by itself: "Morning, ...", "Nah, ...", "Yo, ...", "Max,
sit!" (a dog), "Hey Stranger!" stand where names stand. An audit of real chats (two people,
400-1,500 turns, most never addressing each other by name) found one user written "Morning" on
all her 479 turns, another "Nah" on all 415: two openers were enough. So a name is attached to a
role only when the conversation shows it is a person's name and that person's:

- it is given to the role by MIN_VOTES messages or more (one message counts once, however often
  it spells the name), most of them for that role (NAME_SHARE);
- it is written as a name: capitalised where no sentence starts ("Hey Mel", "Thanks, Caroline",
  "with Max") at least once, not only as a message's first word, where greetings, fillers,
  times of day and commands to a third party stand as often;
- it is not a common word: the chat writes it in lowercase in fewer than a quarter as many
  messages as it writes it capitalised there ("this morning", "I will", "a total stranger");
- it is said to the role, not about someone: fewer messages speak of it in the third person
  ("I took Max to the vet", "How's Anthony?") than give it to a role, unless the role gave it
  to itself ("I'm Darryl": the documents an assistant drafts for Darryl sign them "Darryl");
- the role's person is addressed by it once at least where no message starts (a greeting, a
  closing, an interjection) or introduces itself by it, and is given it in two sessions or
  more, or introduces itself by it;
- the role's names are one person's (ROLE_SHARE): the name the other side calls it most, with
  the names that shorten it or that it shortens ("Mel" and "Melanie", "Deb" and "Deborah"), and
  names the role gives only itself (a persona); a role several people share attaches nothing.

Unnamed is always better than wrong. Pure functions of strings and counts.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from aml_retriever.analysis.tokenizer import normalize

# The kinds of mention: a name the other side calls this role by where no message starts
# (after a greeting or an interjection, or closing a sentence), one that only opens a message
# before a comma ("Caroline, ...": where "Morning, ..." and "Max, sit!" stand too), or one this
# role gives itself. OPENING counts as a name addressed everywhere counts are shown.
ADDRESSED, OPENING, INTRODUCED = "addressed", "opening", "introduced"
ADDRESSING = (ADDRESSED, OPENING)

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
# people put before a comma or after a greeting ("Yeah, ...", "Hey there!", "Oh Sure.", "Oh
# Boy!"), the words people call each other by that are no names ("Hey Stranger!", "Okay,
# Boomer."), and the names of roles ("Thanks, Assistant!"): a role's name is its role, never a
# person's. Not the rule: a word outside it is judged by how the chat writes it (`attach`).
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
boy lord god goodness heavens jeez geez crap snap shoot
stranger sunshine champ chief sweetheart gorgeous kiddo hun hon fam bestie cutie boomer
user assistant system tool human bot model developer chatbot
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
# given their names by 34 to 212 messages each, in 17 to 32 sessions; the most frequent word
# that is no name, 4 messages, 4 to 1 across the two roles).
MIN_VOTES = 2  # a single "Thanks, Will" attaches nothing
NAME_SHARE = 0.75  # of a name's messages, the share that must give it to one role
ROLE_SHARE = 2 / 3  # of a role's names' messages, the share its one person must hold
MIN_SESSIONS = 2  # a name said in one sitting only ("Hey Ivy!" twice) may be anyone's
# A word the chat writes in lowercase in a quarter as many messages as it capitalises it where no
# sentence starts is a common word ("a total stranger" beside two "Hey Stranger!"). A name is
# written capitalised: LoCoMo dev's ten names never in lowercase in 2,760 turns; BEAM dev's
# users' names once in 18 (an address in a drafted letter), where e-mail addresses, paths and
# code, which are not prose, do not count (`usage_of`).
LOWERCASE_SHARE = 4


@dataclass(frozen=True)
class Mention:
    """A name a message gives: `kind` ADDRESSED or OPENING (the other side's) or INTRODUCED
    (its own)."""

    name: str  # normalised (tokenizer.normalize)
    kind: str
    written: str = ""  # as the text writes it ("Zoë")


def mentions(text: str, words: Iterable[str] | None = None) -> tuple[Mention, ...]:
    """The names one message addresses and the names its speaker gives itself, each once (a
    name addressed both where no message starts and as its opener counts as ADDRESSED; its
    spelling the one `written_order` puts first), in text order. Names are capitalised words of
    a script with capitals; nothing else is read. `words`: the text's lowercase words, when the
    caller has them (features.extract)."""
    if len(text) > _READ_WHOLE:
        return _once(_mentions(text[:_END]) + _mentions(text[-_END:]))
    return _once(_mentions(text, None if words is None else frozenset(words)))


def _once(found: list[Mention]) -> tuple[Mention, ...]:
    """One mention a name and side: "I'm Mallory. I'm MAllory. ..." is one message's one
    introduction, however many ways it spells it (63 spellings in one message outvoted a name
    six messages gave)."""
    kept: dict[tuple[str, bool], Mention] = {}
    for mention in found:
        key = (mention.name, mention.kind == INTRODUCED)
        seen = kept.get(key)
        if seen is None:
            kept[key] = mention
        else:
            kind = ADDRESSED if ADDRESSED in (seen.kind, mention.kind) else seen.kind
            written = min(seen.written, mention.written, key=written_order)
            kept[key] = Mention(seen.name, kind, written)
    return tuple(kept.values())


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
    found = {(m.start(1), m.group(1), _KINDS.get(m.re, ADDRESSED)) for m in matches}
    return [Mention(name, kind, written) for _, written, kind in sorted(found)
            if (name := _name(written))]


# The kind each pattern finds (the others: ADDRESSED).
_KINDS = {_INTRODUCED: INTRODUCED, _OPENING: OPENING}


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


def written_order(written: str) -> tuple[bool, str]:
    """Which of a name's written forms it is shown in: one capitalised as a name is ("Mel"
    before "MEl"), then the first in code point order: the same whatever order they came in."""
    return (written[1:] != written[1:].lower(), written)


# ---- how the chat writes a word -------------------------------------------------------------

@dataclass(frozen=True)
class Usage:
    """How the messages that hold a word write it (`usage_of`), each message counted once."""

    read: int = 0  # messages read
    capitalised: int = 0  # writing it capitalised where no sentence starts ("Hey Mel", "with Max")
    lowercase: int = 0  # writing it in lowercase, in prose ("this morning")
    talked_about: int = 0  # writing it capitalised mid-sentence, and giving it to no role
    giving: int = 0  # giving it to a role (a mention the memory keeps)
    written: str = ""  # as the messages giving it write it (`written_order`'s first)


# What stands before a word that does not start a sentence: a letter, a digit, a comma or a
# semicolon on the same line ("Hey Mel", "Thanks, Caroline", "walked Max"); after a stop, a
# line break, a quote or a mark, a capital says nothing.
_MID = re.compile(r"[^\W_]|[,;]")
# Marks around a word that make it part of an address, a path or code, not prose
# ("craig@example.com", "github.com/craig", "craig_portfolio").
_NOT_PROSE_BEFORE = frozenset("@/\\_.#-")
_NOT_PROSE_AFTER = frozenset("@/\\_")
# Most places a text is read at for one word: a text of 10,000 sentences that each open with a
# name costs as much as one of 64 (a LoCoMo turn writes its partner's name once or twice).
_MOST_PLACES = 64


def usage_of(name: str, written: str, texts: Iterable[tuple[str, bool]]) -> Usage:
    """How `texts` ((text, whether the message gives the name to a role)) write the word `name`
    (normalised; `written`, a spelling of it, finds spellings normalising moved: "Zoë"). Each
    text is read until it is known how it writes it, at _MOST_PLACES places at most."""
    forms = tuple(sorted({name, written.lower()} - {""}, key=len, reverse=True))
    pattern = re.compile(r"(?<![^\W\d_])(?:" + "|".join(map(re.escape, forms)) + r")(?![^\W\d_])",
                         re.IGNORECASE)
    read = capitalised = lowercase = talked_about = giving = 0
    spellings: set[str] = set()
    for text, gives in texts:
        read += 1
        giving += gives
        mid, lower = _writes(_places(pattern, forms, text), text, spellings if gives else None)
        capitalised += mid
        lowercase += lower
        talked_about += mid and not gives
    return Usage(read, capitalised, lowercase, talked_about, giving,
                 min(spellings, key=written_order) if spellings else "")


def _places(pattern: re.Pattern[str], forms: tuple[str, ...], text: str) -> Iterator[tuple[int, int]]:
    """Where a text writes the word (any case, between non-letters), at _MOST_PLACES places at
    most. Found by str.find in the lowercase text where lowering moves no character (a BEAM
    dev reply of 3,700 characters: 10 us; the case-blind pattern took 440 us), else by the
    pattern."""
    lowered = text.lower()
    if len(lowered) != len(text):
        for match in itertools.islice(pattern.finditer(text), _MOST_PLACES):
            yield match.start(), match.end()
        return
    found = 0
    for form in forms:
        at = lowered.find(form)
        while at >= 0 and found < _MOST_PLACES:
            end = at + len(form)
            if not (at and _is_letter(text[at - 1])) and not (end < len(text) and _is_letter(text[end])):
                found += 1
                yield at, end
            at = lowered.find(form, at + 1)


def _is_letter(char: str) -> bool:
    return char.isalpha()


def _writes(places: Iterable[tuple[int, int]], text: str, spellings: set[str] | None) -> tuple[bool, bool]:
    """Whether a text writes the word capitalised where no sentence starts, and in lowercase in
    prose, at these places; the capitalised spellings it gives into `spellings` (when it gives
    the name)."""
    mid = lower = False
    for start, end in places:
        word = text[start:end]
        if (start and text[start - 1] in _NOT_PROSE_BEFORE) or (
                end < len(text) and text[end] in _NOT_PROSE_AFTER):
            continue
        if word.islower():
            lower = True
        elif word[0].isupper() and not word.isupper():
            if spellings is not None and len(spellings) < 8:
                spellings.add(word)
            mid = mid or _mid_sentence(text, start)
        if mid and lower and (spellings is None or len(spellings) >= 8):
            break
    return mid, lower


def _mid_sentence(text: str, start: int) -> bool:
    """Whether the word at `start` stands where no sentence starts (see _MID)."""
    before = text[max(0, start - 40):start].rstrip(" \t")
    return bool(before) and _MID.fullmatch(before[-1]) is not None


# ---- which names belong to which roles ------------------------------------------------------

@dataclass(frozen=True)
class Evidence:
    """How often a user's memory gives a name to a role: the messages that give it, by kind."""

    name: str
    role: str
    addressed: int = 0  # messages of the other side calling the role by it (OPENING among them)
    introduced: int = 0  # messages of the role giving it to itself
    written: str = ""  # the name as first written
    opening: int = 0  # of `addressed`, the messages that give it only as their first word
    sessions: int = 0  # the sessions of the messages that give it (0: not read)

    @property
    def votes(self) -> int:
        return self.addressed + self.introduced


# Why a name was not attached (the speakers endpoint shows it beside each candidate).
FEW = "given by one message only"
SPLIT = "given to several roles"
UNCHECKED = "not read: too many names"
FIRST_WORD = "never written as a name where no sentence starts"
LOWERCASE = "written in lowercase too: a word"
TALKED_ABOUT = "spoken of more than spoken to"
OPENER_ONLY = "only ever a message's first word"
ONE_SESSION = "given in one session only, never self-introduced"
SEVERAL = "one of several people given the role"
OTHER = "another name than the role's person's"


@dataclass(frozen=True)
class Speakers:
    """The names attached to roles: `roles` maps a name to its role, `names` a role to its
    names (its person's, most given first, then the names the role gave only itself),
    `evidence` keeps what attached each name, `shown` the name the reader's view shows for each
    role (the longest of its person's: "Melanie" where "Mel" and "Melanie" are both used), and
    `rejected` why each other name read was not attached."""

    roles: dict[str, str]
    names: dict[str, tuple[str, ...]]
    evidence: dict[str, Evidence]
    shown: dict[str, str] = field(default_factory=dict)
    rejected: dict[str, str] = field(default_factory=dict)

    @property
    def written(self) -> dict[str, str]:
        """Each attached name as the conversation writes it."""
        return {name: e.written or name.title() for name, e in self.evidence.items()}

    def shown_for(self, role: str) -> str:
        """The name the view shows for a role, as written ("" when it has none)."""
        name = self.shown.get(role) or max(self.names.get(role, ("",)), key=lambda n: (len(n), n))
        return self.written.get(name, name.title()) if name else ""

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


def claims(evidence: Iterable[Evidence]) -> list[Evidence]:
    """The names given mostly to one role (MIN_VOTES, NAME_SHARE), each with that role, most
    given first: the names worth reading the texts for (`usage_of`)."""
    return sorted((best for best, why in _claims(evidence).values() if not why),
                  key=lambda e: (-e.votes, e.name))


def _claims(evidence: Iterable[Evidence]) -> dict[str, tuple[Evidence, str]]:
    """Each name's role (the one most give it to), and why it cannot be that role's ("" when it
    can): too few messages give it, or they give it to several roles."""
    by_name: dict[str, list[Evidence]] = {}
    for item in evidence:
        if item.votes > 0:
            by_name.setdefault(item.name, []).append(item)
    found = {}
    for name, items in sorted(by_name.items()):
        best = max(items, key=lambda e: (e.votes, e.role))
        total = sum(e.votes for e in items)
        runner_up = max((e.votes for e in items if e is not best), default=0)
        why = FEW if best.votes < MIN_VOTES else (
            "" if best.votes >= NAME_SHARE * total and best.votes > runner_up else SPLIT)
        found[name] = (best, why)
    return found


def attach(evidence: Iterable[Evidence], usage: Mapping[str, Usage] | None = None) -> Speakers:
    """Which names belong to which roles, on the evidence the module docstring lists: the
    mentions' counts (`evidence`, with their openers and sessions) and how the texts write each
    name (`usage`: a name without one may be a role's second person, never its name). The same
    evidence always attaches the same names, whatever order it comes in."""
    usage = usage or {}
    rejected: dict[str, str] = {}
    by_role: dict[str, list[Evidence]] = {}
    for name, (best, why) in _claims(evidence).items():
        used = usage.get(name)
        why = why or (UNCHECKED if used is None else _not_a_name(best, used))
        if why and why != UNCHECKED:
            rejected[name] = why
            continue
        if used is not None and used.written:
            best = Evidence(best.name, best.role, best.addressed, best.introduced, used.written,
                            best.opening, best.sessions)
        by_role.setdefault(best.role, []).append(best)  # an unread name still competes
        if why:
            rejected[name] = why
    roles: dict[str, str] = {}
    names: dict[str, tuple[str, ...]] = {}
    kept: dict[str, Evidence] = {}
    shown: dict[str, str] = {}
    for role, items in sorted(by_role.items()):
        person, aliases, why = _person([e for e in items if e.name not in rejected], items)
        for e in items:
            if e.name not in rejected and e not in person and e not in aliases:
                rejected[e.name] = why or OTHER
        if not person:
            continue
        names[role] = tuple(e.name for e in person + aliases)
        shown[role] = max((e.name for e in person), key=lambda n: (len(n), n))
        for e in person + aliases:
            roles[e.name] = role
            kept[e.name] = e
    return Speakers(roles, names, kept, shown, rejected)


def _not_a_name(claim: Evidence, used: Usage) -> str:
    """Why the texts show a word is no name of the role it is given ("" when they do not)."""
    if used.capitalised == 0:
        return FIRST_WORD
    if used.lowercase * LOWERCASE_SHARE >= used.capitalised:
        return LOWERCASE
    if used.talked_about >= max(1, used.giving) and claim.introduced == 0:
        return TALKED_ABOUT
    return ""


def _person(names: list[Evidence], competing: list[Evidence]) -> tuple[list[Evidence], list[Evidence], str]:
    """A role's person among its names read as names (`names`), against every name the role is
    given that may be a person's (`competing`, unread ones too): the name the other side calls
    it most with the names that begin it or that it begins ("Mel", "Melanie"), when they hold
    ROLE_SHARE of the competing messages and the evidence is the role's (module docstring); and
    the names the role gives only itself (a persona), listed after. ([], [], why) when not."""
    if not names:
        return [], [], ""
    ranked = sorted(names, key=lambda e: (-e.addressed, -e.votes, e.name))
    top = ranked[0].name
    person = [e for e in sorted(names, key=lambda e: (-e.votes, e.name))
              if top.startswith(e.name) or e.name.startswith(top)]
    if sum(e.votes for e in person) < ROLE_SHARE * sum(e.votes for e in competing):
        return [], [], SEVERAL
    if not any(e.addressed > e.opening or e.introduced for e in person):
        return [], [], OPENER_ONLY
    if not any(e.introduced or e.sessions >= MIN_SESSIONS for e in person):
        return [], [], ONE_SESSION
    aliases = [e for e in sorted(names, key=lambda e: (-e.votes, e.name))
               if e not in person and e.introduced and not e.addressed]
    return person, aliases, ""

"""A strict parser of the Prometheus text exposition format 0.0.4, written for the tests (and
checked against prometheus_client's own parser where that is installed).

It refuses what a Prometheus server would refuse, and a little more: a sample before its
family's TYPE, a family split in two, HELP or TYPE given twice, a series given twice, a malformed
name, label, escape or value."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


class FormatError(ValueError):
    pass


@dataclass
class MetricFamily:
    name: str
    type: str = "untyped"
    help: str | None = None
    typed: bool = False  # a TYPE line was given
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)


def parse(text: str) -> dict[str, MetricFamily]:
    """Every family in `text`, in order, each with its samples."""
    if text and not text.endswith("\n"):
        raise FormatError("the exposition must end with a line feed")
    families: dict[str, MetricFamily] = {}
    current: str | None = None
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for number, line in enumerate(text.split("\n")[:-1], 1):
        if not line.strip():
            continue
        if line.startswith("#"):
            current = _comment(line, families, current, number)
            continue
        name, labels, value = _sample(line, number)
        family = _family_of(name, families)
        if family != current:
            if family in families and families[family].samples:
                raise FormatError(f"line {number}: family {family} is split in two")
            current = family
        key = (name, tuple(sorted(labels.items())))
        if key in seen:
            raise FormatError(f"line {number}: series {key} given twice")
        seen.add(key)
        families.setdefault(family, MetricFamily(family)).samples.append((name, labels, value))
    return families


def _comment(line: str, families: dict[str, MetricFamily], current: str | None,
             number: int) -> str | None:
    parts = line.split(" ", 3)
    if len(parts) < 3 or parts[1] not in ("HELP", "TYPE"):
        return current  # any other comment
    keyword, name = parts[1], parts[2]
    if not NAME.fullmatch(name):
        raise FormatError(f"line {number}: bad metric name {name!r}")
    family = families.setdefault(name, MetricFamily(name))
    if family.samples:
        raise FormatError(f"line {number}: {keyword} of {name} after its samples")
    rest = parts[3] if len(parts) == 4 else ""
    if keyword == "HELP":
        if family.help is not None:
            raise FormatError(f"line {number}: HELP of {name} given twice")
        family.help = _unescape(rest, number, quote=False)
    else:
        if rest not in TYPES or family.typed:
            raise FormatError(f"line {number}: bad or repeated TYPE {rest!r} of {name}")
        family.type, family.typed = rest, True
    return name


def _family_of(name: str, families: dict[str, MetricFamily]) -> str:
    for suffix in ("_bucket", "_sum", "_count"):
        base = name.removesuffix(suffix)
        if base != name and base in families and families[base].type in ("histogram", "summary"):
            return base
    return name


def _sample(line: str, number: int) -> tuple[str, dict[str, str], float]:
    match = NAME.match(line)
    if not match:
        raise FormatError(f"line {number}: no metric name")
    name, i = match.group(), match.end()
    labels: dict[str, str] = {}
    if i < len(line) and line[i] == "{":
        labels, i = _labels(line, i + 1, number)
    rest = line[i:].split(" ")
    if not rest or rest[0] != "" or len(rest) not in (2, 3):
        raise FormatError(f"line {number}: expected one space, a value and an optional timestamp")
    return name, labels, _float(rest[1], number)


def _labels(line: str, i: int, number: int) -> tuple[dict[str, str], int]:
    labels: dict[str, str] = {}
    while True:
        if line.startswith("}", i):
            return labels, i + 1
        match = LABEL_NAME.match(line, i)
        if not match or not line.startswith('="', match.end()):
            raise FormatError(f"line {number}: bad label at column {i}")
        i = match.end() + 2
        value = []
        while True:
            if i >= len(line):
                raise FormatError(f"line {number}: unterminated label value")
            char = line[i]
            if char == "\\":
                if i + 1 >= len(line) or line[i + 1] not in _ESCAPES:
                    raise FormatError(f"line {number}: bad escape in a label value")
                value.append(_ESCAPES[line[i + 1]])
                i += 2
            elif char == '"':
                i += 1
                break
            elif char == "\n":
                raise FormatError(f"line {number}: raw line feed in a label value")
            else:
                value.append(char)
                i += 1
        if match.group() in labels:
            raise FormatError(f"line {number}: label {match.group()} given twice")
        labels[match.group()] = "".join(value)
        if line.startswith(",", i):
            i += 1
        elif not line.startswith("}", i):
            raise FormatError(f"line {number}: expected , or }} after a label")


def _unescape(text: str, number: int, quote: bool) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\":
            nxt = text[i + 1] if i + 1 < len(text) else ""
            if nxt == "\\" or nxt == "n" or (quote and nxt == '"'):
                out.append(_ESCAPES[nxt])
                i += 2
                continue
            raise FormatError(f"line {number}: bad escape")
        out.append(text[i])
        i += 1
    return "".join(out)


def _float(text: str, number: int) -> float:
    if text in ("+Inf", "Inf"):
        return math.inf
    if text == "-Inf":
        return -math.inf
    if text == "NaN":
        return math.nan
    if not re.fullmatch(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?", text):
        raise FormatError(f"line {number}: bad value {text!r}")
    return float(text)

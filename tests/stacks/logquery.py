"""A reader of the filters the stacks write: the part of Cloud Logging's query language (metrics'
and log-match conditions' filters) and of Cloud Monitoring's filter syntax (threshold conditions,
dashboard charts) that they use, parsed and evaluated against one log entry or one time series,
given as the JSON the APIs return (`LogEntry`, `TimeSeries`).

What it follows, from Google's "Logging query language" page
(https://cloud.google.com/logging/docs/view/logging-query-language):
- `expression = ["NOT"] comparison { ("AND" | "OR") ["NOT"] comparison }`, parentheses group, and
  a comparison juxtaposed with another is ANDed with it;
- NOT (or a leading `-`) binds tightest, then OR, then AND: `"a" OR NOT "b" AND NOT "c" OR "d"`
  is `("a" OR (NOT "b")) AND ((NOT "c") OR "d")`;
- a comparison is `FIELD OP VALUE` with OP one of `= != > < >= <= : =~ !~`; `:` is "has"
  (a substring of the field), `FIELD:*` tests that the field is there; `=~`/`!~` match a regular
  expression (RE2; Python's `re` for the patterns written here);
- "String comparisons aren't case sensitive" (regular expressions are, as RE2's are);
- `severity` compares by the LogSeverity order, DEFAULT < DEBUG < ... < EMERGENCY.

Choices where the page says nothing the stacks depend on: a comparison on a field the entry does
not have is false, whatever the operator (so `NOT x="a"` matches an entry without `x`, and
`x!="a"` does not); a repeated field matches if any element does. Global restrictions (a bare
value) and value lists (`FIELD = ("a" OR "b")`) are refused: the stacks write neither.

Cloud Monitoring's filters (https://cloud.google.com/monitoring/api/v3/filters) are read with the
same comparisons; in that dialect OR is refused, since the stacks write none there and the oracle
does not claim its precedence.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

SEVERITIES = ("DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY")
"""LogSeverity's values in increasing order (the LogEntry reference)."""
OPERATORS = ("=~", "!~", ">=", "<=", "!=", "=", ">", "<", ":")
Dialect = Literal["logging", "monitoring"]


class QueryError(ValueError):
    """The text is not a filter this reader takes; the message says where and why."""


@dataclass(frozen=True)
class Comparison:
    """`path OP value`; value None is the `*` of `FIELD:*`."""

    path: tuple[str, ...]
    op: str
    value: str | None


@dataclass(frozen=True)
class Not:
    operand: Node


@dataclass(frozen=True)
class And:
    operands: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    operands: tuple[Node, ...]


Node = Comparison | Not | And | Or

_TOKEN = re.compile(
    r"""\s*(?:
    (?P<string>"(?:[^"\\]|\\.)*")
    |(?P<op>=~|!~|>=|<=|!=|=|>|<|:)
    |(?P<paren>[()])
    |(?P<word>[^\s()"=<>!:]+)
    )""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    at: int


def _tokens(text: str) -> list[_Token]:
    tokens, at = [], 0
    while at < len(text):
        if text[at:].strip() == "":
            break
        match = _TOKEN.match(text, at)
        if match is None or match.lastgroup is None:
            raise QueryError(f"unexpected character at {at}: {text[at : at + 20]!r}")
        kind = match.lastgroup
        tokens.append(_Token(kind, match.group(kind), match.start(kind)))
        at = match.end()
    return tokens


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text[1:-1])


class _Parser:
    def __init__(self, text: str, dialect: Dialect):
        self.text, self.dialect = text, dialect
        self.tokens = _tokens(text)
        self.next = 0

    def peek(self) -> _Token | None:
        return self.tokens[self.next] if self.next < len(self.tokens) else None

    def take(self) -> _Token:
        token = self.peek()
        if token is None:
            raise QueryError(f"the filter ends too early: {self.text!r}")
        self.next += 1
        return token

    def keyword(self, word: str) -> bool:
        token = self.peek()
        if token is not None and token.kind == "word" and token.text == word:
            self.next += 1
            return True
        return False

    def parse(self) -> Node:
        node = self.conjunction()
        if self.peek() is not None:
            token = self.take()
            raise QueryError(f"unexpected {token.text!r} at {token.at} in {self.text!r}")
        return node

    def conjunction(self) -> Node:
        operands = [self.disjunction()]
        while True:
            token = self.peek()
            if token is None or token.text == ")":
                break
            self.keyword("AND")  # juxtaposition is AND too
            operands.append(self.disjunction())
        return operands[0] if len(operands) == 1 else And(tuple(operands))

    def disjunction(self) -> Node:
        operands = [self.unary()]
        while self.keyword("OR"):
            if self.dialect == "monitoring":
                raise QueryError(f"OR in a Monitoring filter is not read here: {self.text!r}")
            operands.append(self.unary())
        return operands[0] if len(operands) == 1 else Or(tuple(operands))

    def unary(self) -> Node:
        if self.keyword("NOT"):
            return Not(self.unary())
        token = self.peek()
        if token is not None and token.kind == "word" and token.text.startswith("-") and len(token.text) > 1:
            # `-field=value`: the minus is NOT, glued to what it negates.
            self.tokens[self.next] = _Token("word", token.text[1:], token.at + 1)
            return Not(self.unary())
        if token is not None and token.text == "(":
            self.take()
            node = self.conjunction()
            closing = self.take()
            if closing.text != ")":
                raise QueryError(f"expected ) at {closing.at} in {self.text!r}")
            return node
        return self.comparison()

    def comparison(self) -> Comparison:
        field = self.take()
        if field.kind == "string":
            raise QueryError(
                f"{field.text} at {field.at} is a bare value (global restriction): not read here"
            )
        if field.kind != "word" or field.text in ("AND", "OR", "NOT"):
            raise QueryError(f"expected a field at {field.at} in {self.text!r}, found {field.text!r}")
        op = self.peek()
        if op is None or op.kind != "op":
            raise QueryError(
                f"{field.text!r} at {field.at} has no operator: a bare value (global restriction) "
                f"is not read here"
            )
        self.take()
        value = self.take()
        if value.kind == "string":
            return Comparison(_path(field.text), op.text, _unquote(value.text))
        if value.kind == "word":
            if value.text == "*":
                if op.text != ":":
                    raise QueryError(f"* goes with : only (at {value.at} in {self.text!r})")
                return Comparison(_path(field.text), op.text, None)
            return Comparison(_path(field.text), op.text, value.text)
        raise QueryError(f"expected a value at {value.at} in {self.text!r}, found {value.text!r}")


def _path(text: str) -> tuple[str, ...]:
    parts = tuple(text.split("."))
    if any(part == "" for part in parts):
        raise QueryError(f"{text!r} is not a field path")
    return parts


def parse(text: str, dialect: Dialect = "logging") -> Node:
    """The filter's syntax tree; QueryError if it is not one this reader takes."""
    return _Parser(text, dialect).parse()


def matches(node: Node | str, document: Mapping[str, Any], dialect: Dialect = "logging") -> bool:
    """Whether the filter selects the document (a LogEntry or a TimeSeries as JSON)."""
    tree = parse(node, dialect) if isinstance(node, str) else node
    if isinstance(tree, Not):
        return not matches(tree.operand, document, dialect)
    if isinstance(tree, And):
        return all(matches(operand, document, dialect) for operand in tree.operands)
    if isinstance(tree, Or):
        return any(matches(operand, document, dialect) for operand in tree.operands)
    return any(_compare(tree, value) for value in _values(document, tree.path))


def _values(document: Any, path: tuple[str, ...]) -> Iterator[Any]:
    """Every value at the path (a repeated field fans out); nothing if it is missing."""
    if isinstance(document, list):
        for item in document:
            yield from _values(item, path)
        return
    if not path:
        yield document
        return
    if isinstance(document, Mapping) and path[0] in document:
        yield from _values(document[path[0]], path[1:])


def _compare(comparison: Comparison, value: Any) -> bool:
    op, wanted = comparison.op, comparison.value
    if wanted is None:
        return True  # FIELD:* — the field is there
    if isinstance(value, Mapping):
        raise QueryError(f"{'.'.join(comparison.path)} is a structure: comparing it is not read here")
    if op == "=~":
        return re.search(wanted, _text(value)) is not None
    if op == "!~":
        return re.search(wanted, _text(value)) is None
    if comparison.path == ("severity",):
        return _order(op, _severity(_text(value)), _severity(wanted))
    number = _number(wanted)
    if isinstance(value, int | float) and not isinstance(value, bool) and number is not None:
        return _order(op, value, number)
    have, want = _text(value).casefold(), wanted.casefold()
    if op == ":":
        return want in have
    return _order(op, have, want)


def _order(op: str, have: Any, want: Any) -> bool:
    return {
        "=": have == want,
        "!=": have != want,
        ">": have > want,
        "<": have < want,
        ">=": have >= want,
        "<=": have <= want,
        ":": have == want,
    }[op]


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _severity(text: str) -> int:
    name = text.upper()
    if name not in SEVERITIES:
        raise QueryError(f"{text!r} is not a LogSeverity ({', '.join(SEVERITIES)})")
    return SEVERITIES.index(name)

"""Retry expressions: a small, safe language evaluated on a push delivery's response.

A topic's retry expression says whether an attempt failed: true means "retry". It replaces
PHP dq's `re_notify_flag`, which was run through PHP's `eval` (SPEC §4, docs/retry-expressions.md):

    expr  := or ;  or := and ('||' and)* ;  and := not ('&&' not)* ;  not := '!' not | cmp
    cmp   := value (('=='|'!='|'>'|'>='|'<'|'<=') value)?
    value := '{' path '}' | number | 'string' | "string" | true | false | null | '(' expr ')'
    path  := 'status' | 'res' ('.' segment)*

Three stages, none of which executes anything: `_tokenize` (text -> tokens), `_Parser`
(recursive descent, tokens -> a tree of immutable nodes) and the nodes' `value()` (tree +
response -> a JSON-like value).

Evaluation is total by construction rather than by a catch-all: every operation is defined
for every runtime value (None, bool, Decimal, str, list, dict), so `Expression.evaluate` has
no exception path to hide. The only places that can fail are the conversions of *foreign
text* into values, and each catches exactly what its library raises, next to the call:
`_parse_body` (invalid JSON, bad encoding, nesting too deep for the decoder) and
`_decimal_or_none` (an exponent too large for `decimal`). Recursion is bounded by the parse
limits (MAX_DEPTH), container rendering is iterative, and numbers are `Decimal` throughout,
so there is no float rounding, no NaN or infinity and no int-conversion digit limit.
The property tests in tests/test_expressions.py hold this to account.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Union

MAX_SOURCE_LENGTH = 2000
MAX_DEPTH = 50  # nested '(' and '!' together; also bounds the evaluator's recursion

# What the evaluator computes with: JSON values, with every number as a Decimal.
Value = Union[None, bool, Decimal, str, list, dict]

COMPARISON_OPERATORS = ("==", "!=", ">", ">=", "<", "<=")
_OPERATORS = ("==", "!=", ">=", "<=", "&&", "||", ">", "<", "!", "(", ")")  # longest first
_HALF_OPERATORS = {"=": "==", "&": "&&", "|": "||"}
_WORD_HINTS = {
    "res": "write {res...} or {status}",
    "status": "write {res...} or {status}",
    "and": "use &&",
    "or": "use ||",
    "not": "use !",
}
_KEYWORDS = {"true": True, "false": False, "null": None}
_ESCAPABLE = ("\\", "'", '"')
# A string that compares as a number: JSON's number syntax, leading zeros allowed.
_NUMERIC_STRING = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")

# Binding strength, loosest first; the printer parenthesises by these.
_OR, _AND, _NOT, _COMPARISON, _VALUE = 1, 2, 3, 4, 5


class ExpressionError(ValueError):
    """An invalid expression; `position` is the 0-based offset of the problem in the source."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(message)
        self.position = position


def _error(what: str, position: int, hint: str = "") -> ExpressionError:
    suffix = f" ({hint})" if hint else ""
    return ExpressionError(f"{what} at position {position}{suffix}", position)


# --- runtime values ------------------------------------------------------------------------

@dataclass(frozen=True)
class _Response:
    status: Decimal | None
    res: Value


def _decimal_or_none(text: str) -> Decimal | None:
    # decimal refuses exponents beyond about 10**18 with InvalidOperation; such a "number"
    # is treated as not a number rather than allowed to raise. With that trap switched off
    # (the context is per thread and anyone's to change) it answers NaN instead: same answer.
    try:
        number = Decimal(text)
    except (InvalidOperation, ValueError):
        return None
    return number if number.is_finite() else None


def _as_number(value: Value) -> Decimal | None:
    """The numeric reading of a value, if it has one (bools have none: true is not 1)."""
    if isinstance(value, Decimal):
        return value
    if isinstance(value, str) and _NUMERIC_STRING.fullmatch(value):
        return _decimal_or_none(value)
    return None


def _as_text(value: Value) -> str:
    """The string reading of a value: strings as they are, anything else as compact JSON."""
    return value if isinstance(value, str) else _render_json(value)


class _Raw(str):
    """Already-rendered JSON punctuation on `_render_json`'s work stack (never a value)."""


def _render_json(value: Value) -> str:
    # Iterative, not recursive: a response body may nest hundreds of levels deep and the
    # evaluator must not hit the recursion limit rendering it.
    parts: list[str] = []
    pending: list[object] = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, _Raw):
            parts.append(item)
        elif isinstance(item, dict):
            work: list[object] = [_Raw("{")]
            for index, (key, child) in enumerate(item.items()):
                work += [_Raw("," if index else ""), _Raw(json.dumps(key, ensure_ascii=False) + ":"), child]
            pending.extend(reversed(work + [_Raw("}")]))
        elif isinstance(item, list):
            work = [_Raw("[")]
            for index, child in enumerate(item):
                work += [_Raw("," if index else ""), child]
            pending.extend(reversed(work + [_Raw("]")]))
        else:
            parts.append(_render_scalar(item))
    return "".join(parts)


def _render_scalar(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return str(value)  # never format(): 1E+999999999 would become a billion digits
    return json.dumps(value, ensure_ascii=False)


def _truthy(value: Value) -> bool:
    if isinstance(value, Decimal):
        return not value.is_zero()
    if isinstance(value, (bool, str, list, dict)):
        return bool(value)
    return False  # None


def _equal(left: Value, right: Value) -> bool:
    if left is None or right is None:
        return left is None and right is None
    left_number, right_number = _as_number(left), _as_number(right)
    if left_number is not None and right_number is not None:
        return left_number == right_number
    return _as_text(left) == _as_text(right)


def _order(left: Value, right: Value) -> int | None:
    """-1, 0 or 1; None when null is involved (every ordering with null is false)."""
    if left is None or right is None:
        return None
    left_number, right_number = _as_number(left), _as_number(right)
    if left_number is not None and right_number is not None:
        return (left_number > right_number) - (left_number < right_number)
    left_text, right_text = _as_text(left), _as_text(right)
    return (left_text > right_text) - (left_text < right_text)


def _compare(operator: str, left: Value, right: Value) -> bool:
    if operator == "==":
        return _equal(left, right)
    if operator == "!=":
        return not _equal(left, right)
    order = _order(left, right)
    if order is None:
        return False
    if operator == ">":
        return order > 0
    if operator == ">=":
        return order >= 0
    if operator == "<":
        return order < 0
    return order <= 0  # "<="


def _child(container: Value, segment: str) -> Value:
    if isinstance(container, dict):
        return container.get(segment)
    if isinstance(container, list) and segment.isascii() and segment.isdigit():
        index = int(segment)  # at most MAX_SOURCE_LENGTH digits: far below int()'s limit
        return container[index] if index < len(container) else None
    return None


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")  # Python's json accepts NaN/Infinity; JSON does not


def _json_decimal(text: str) -> Decimal:
    number = _decimal_or_none(text)
    if number is None:
        raise ValueError(f"number out of range: {text[:20]}")
    return number


def _parse_body(body: bytes | bytearray | str | None) -> Value:
    """The response body as JSON values, or None if it is empty or not JSON."""
    if not isinstance(body, (bytes, bytearray, str)) or not body:
        return None
    try:
        # Decimal for ints too: exact, and free of int()'s 4300-digit conversion limit.
        return json.loads(body, parse_int=Decimal, parse_float=_json_decimal,
                          parse_constant=_reject_constant)
    except (ValueError, RecursionError):  # bad JSON or encoding (ValueError); too deep to decode
        return None


# --- the tree ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Literal:
    value: None | bool | Decimal | str
    precedence = _VALUE

    def value_in(self, response: _Response) -> Value:
        return self.value

    def to_source(self) -> str:
        if isinstance(self.value, str):
            escaped = self.value.replace("\\", "\\\\").replace("'", "\\'")
            return f"'{escaped}'"
        if isinstance(self.value, Decimal):
            return format(self.value, "f")  # literals come from digits, so no exponent blow-up
        return _render_scalar(self.value)


@dataclass(frozen=True)
class Path:
    root: str                     # "status" or "res"
    segments: tuple[str, ...] = ()
    precedence = _VALUE

    def value_in(self, response: _Response) -> Value:
        if self.root == "status":
            return response.status
        current = response.res
        for segment in self.segments:
            current = _child(current, segment)
        return current

    def to_source(self) -> str:
        return "{" + ".".join((self.root, *self.segments)) + "}"


@dataclass(frozen=True)
class Not:
    operand: Node
    precedence = _NOT

    def value_in(self, response: _Response) -> Value:
        return not _truthy(self.operand.value_in(response))

    def to_source(self) -> str:
        return "!" + _operand_source(self.operand, _NOT)


@dataclass(frozen=True)
class Comparison:
    operator: str
    left: Node
    right: Node
    precedence = _COMPARISON

    def value_in(self, response: _Response) -> Value:
        return _compare(self.operator, self.left.value_in(response), self.right.value_in(response))

    def to_source(self) -> str:
        left = _operand_source(self.left, _VALUE)
        right = _operand_source(self.right, _VALUE)
        return f"{left} {self.operator} {right}"


@dataclass(frozen=True)
class And:
    operands: tuple[Node, ...]   # two or more
    precedence = _AND

    def value_in(self, response: _Response) -> Value:
        return all(_truthy(operand.value_in(response)) for operand in self.operands)

    def to_source(self) -> str:
        # A nested And keeps its parentheses so that parsing the output gives this very tree.
        return " && ".join(_operand_source(operand, _AND + 1) for operand in self.operands)


@dataclass(frozen=True)
class Or:
    operands: tuple[Node, ...]   # two or more
    precedence = _OR

    def value_in(self, response: _Response) -> Value:
        return any(_truthy(operand.value_in(response)) for operand in self.operands)

    def to_source(self) -> str:
        return " || ".join(_operand_source(operand, _OR + 1) for operand in self.operands)


Node = Union[Literal, Path, Not, Comparison, And, Or]


def _operand_source(node: Node, weakest_allowed: int) -> str:
    source = node.to_source()
    return source if node.precedence >= weakest_allowed else f"({source})"


@dataclass(frozen=True)
class Expression:
    """A parsed retry expression; immutable, so one instance may serve many threads."""

    root: Node

    def evaluate(self, status: int, body: bytes | str | None) -> bool:
        """True when the attempt failed and should be retried. Never raises (module docstring):
        `res` is None for an empty or non-JSON body; a non-int status reads as null."""
        response = _Response(
            status=Decimal(status) if isinstance(status, int) else None,
            res=_parse_body(body),
        )
        return _truthy(self.root.value_in(response))

    def to_source(self) -> str:
        """Canonical text: parse(e.to_source()) gives back this tree, so printing is stable."""
        return self.root.to_source()


# --- tokens --------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Token:
    kind: str            # "operator", "value" or "end"
    text: str            # the source text, for error messages
    position: int
    node: Node | None = None   # for kind "value": the Literal or Path it denotes

    def is_operator(self, *operators: str) -> bool:
        return self.kind == "operator" and self.text in operators

    def describe(self) -> str:
        if self.kind == "end":
            return "end of expression"
        text = self.text if len(self.text) <= 30 else self.text[:27] + "..."
        return repr(text)


def _is_digit(char: str) -> bool:
    return "0" <= char <= "9"  # ASCII only: str.isdigit() also accepts '²' and '٣'


def _tokenize(source: str) -> list[_Token]:
    tokens: list[_Token] = []
    position = 0
    while position < len(source):
        char = source[position]
        if char.isspace():
            position += 1
            continue
        token = _read_token(source, position, char)
        tokens.append(token)
        position += len(token.text)
    tokens.append(_Token("end", "", len(source)))
    return tokens


def _read_token(source: str, position: int, char: str) -> _Token:
    if char == "{":
        return _read_placeholder(source, position)
    if char in "'\"":
        return _read_string(source, position)
    if _is_digit(char) or (char == "-" and _is_digit(source[position + 1:position + 2])):
        return _read_number(source, position)
    if char.isalpha() or char == "_":
        return _read_word(source, position)
    for operator in _OPERATORS:
        if source.startswith(operator, position):
            return _Token("operator", operator, position)
    if char in _HALF_OPERATORS:
        raise _error(f"unexpected {char!r}", position, f"did you mean {_HALF_OPERATORS[char]!r}?")
    raise _error(f"unexpected character {char!r}", position)


def _read_placeholder(source: str, start: int) -> _Token:
    end = source.find("}", start + 1)
    if end < 0:
        raise _error("unterminated placeholder", start, "missing '}'")
    nested = source.find("{", start + 1, end)
    if nested >= 0:
        raise _error("unexpected '{'", nested, "placeholders do not nest")
    path = _parse_path(source, start + 1, end)
    return _Token("value", source[start:end + 1], start, path)


def _parse_path(source: str, start: int, end: int) -> Path:
    """`status` or `res.a.0.b` between start and end; blanks around segments are ignored,
    so dq's `{res. data.status}` means `{res.data.status}` (in dq it silently read null)."""
    pieces: list[tuple[str, int]] = []   # (stripped text, position of its first character)
    piece_start = start
    for piece in source[start:end].split("."):
        stripped = piece.strip()
        offset = len(piece) - len(piece.lstrip()) if stripped else 0
        pieces.append((stripped, piece_start + offset))
        piece_start += len(piece) + 1
    (root, root_position), segments = pieces[0], pieces[1:]
    if root not in ("status", "res"):
        what = f"unknown path {root!r}" if root else "empty path"
        raise _error(what, root_position, "use {status} or {res...}")
    if root == "status" and segments:
        first_dot = source.index(".", start, end)
        raise _error("unexpected '.'", first_dot, "{status} has no fields")
    for segment, segment_position in segments:
        if not segment:
            raise _error("empty path segment", segment_position)
    return Path(root, tuple(segment for segment, _ in segments))


def _read_string(source: str, start: int) -> _Token:
    quote = source[start]
    chars: list[str] = []
    position = start + 1
    while position < len(source):
        char = source[position]
        if char == quote:
            return _Token("value", source[start:position + 1], start, Literal("".join(chars)))
        if char == "\\" and source[position + 1:position + 2] in _ESCAPABLE:
            position += 1
            char = source[position]
        # Any other backslash is kept as it is, like in PHP's single-quoted strings.
        chars.append(char)
        position += 1
    raise _error("unterminated string", start)


def _read_number(source: str, start: int) -> _Token:
    position = start + 1  # past the first digit or the '-'
    while position < len(source) and _is_digit(source[position]):
        position += 1
    if source[position:position + 1] == ".":
        if not _is_digit(source[position + 1:position + 2]):
            raise _error("expected a digit after '.'", position + 1)
        position += 1
        while position < len(source) and _is_digit(source[position]):
            position += 1
    text = source[start:position]
    return _Token("value", text, start, Literal(Decimal(text)))  # only digits: cannot fail


def _read_word(source: str, start: int) -> _Token:
    position = start
    while position < len(source) and (source[position].isalnum() or source[position] == "_"):
        position += 1
    word = source[start:position]
    keyword = word.lower()  # PHP's true/false/null are case-insensitive; dq users wrote TRUE
    if keyword in _KEYWORDS:
        return _Token("value", word, start, Literal(_KEYWORDS[keyword]))
    raise _error(f"unexpected {word!r}", start, _WORD_HINTS.get(keyword, ""))


# --- parser --------------------------------------------------------------------------------

class _Parser:
    """Recursive descent over the grammar in the module docstring, one method per rule."""

    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens = tokens
        self.index = 0
        self.depth = 0

    def peek(self) -> _Token:
        return self.tokens[self.index]

    def advance(self) -> _Token:
        token = self.tokens[self.index]
        if token.kind != "end":
            self.index += 1
        return token

    def enter(self, token: _Token) -> None:
        # Bounds the parser's and the evaluator's recursion alike.
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _error("expression nested too deeply", token.position, f"limit {MAX_DEPTH}")

    def parse_expression(self) -> Node:
        node = self.parse_or()
        token = self.peek()
        if token.kind != "end":
            raise _error(f"unexpected {token.describe()}", token.position)
        return node

    def parse_or(self) -> Node:
        operands = [self.parse_and()]
        while self.peek().is_operator("||"):
            self.advance()
            operands.append(self.parse_and())
        return operands[0] if len(operands) == 1 else Or(tuple(operands))

    def parse_and(self) -> Node:
        operands = [self.parse_not()]
        while self.peek().is_operator("&&"):
            self.advance()
            operands.append(self.parse_not())
        return operands[0] if len(operands) == 1 else And(tuple(operands))

    def parse_not(self) -> Node:
        token = self.peek()
        if not token.is_operator("!"):
            return self.parse_comparison()
        self.advance()
        self.enter(token)
        operand = self.parse_not()
        self.depth -= 1
        return Not(operand)

    def parse_comparison(self) -> Node:
        left = self.parse_value()
        operator = self.peek()
        if not operator.is_operator(*COMPARISON_OPERATORS):
            return left
        self.advance()
        right = self.parse_value()
        chained = self.peek()
        if chained.is_operator(*COMPARISON_OPERATORS):
            raise _error(f"unexpected {chained.describe()}", chained.position,
                         "comparisons do not chain; use && or parentheses")
        return Comparison(operator.text, left, right)

    def parse_value(self) -> Node:
        token = self.advance()
        if token.kind == "value":
            assert token.node is not None
            return token.node
        if token.is_operator("("):
            return self.parse_parenthesised(token)
        if token.kind == "end":
            raise _error("expected a value", token.position)
        raise _error(f"unexpected {token.describe()}", token.position, "expected a value")

    def parse_parenthesised(self, opening: _Token) -> Node:
        self.enter(opening)
        node = self.parse_or()
        closing = self.advance()
        if not closing.is_operator(")"):
            raise _error("expected ')'", closing.position,
                         f"to close '(' at position {opening.position}")
        self.depth -= 1
        return node


def parse(source: str) -> Expression:
    """The expression in `source`, or ExpressionError naming the position of the problem."""
    if len(source) > MAX_SOURCE_LENGTH:
        raise _error("expression too long", MAX_SOURCE_LENGTH, f"limit {MAX_SOURCE_LENGTH} characters")
    if not source.strip():
        raise _error("empty expression", 0)
    return Expression(_Parser(_tokenize(source)).parse_expression())


def check(source: str, status: int, body: bytes | str | None) -> dict:
    """The management API's tester (`POST expressions/check/`): validity, error, verdict."""
    try:
        expression = parse(source)
    except ExpressionError as error:
        return {"valid": False, "error": str(error), "retry": None}
    return {"valid": True, "error": None, "retry": expression.evaluate(status, body)}

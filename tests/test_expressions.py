"""Retry expressions (queues/expressions.py): dq's documented examples, the comparison rules,
every parse error with its position, and property tests for parse/print/evaluate.

Pure unit tests: no database, no Redis calls of their own.
"""
from __future__ import annotations

import decimal
import json
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from queues.expressions import (
    COMPARISON_OPERATORS,
    MAX_DEPTH,
    MAX_SOURCE_LENGTH,
    And,
    Comparison,
    Expression,
    ExpressionError,
    Literal,
    Not,
    Or,
    Path,
    check,
    parse,
)

# The example response of dq's README (reference/php-dq.md §5).
DQ_RESPONSE = json.dumps({"code": 200, "data": {"status": 2, "msg": "返回失败"}}, ensure_ascii=False).encode()
DQ_FAILED = json.dumps({"code": 500, "data": {"status": 1, "msg": "ok"}}).encode()


def retry(source: str, body: bytes | str | None = None, status: int = 200) -> bool:
    return parse(source).evaluate(status, body)


# --- dq's documented examples ----------------------------------------------------------------

@pytest.mark.parametrize("source, body, expected", [
    ("{res.code}!=200", DQ_RESPONSE, False),
    ("{res.code}!=200", DQ_FAILED, True),
    ("{res.code}!=200 && {res.data.status}!=2", DQ_RESPONSE, False),
    ("{res.code}!=200 && {res.data.status}!=2", DQ_FAILED, True),
    ("{res.code}!=200 && {res.data.status}!=2", b'{"code":500,"data":{"status":2}}', False),
    ("{res.code}==200 && {res.data.status}==2 || {res.data.msg}=='返回失败'", DQ_RESPONSE, True),
    ("{res.code}==200 && {res.data.status}==2 || {res.data.msg}=='返回失败'", DQ_FAILED, False),
    ("{res.code}==200 && {res.data.status}==2 || {res.data.msg}=='返回失败'",
     '{"code":500,"data":{"msg":"返回失败"}}', True),
    # dq's brief wrote `{res. data.status}`: PHP read the key " data" (always null); here it works.
    ("{res.code} != 200 && {res. data.status} != 2", DQ_RESPONSE, False),
    ("{res. data.status} == 2", DQ_RESPONSE, True),
    ("{ res . data . status } == 2", DQ_RESPONSE, True),
])
def test_it_gives_dq_documented_examples_their_verdicts(source, body, expected):
    assert retry(source, body) is expected


def test_it_reads_the_stray_space_form_as_the_plain_path():
    assert parse("{res. data.status}").to_source() == "{res.data.status}"


# --- comparison rules ----------------------------------------------------------------------

@pytest.mark.parametrize("source, body, expected", [
    # numbers and numeric strings compare numerically
    ("{res.code} == 200", b'{"code":"200"}', True),
    ("'200' == 200", None, True),
    ("'200.0' == 200", None, True),
    ("'007' == 7", None, True),
    ("'1e3' == 1000", None, True),
    ("'10' > '9'", None, True),
    ("{res.n} > 9", b'{"n":"10"}', True),
    # decimals, negatives, exactness (no float rounding)
    ("{res.ratio} >= 0.5", b'{"ratio":0.75}', True),
    ("{res.ratio} < 0.5", b'{"ratio":0.75}', False),
    ("{res.delta} == -1", b'{"delta":-1}', True),
    ("{res.delta} < -0.5", b'{"delta":-1}', True),
    ("{res.x} == 0.1", b'{"x":0.10}', True),
    ("{res.big} == 12345678901234567890123", b'{"big":12345678901234567890123}', True),
    ("{res.big} == 12345678901234567890124", b'{"big":12345678901234567890123}', False),
    ("{res.x} == 100000", b'{"x":1e5}', True),
    ("-0 == 0", None, True),
    # other values compare as strings
    ("{res.msg} == 'ok'", b'{"msg":"ok"}', True),
    ("{res.msg} != 'ok'", b'{"msg":"OK"}', True),
    ("'abc' < 'abd'", None, True),
    ("'b' > 'abc'", None, True),
    ("'10' < 'x'", None, True),               # one side not numeric: strings
    ("{res.ok} == true", b'{"ok":true}', True),
    ("{res.ok} == 'true'", b'{"ok":true}', True),   # booleans render as true/false
    ("{res.ok} == 1", b'{"ok":true}', False),        # ...and are not numbers
    ("{res.ok} == false", b'{"ok":false}', True),
    ("{res.data} == '{\"a\":[1,2]}'", b'{"data": {"a": [1, 2]}}', True),  # containers: compact JSON
    ("{res.list} == '[]'", b'{"list":[]}', True),
    # null equals only null; ordering with null is false
    ("{res.missing} == null", DQ_RESPONSE, True),
    ("{res.missing} != 2", DQ_RESPONSE, True),      # dq's rule: missing field + != means retry
    ("{res.missing} == 0", DQ_RESPONSE, False),
    ("{res.missing} == ''", DQ_RESPONSE, False),
    ("{res.missing} == false", DQ_RESPONSE, False),
    ("{res.missing} < 1", DQ_RESPONSE, False),
    ("{res.missing} >= 1", DQ_RESPONSE, False),
    ("{res.missing} <= null", DQ_RESPONSE, False),
    ("null == null", None, True),
    ("{res.value} == null", b'{"value":null}', True),
    ("'null' == null", None, False),
])
def test_it_compares_by_the_documented_rules(source, body, expected):
    assert retry(source, body) is expected


@pytest.mark.parametrize("source, status, expected", [
    ("{status} != 200", 200, False),
    ("{status} != 200", 500, True),
    ("{status} >= 500", 503, True),
    ("{status} == '201'", 201, True),
    ("{status} >= 200 && {status} < 300", 204, True),
])
def test_it_reads_the_http_status(source, status, expected):
    assert retry(source, b"", status=status) is expected


@pytest.mark.parametrize("source, body, expected", [
    ("{res.ok}", b'{"ok":true}', True),
    ("{res.ok}", b'{"ok":false}', False),
    ("{res.n}", b'{"n":0}', False),
    ("{res.n}", b'{"n":0.0}', False),
    ("{res.n}", b'{"n":-0.5}', True),
    ("{res.s}", b'{"s":""}', False),
    ("{res.s}", b'{"s":"0"}', True),   # only the listed values are false; "0" is a non-empty string
    ("{res.l}", b'{"l":[]}', False),
    ("{res.l}", b'{"l":[0]}', True),
    ("{res.d}", b'{"d":{}}', False),
    ("{res.d}", b'{"d":{"a":1}}', True),
    ("{res.missing}", b'{}', False),
    ("{res}", b'{}', False),
    ("{res}", b'[1]', True),
    ("!{res.missing}", b'{}', True),
    ("null", None, False),
    ("'x'", None, True),
    ("0.0", None, False),
    ("TRUE", None, True),
])
def test_it_tests_a_bare_value_for_truthiness(source, body, expected):
    assert retry(source, body) is expected


@pytest.mark.parametrize("source, expected", [
    ("true || false && false", True),          # && binds tighter than ||
    ("(true || false) && false", False),
    ("false && false || true", True),
    ("!false && false", False),                # ! binds tighter than &&
    ("!(false && false)", True),
    ("!true || true", True),
    ("!!true", True),
    ("!1 == 2", True),                         # ! applies to the comparison: !(1 == 2)
    ("(!1) == false", True),
    ("1 == 1 && 2 == 2", True),
    ("(1 == 1) == (2 == 2)", True),
    ("(1 == 2) == false", True),
])
def test_it_applies_precedence_and_parentheses(source, expected):
    assert retry(source) is expected


@pytest.mark.parametrize("source, expected", [
    ("{res.items.0.id} == 7", True),
    ("{res.items.1.id} == 8", True),
    ("{res.items.2.id} == null", True),        # past the end: missing
    ("{res.items.99999999999999999999} == null", True),
    ("{res.items.-1} == null", True),          # not an index
    ("{res.items.x} == null", True),
    ("{res.table.0} == 'zero'", True),         # on an object, digits are a key
    ("{res.items.0.id.deeper} == null", True),  # through a scalar: missing
    ("{res.items} == '[{\"id\":7},{\"id\":8}]'", True),
])
def test_it_indexes_arrays_and_treats_missing_paths_as_null(source, expected):
    body = b'{"items":[{"id":7},{"id":8}],"table":{"0":"zero"}}'
    assert retry(source, body) is expected


@pytest.mark.parametrize("body", [
    None, b"", "", b"   ", b"<html>500</html>", b"not json", b"\xff\xfe\xfd", b'{"code":',
    b"NaN", b'{"x": Infinity}', b"[" * 100_000, b'{"x": 1e99999999999999999999}',
])
def test_it_reads_empty_and_non_json_bodies_as_null(body):
    assert retry("{res} == null", body) is True
    assert retry("{res.code} != 200", body) is True     # so dq-style expressions retry
    assert retry("{res.code} == 200", body) is False


@pytest.mark.parametrize("body, source", [
    (b'"ok"', "{res} == 'ok'"),
    (b"1", "{res} == 1"),
    (b"true", "{res} == true"),
    ('{"msg":"返回失败"}', "{res.msg} == '返回失败'"),           # str bodies are fine too
    ('{"msg":"返回失败"}'.encode("utf-16"), "{res.msg} == '返回失败'"),
    (b'\xef\xbb\xbf{"a":1}', "{res.a} == 1"),                    # UTF-8 with a BOM
])
def test_it_reads_any_json_body_including_scalars(body, source):
    assert retry(source, body) is True


def test_it_survives_bodies_nested_deeper_than_the_recursion_limit():
    deep = "[" * 900 + "]" * 900
    body = '{"a": %s, "code": 500}' % deep
    assert retry("{res.a} == 'x'", body) is False
    assert retry("{res.a} < 'x'", body) is True
    assert retry("{res.code} != 200", body) is True


def test_it_treats_an_out_of_range_numeric_string_as_a_string():
    assert retry("{res.x} == 1", b'{"x":"1e99999999999999999999"}') is False
    assert retry("{res.x} > 'a'", b'{"x":"1e99999999999999999999"}') is False


def test_it_stays_total_when_the_thread_switches_decimal_traps_off():
    body = b'{"x":"1e99999999999999999999","y":1}'
    with decimal.localcontext() as context:
        context.traps[decimal.InvalidOperation] = False
        assert retry("{res.x} == 1", body) is False       # not a number, so a string
        assert retry("{res.x} > 'a'", body) is False
        assert retry("{res.x} < 2", body) is True         # "1e9…" < "2" as strings, not NaN
        assert retry("{res.y} >= 1", body) is True


def test_it_compares_huge_exponents_without_expanding_them():
    assert retry("{res.x} > 1", b'{"x":1e999999999}') is True
    assert retry("{res.x} == 'abc'", b'{"x":1e999999999}') is False


def test_it_reads_a_status_that_is_not_an_int_as_null():
    assert parse("{status} == null").evaluate(None, b"") is True  # type: ignore[arg-type]


# --- strings and printing ----------------------------------------------------------------

@pytest.mark.parametrize("source, value", [
    ("'plain'", "plain"),
    ('"double"', "double"),
    ("'it\\'s'", "it's"),
    ('"say \\"hi\\""', 'say "hi"'),
    ("'back\\\\slash'", "back\\slash"),
    ("'keep \\n as is'", "keep \\n as is"),
    ("'\"'", '"'),
    ("''", ""),
])
def test_it_reads_string_literals_with_escapes(source, value):
    assert parse(source).root == Literal(value)


@pytest.mark.parametrize("source, printed", [
    ("{res.code}!=200", "{res.code} != 200"),
    ("{ res. data .status }", "{res.data.status}"),
    ('"x"', "'x'"),
    ("'it\\'s'", "'it\\'s'"),
    ("TRUE", "true"),
    ("Null", "null"),
    ("1.50", "1.50"),
    ("-0", "-0"),
    ("((1))", "1"),
    ("(1 || 2) || 3", "(1 || 2) || 3"),        # structure is kept, so reparsing gives the same tree
    ("1 || (2 || 3)", "1 || (2 || 3)"),
    ("1 || 2 && 3", "1 || 2 && 3"),
    ("(1 || 2) && 3", "(1 || 2) && 3"),
    ("!(1 && 2)", "!(1 && 2)"),
    ("!(1 == 2)", "!1 == 2"),
    ("(!1) == 2", "(!1) == 2"),
    ("!(!1)", "!!1"),
])
def test_it_prints_canonical_source(source, printed):
    assert parse(source).to_source() == printed
    assert parse(printed).to_source() == printed


# --- errors ------------------------------------------------------------------------------

@pytest.mark.parametrize("source, message, position", [
    ("", "empty expression at position 0", 0),
    ("   ", "empty expression at position 0", 0),
    ("{status} == 200)", "unexpected ')' at position 15", 15),
    (")", "unexpected ')' at position 0 (expected a value)", 0),
    ("1 == ", "expected a value at position 5", 5),
    ("{res.a} &&", "expected a value at position 10", 10),
    ("1 == &&", "unexpected '&&' at position 5 (expected a value)", 5),
    ("(1 == 1", "expected ')' at position 7 (to close '(' at position 0)", 7),
    ("(1 2)", "expected ')' at position 3 (to close '(' at position 0)", 3),
    ("1 2", "unexpected '2' at position 2", 2),
    ("1 == 2 == 3", "unexpected '==' at position 7 (comparisons do not chain; use && or parentheses)", 7),
    ("'abc", "unterminated string at position 0", 0),
    ("1 == 'abc", "unterminated string at position 5", 5),
    ("'a\\'", "unterminated string at position 0", 0),
    ("{res.code", "unterminated placeholder at position 0 (missing '}')", 0),
    ("{foo}", "unknown path 'foo' at position 1 (use {status} or {res...})", 1),
    ("{ foo.bar }", "unknown path 'foo' at position 2 (use {status} or {res...})", 2),
    ("{RES.code}", "unknown path 'RES' at position 1 (use {status} or {res...})", 1),
    ("{}", "empty path at position 1 (use {status} or {res...})", 1),
    ("{.a}", "empty path at position 1 (use {status} or {res...})", 1),
    ("{status.code}", "unexpected '.' at position 7 ({status} has no fields)", 7),
    ("{res..a}", "empty path segment at position 5", 5),
    ("{res.a.}", "empty path segment at position 7", 7),
    ("{res.a{b}}", "unexpected '{' at position 6 (placeholders do not nest)", 6),
    ("1 = 1", "unexpected '=' at position 2 (did you mean '=='?)", 2),
    ("1 & 1", "unexpected '&' at position 2 (did you mean '&&'?)", 2),
    ("1 | 1", "unexpected '|' at position 2 (did you mean '||'?)", 2),
    ("1.", "expected a digit after '.' at position 2", 2),
    ("1.x", "expected a digit after '.' at position 2", 2),
    ("- 1", "unexpected character '-' at position 0", 0),
    ("1 @ 2", "unexpected character '@' at position 2", 2),
    ("$res['code']", "unexpected character '$' at position 0", 0),
    ("res.code != 200", "unexpected 'res' at position 0 (write {res...} or {status})", 0),
    ("status != 200", "unexpected 'status' at position 0 (write {res...} or {status})", 0),
    ("1 and 2", "unexpected 'and' at position 2 (use &&)", 2),
    ("1 or 2", "unexpected 'or' at position 2 (use ||)", 2),
    ("not 1", "unexpected 'not' at position 0 (use !)", 0),
    ("system('id')", "unexpected 'system' at position 0", 0),
    ("1 === 1", "unexpected '=' at position 4 (did you mean '=='?)", 4),
    ("(" * (MAX_DEPTH + 1) + "1" + ")" * (MAX_DEPTH + 1),
     f"expression nested too deeply at position {MAX_DEPTH} (limit {MAX_DEPTH})", MAX_DEPTH),
    ("!" * (MAX_DEPTH + 1) + "1", f"expression nested too deeply at position {MAX_DEPTH} (limit {MAX_DEPTH})",
     MAX_DEPTH),
    ("1" * (MAX_SOURCE_LENGTH + 1),
     f"expression too long at position {MAX_SOURCE_LENGTH} (limit {MAX_SOURCE_LENGTH} characters)",
     MAX_SOURCE_LENGTH),
])
def test_it_rejects_invalid_expressions_naming_the_position(source, message, position):
    with pytest.raises(ExpressionError) as raised:
        parse(source)
    assert str(raised.value) == message
    assert raised.value.position == position
    assert isinstance(raised.value, ValueError)


def test_it_accepts_the_limits_exactly():
    nested = "(" * MAX_DEPTH + "1" + ")" * MAX_DEPTH
    assert parse(nested).to_source() == "1"
    assert parse("!" * MAX_DEPTH + "1").evaluate(200, None) is True   # an even number of !
    assert parse(" " * (MAX_SOURCE_LENGTH - 1) + "1").to_source() == "1"
    long_chain = " || ".join(["0"] * ((MAX_SOURCE_LENGTH + 4) // 5))
    assert len(long_chain) <= MAX_SOURCE_LENGTH
    assert parse(long_chain).evaluate(200, None) is False   # flat: no recursion per operand


# --- the tester --------------------------------------------------------------------------

def test_check_gives_the_verdict_of_a_valid_expression():
    assert check("{res.code} != 200", 200, DQ_RESPONSE) == {"valid": True, "error": None, "retry": False}
    assert check("{status} >= 500", 502, b"") == {"valid": True, "error": None, "retry": True}


def test_check_reports_an_invalid_expression_without_a_verdict():
    assert check("{res.code} != 200)", 200, DQ_RESPONSE) == {
        "valid": False, "error": "unexpected ')' at position 17", "retry": None}


# --- properties --------------------------------------------------------------------------

# Texts made of the grammar's own pieces reach much deeper into the parser than random text.
_PIECES = ["{", "}", "(", ")", "res", "status", ".", " ", "!", "=", "==", "!=", "<", ">=", "&&", "||",
           "&", "|", "'", '"', "\\", "true", "null", "-", "0", "1.5", "a", "{res.a}", "{status}"]
grammar_soup = st.lists(st.sampled_from(_PIECES), max_size=30).map("".join)


@given(st.one_of(st.text(max_size=60), grammar_soup))
@settings(max_examples=500)
def test_parse_raises_nothing_but_expression_error(source):
    try:
        expression = parse(source)
    except ExpressionError as error:
        assert 0 <= error.position <= len(source)
        assert f"at position {error.position}" in str(error)
    else:
        assert parse(expression.to_source()) == expression


# Segments as a user could write them: no '.', braces or surrounding blanks.
segments = st.one_of(
    st.text(alphabet="abcXYZ_-é返0123456789", min_size=1, max_size=6),
    st.integers(0, 3).map(str),
    st.text(alphabet="ab ", min_size=1, max_size=5).map(str.strip).filter(bool),
)
paths = st.one_of(
    st.just(Path("status")),
    st.lists(segments, max_size=3).map(lambda parts: Path("res", tuple(parts))),
)
numbers = st.builds(lambda digits, places: Decimal(digits).scaleb(-places),
                    st.integers(-10**6, 10**6), st.integers(0, 3))
literals = st.one_of(
    st.none(), st.booleans(), numbers, st.text(max_size=8),
    st.sampled_from(["200", "2", "ok", "返回失败", "true", "null", "-1", "0.5"]),
).map(Literal)


def _compound(children):
    operand_lists = st.lists(children, min_size=2, max_size=4).map(tuple)
    return st.one_of(
        children.map(Not),
        st.builds(Comparison, st.sampled_from(COMPARISON_OPERATORS), children, children),
        operand_lists.map(And),
        operand_lists.map(Or),
    )


trees = st.recursive(st.one_of(paths, literals), _compound, max_leaves=12)


def _height(node) -> int:
    children = {Not: lambda n: (n.operand,), Comparison: lambda n: (n.left, n.right),
                And: lambda n: n.operands, Or: lambda n: n.operands}.get(type(node), lambda n: ())(node)
    return 1 + max((_height(child) for child in children), default=0)


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-300, 300), st.integers(),
              st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6),
              st.sampled_from(["200", "2", "ok", "返回失败"])),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(segments, st.text(max_size=4)), children, max_size=4),
    ),
    max_leaves=15,
)
bodies = st.one_of(
    st.none(),
    st.binary(max_size=40),
    st.text(max_size=40),
    json_values.map(json.dumps),
    json_values.map(lambda value: json.dumps(value, ensure_ascii=False).encode()),
)
statuses = st.one_of(st.integers(100, 599), st.integers())


@given(trees)
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_printing_round_trips_and_is_stable(tree):
    assume(_height(tree) <= MAX_DEPTH)
    printed = Expression(tree).to_source()
    reparsed = parse(printed)
    assert reparsed.to_source() == printed
    assert reparsed == Expression(tree)


@given(trees, statuses, bodies)
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_a_reparsed_expression_evaluates_like_the_original(tree, status, body):
    assume(_height(tree) <= MAX_DEPTH)
    original = Expression(tree)
    assert parse(original.to_source()).evaluate(status, body) == original.evaluate(status, body)


@given(trees, statuses, bodies)
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_evaluate_never_raises_and_answers_a_bool(tree, status, body):
    assert type(Expression(tree).evaluate(status, body)) is bool


@given(st.one_of(st.text(max_size=60), grammar_soup), statuses, bodies)
@settings(max_examples=300)
def test_check_never_raises(source, status, body):
    result = check(source, status, body)
    assert set(result) == {"valid", "error", "retry"}
    assert (result["error"] is None) == result["valid"] == (result["retry"] is not None)

"""The filter reader (tests/stacks/logquery.py) on its own, with the examples of Google's "Logging
query language" page (https://cloud.google.com/logging/docs/view/logging-query-language)."""

from __future__ import annotations

import itertools

import pytest

from tests.stacks.logquery import And, Comparison, Not, Or, QueryError, matches, parse


def entry(**fields) -> dict:
    return fields


def test_the_pages_example_matches_errors_of_compute_engine_without_robot():
    query = 'resource.type = "gce_instance" AND\nseverity >= "ERROR" AND\nNOT textPayload:robot'
    vm = {"type": "gce_instance"}
    assert matches(query, entry(resource=vm, severity="ERROR", textPayload="disk full"))
    assert matches(query, entry(resource=vm, severity="CRITICAL", textPayload="disk full"))
    assert not matches(query, entry(resource=vm, severity="WARNING", textPayload="disk full"))
    # "String comparisons aren't case sensitive": has finds Robot in "Robotic".
    assert not matches(query, entry(resource=vm, severity="ERROR", textPayload="Robotic arm stuck"))
    assert not matches(query, entry(resource={"type": "gae_app"}, severity="ERROR", textPayload="x"))


def test_not_binds_tightest_then_or_then_and_as_the_page_groups_its_example():
    # The page: "a" OR NOT "b" AND NOT "c" OR "d" is ("a" OR (NOT "b")) AND ((NOT "c") OR "d").
    tree = parse("a:* OR NOT b:* AND NOT c:* OR d:*")
    has = {name: Comparison((name,), ":", None) for name in "abcd"}
    assert tree == And((Or((has["a"], Not(has["b"]))), Or((Not(has["c"]), has["d"]))))
    for present in itertools.product([False, True], repeat=4):
        document = {name: 1 for name, there in zip("abcd", present, strict=True) if there}
        a, b, c, d = present
        assert matches(tree, document) == ((a or not b) and (not c or d)), document


def test_the_pages_conjunctive_and_disjunctive_restrictions():
    gae, vm = {"type": "gae_app"}, {"type": "gce_instance"}
    either = 'resource.type = "gae_app" OR resource.type = "gce_instance"'
    assert matches(either, entry(resource=gae)) and matches(either, entry(resource=vm))
    assert not matches(either, entry(resource={"type": "k8s_cluster"}))
    grouped = 'resource.type = "gae_app" AND (severity = "ERROR" OR severity = "CRITICAL")'
    assert matches(grouped, entry(resource=gae, severity="CRITICAL"))
    assert not matches(grouped, entry(resource=vm, severity="CRITICAL"))
    assert not matches(grouped, entry(resource=gae, severity="INFO"))


def test_juxtaposed_comparisons_are_anded():
    assert parse('a="1" b="2"') == parse('a="1" AND b="2"')
    assert not matches('a="1" b="2"', {"a": "1", "b": "3"})


def test_a_leading_minus_is_not():
    assert parse('-jsonPayload.x="a"') == Not(Comparison(("jsonPayload", "x"), "=", "a"))
    assert matches('-jsonPayload.x="a"', {"jsonPayload": {"x": "b"}})


def test_the_presence_test_matches_a_field_that_is_there_whatever_its_value():
    assert matches("jsonPayload.latency_ms:*", {"jsonPayload": {"latency_ms": 0}})
    assert matches("jsonPayload.recorded:*", {"jsonPayload": {"recorded": False}})
    assert not matches("jsonPayload.latency_ms:*", {"jsonPayload": {"outcome": "completed"}})


def test_equality_is_whole_and_not_case_sensitive_has_is_a_substring():
    line = {"jsonPayload": {"outcome": "store_unavailable"}}
    assert matches('jsonPayload.outcome="STORE_UNAVAILABLE"', line)
    assert not matches('jsonPayload.outcome="store"', line)
    assert matches('jsonPayload.outcome:"store"', line)


def test_severity_compares_by_its_order_not_alphabetically():
    assert matches("severity>=ERROR", {"severity": "EMERGENCY"})
    assert matches("severity>=ERROR", {"severity": "ALERT"})  # "ALERT" < "ERROR" alphabetically
    assert not matches("severity>=ERROR", {"severity": "WARNING"})  # "WARNING" > "ERROR" alphabetically
    assert matches("severity<WARNING", {"severity": "NOTICE"})
    with pytest.raises(QueryError, match="not a LogSeverity"):
        matches("severity>=BAD", {"severity": "ERROR"})


def test_numbers_compare_as_numbers():
    assert matches("jsonPayload.latency_ms>=100", {"jsonPayload": {"latency_ms": 250}})
    assert not matches("jsonPayload.latency_ms>=100", {"jsonPayload": {"latency_ms": 99.5}})
    assert matches("jsonPayload.latency_ms>9", {"jsonPayload": {"latency_ms": 10}})  # "10" < "9" as text


def test_regular_expressions_match_anywhere_and_are_case_sensitive():
    line = {"jsonPayload": {"message": "run completed in 12 ms"}}
    assert matches('jsonPayload.message=~"completed in [0-9]+ ms$"', line)
    assert not matches('jsonPayload.message=~"COMPLETED"', line)
    assert matches('jsonPayload.message!~"failed"', line)


def test_a_missing_field_fails_every_comparison_and_not_inverts_that():
    empty = {"jsonPayload": {}}
    for op in ("=", "!=", ":", ">", "=~"):
        assert not matches(f'jsonPayload.x{op}"a"', empty), op
    assert matches('NOT jsonPayload.x="a"', empty)


def test_a_repeated_field_matches_if_any_element_does():
    assert matches('labels.k="b"', {"labels": [{"k": "a"}, {"k": "b"}]})


def test_quoted_values_keep_escaped_quotes_and_spaces():
    assert matches(
        r'jsonPayload.message="said \"hi\" twice"', {"jsonPayload": {"message": 'said "hi" twice'}}
    )


@pytest.mark.parametrize(
    "text, says",
    [
        ('"The cat in the hat"', "global restriction"),
        ('(a="1"', "ends too early"),
        ('a="1")', "unexpected ')'"),
        ("a=", "ends too early"),
        ("a=*", "goes with : only"),
        ('a.="1"', "not a field path"),
    ],
)
def test_what_it_does_not_read_is_refused_with_where(text, says):
    with pytest.raises(QueryError, match=says.replace("(", r"\(").replace(")", r"\)")):
        parse(text)


def test_the_monitoring_dialect_refuses_or_whose_precedence_it_does_not_claim():
    series = {"metric": {"type": "t", "labels": {"outcome": "failed"}}, "resource": {"type": "r"}}
    assert matches('metric.type="t" AND metric.labels.outcome="failed"', series, "monitoring")
    with pytest.raises(QueryError, match="OR in a Monitoring filter"):
        parse('metric.type="t" OR metric.type="u"', "monitoring")

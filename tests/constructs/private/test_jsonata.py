"""JSONata field values and string literals as the hybrid workflow writes them into a state machine definition."""

import json

import pytest

from trainium_eks.constructs.private.jsonata import SUBSTITUTION, jsonata, literals, quoted


def test_a_field_value_wraps_the_expression():
    assert jsonata("$count($problems) > 0") == "{% $count($problems) > 0 %}"


@pytest.mark.parametrize(
    "text,literal",
    [
        ("plain", "'plain'"),
        ("it's", "'it\\u0027s'"),
        ("two\nlines\ttab", "'two\\nlines\\ttab'"),
        ("back\\slash", "'back\\\\slash'"),
        ("bell\x07", "'bell\\u0007'"),
        ("--output-dir /data/${TRAINING_JOB_NAME}", "'--output-dir /data/\\u0024{TRAINING_JOB_NAME}'"),
        ("${Token[TOKEN.123]}", "'${Token[TOKEN.123]}'"),  # a CDK token, resolved before CloudFormation reads it
        ("cost $5", "'cost $5'"),
    ],
)
def test_a_literal_is_one_quoted_line_without_a_cloudformation_placeholder(text, literal):
    assert quoted(text) == literal
    assert "\n" not in quoted(text) and not SUBSTITUTION.search(quoted(text))


def test_a_literal_reads_back_as_the_text_in_json_string_escapes():
    text = "a'b\nc\\d ${X}"
    body = quoted(text)[1:-1]
    assert json.loads('"' + body + '"') == text


def test_only_strings_a_template_cannot_hold_as_they_are_become_expressions():
    value = {"keep": "plain", "empty": "", "lines": ["a\nb"], "looks": "{% x %}", "placeholder": "${A}", "n": 3}
    assert literals(value) == {
        "keep": "plain",
        "empty": "{% '' %}",
        "lines": ["{% 'a\\nb' %}"],
        "looks": "{% '{% x %}' %}",
        "placeholder": "{% '\\u0024{A}' %}",
        "n": 3,
    }

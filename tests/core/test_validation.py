"""core.validation: the problem collector, its one error, and the shared checks of single values."""

import re

import aws_cdk as cdk
import pytest

from trainium_eks.core.validation import (
    ConfigurationError,
    Problems,
    az_name_hint,
    bucket_name_problem,
    check_absolute_path,
    check_bool,
    check_dns_label,
    check_dns_subdomain,
    check_image_reference,
    check_integer,
    check_label_key,
    check_label_value,
    check_number,
    check_pattern,
    check_stack_props,
    check_strings,
    check_text,
    coerce_enum,
    is_concrete,
    nearest,
    whole_number_hint,
)
from trainium_eks.facts.catalog import Accelerator


def test_every_problem_is_collected_and_raised_once_in_one_error_that_lists_them():
    problems = Problems("Stack/Nodes")
    assert not problems
    problems.raise_if_any()  # nothing recorded: no error
    problems.add("node_count", 0, "an integer of at least 1")
    problems.add("instance_type", "trn9", "an instance type of the catalog")
    assert problems and list(problems) == [
        "node_count=0: an integer of at least 1",
        "instance_type='trn9': an instance type of the catalog",
    ]
    with pytest.raises(ConfigurationError) as raised:
        problems.raise_if_any()
    error = raised.value
    assert isinstance(error, ValueError) and error.where == "Stack/Nodes"
    assert error.problems == list(problems)
    assert str(error) == (
        "Stack/Nodes: 2 configuration problems:\n"
        "  - node_count=0: an integer of at least 1\n"
        "  - instance_type='trn9': an instance type of the catalog"
    )
    assert str(ConfigurationError("x", ["a=1: b"])) == "x: 1 configuration problem:\n  - a=1: b"


def test_settings_are_named_as_the_user_set_them_also_through_a_renamed_view():
    problems = Problems("app", setting_names={"cpu_instance_type": "cpuInstanceType", "node_count": "nodeCount"})
    problems.add("node_count", 0, "at least 1")
    view = problems.renamed({"instance_type": "cpu_instance_type", "nodes": "node_count"})
    view.add("instance_type", "x", "a catalog type")
    view.add("nodes", -1, "at least 1")
    assert list(problems) == [
        "nodeCount=0: at least 1",
        "cpuInstanceType='x': a catalog type",
        "nodeCount=-1: at least 1",
    ], "the view records into the collector, under the collector's names"
    assert list(view) == list(problems) and view.where == "app"


def test_only_values_known_at_synth_are_concrete():
    stack = cdk.Stack()
    assert not is_concrete(None)
    assert not is_concrete(cdk.Aws.REGION)
    assert not is_concrete(f"prefix-{cdk.Aws.ACCOUNT_ID}")
    assert not is_concrete(cdk.Token.as_number(cdk.Fn.ref("Count")))
    assert not is_concrete(cdk.CfnParameter(stack, "Size", type="Number").value_as_number)
    for value in ("us-west-2", "", 0, 2.5, float("nan"), float("inf"), True, [cdk.Aws.REGION], {"a": 1}):
        assert is_concrete(value), value


CHECKS = [
    (lambda p, v: check_integer(p, "n", v, minimum=1, maximum=4), [1, 4], [0, 5, True, 2.0, "2"]),
    (lambda p, v: check_integer(p, "n", v, minimum=1), [1, 10**6], [0]),
    (lambda p, v: check_number(p, "f", v, minimum=0, below=1), [0, 0.999], [1, -0.1, float("nan"), False]),
    (lambda p, v: check_bool(p, "b", v), [True, False], [1, "true", None]),
    (lambda p, v: check_text(p, "t", v), ["x", cdk.Aws.REGION], ["", " x", "x\n", 1]),
    (lambda p, v: check_pattern(p, "p", v, re.compile(r"[a-z]+"), "letters"), ["abc"], ["abc\n", "ab1", None]),
    (lambda p, v: check_dns_label(p, "l", v), ["a", "a-1", "a" * 63], ["a" * 64, "-a", "a-", "A", "a.b", ""]),
    (lambda p, v: check_dns_label(p, "l", v, max_length=5), ["abcde"], ["abcdef"]),
    (lambda p, v: check_dns_subdomain(p, "s", v), ["a.b-c", "a" * 253], ["a" * 254, "a..b", ".a", "a_b"]),
    (lambda p, v: check_strings(p, "w", v), [[], ("a", "")], ["a b", ["a", 1], None]),
    (lambda p, v: check_strings(p, "w", v, allow_empty_items=False), [["a"]], [["a", ""]]),
    (
        lambda p, v: check_absolute_path(p, "path", v),
        ["/data", "/data/output/run-1"],
        ["/", "data", "/data/", "/a/../b", "/a//b", "/a/./b", " /data"],
    ),
    (
        lambda p, v: check_label_key(p, "k", v),
        ["app", "example.com/app", "a_b.c-d", "k8s.io/" + "n" * 63],
        ["", "a/b/c", "Example.com/app", "example.com/", "-app", "n" * 64, "/name"],
    ),
    (lambda p, v: check_label_value(p, "v", v), ["", "a", "A_b.c-D", "v" * 63], ["v" * 64, "-a", "a b", None]),
    (lambda p, v: coerce_enum(p, "a", v, Accelerator) is not None, ["neuron", Accelerator.NVIDIA], ["Neuron", None]),
]


@pytest.mark.parametrize("check,accepted,refused", CHECKS, ids=[f"check{i}" for i in range(len(CHECKS))])
def test_value_checks_accept_and_refuse_at_their_documented_bounds(check, accepted, refused):
    for value in accepted:
        problems = Problems("t")
        assert check(problems, value) is True and not problems, value
    for value in refused:
        problems = Problems("t")
        assert check(problems, value) is False, value
        (problem,) = problems
        assert f"={value!r}: " in problem, problem


def test_messages_say_what_is_allowed():
    problems = Problems("t")
    check_integer(problems, "a", 0, minimum=1, maximum=4)
    check_integer(problems, "b", 0, minimum=1)
    check_integer(problems, "c", 9, maximum=4)
    check_integer(problems, "d", "x")
    coerce_enum(problems, "e", "tpu", Accelerator)
    assert list(problems) == [
        "a=0: an integer from 1 to 4",
        "b=0: an integer of at least 1",
        "c=9: an integer of at most 4",
        "d='x': an integer",
        "e='tpu': one of 'neuron', 'nvidia', 'none' (or the Accelerator member)",
    ]
    with pytest.raises(ConfigurationError) as raised:
        check_stack_props("Stack", {"descriptoin": "x", "zzz_unknown": 1, "description": "fine"})
    nearest, unknown = raised.value.problems
    assert nearest.startswith("descriptoin='x': not a setting of this stack (did you mean 'description'?); Stack takes")
    assert unknown.startswith("zzz_unknown=1: not a setting of this stack; Stack takes ") and "env" in unknown


def test_a_stack_prop_in_another_case_or_spelling_is_refused_with_the_stacks_own_prop_it_means():
    with pytest.raises(ConfigurationError) as raised:
        check_stack_props("Stack", {"Instance_Type": "x", "nodecount": 2}, ["instance_type", "node_count"])
    assert [problem.split(";")[0] for problem in raised.value.problems] == [
        "Instance_Type='x': not a setting of this stack (did you mean 'instance_type'?)",
        "nodecount=2: not a setting of this stack (did you mean 'node_count'?)",
    ]
    assert "its props are instance_type, node_count; Stack takes " in raised.value.problems[0]


def test_near_misses_of_booleans_integers_and_enum_values_are_named():
    problems = Problems("Stack")
    check_bool(problems, "a", "True")
    check_bool(problems, "b", " false")
    check_bool(problems, "c", "yes")
    check_integer(problems, "d", "4", minimum=1, maximum=8)
    check_integer(problems, "e", 4.0, minimum=1)
    check_integer(problems, "f", "four", minimum=1)
    coerce_enum(problems, "g", "NVIDIA", Accelerator)
    assert list(problems) == [
        "a='True': true or false (did you mean True?)",
        "b=' false': true or false (did you mean False?)",
        "c='yes': true or false",
        "d='4': an integer from 1 to 8 (did you mean 4?)",
        "e=4.0: an integer of at least 1 (did you mean 4?)",
        "f='four': an integer of at least 1",
        "g='NVIDIA': one of 'neuron', 'nvidia', 'none' (or the Accelerator member) (did you mean 'nvidia'?)",
    ]


@pytest.mark.parametrize(
    "name,reason",
    [
        ("my-training-data", None),
        ("a.b.c", None),
        ("abc", None),
        ("a" * 63, None),
        ("ab", "3-63 lowercase"),
        ("a" * 64, "3-63 lowercase"),
        ("My-bucket", "3-63 lowercase"),
        ("-bucket", "3-63 lowercase"),
        ("bucket.", "3-63 lowercase"),
        ("my_bucket", "3-63 lowercase"),
        ("a..b", "no two adjacent dots"),
        ("192.168.5.4", "not formatted as an IP address"),
        ("xn--bucket", "S3 reserves 'xn--'"),
        ("sthree-bucket", "S3 reserves 'sthree-'"),
        ("amzn-s3-demo-bucket", "S3 reserves 'amzn-s3-demo-'"),
        ("bucket-s3alias", "S3 reserves '-s3alias'"),
        ("bucket--ol-s3", "S3 reserves '--ol-s3'"),
        ("bucket.mrap", "S3 reserves '.mrap'"),
        ("bucket--x-s3", "S3 reserves '--x-s3'"),
        ("bucket--table-s3", "S3 reserves '--table-s3'"),
        (42, "a bucket name (a string)"),
    ],
)
def test_bucket_names_follow_the_general_purpose_naming_rules(name, reason):
    problem = bucket_name_problem(name)
    if reason is None:
        assert problem is None
    else:
        assert problem is not None and problem.startswith(reason), problem


@pytest.mark.parametrize(
    "image",
    [
        "repo/x:1@sha256:" + "A" * 64,
        "repo/x:1@sha256:" + "a" * 63,
        "repo/x:1@md5:abc",
        "repo/x:1 ",
        "@sha256:" + "a" * 64,
    ],
)
def test_an_image_whose_digest_is_not_sha256_is_refused_with_what_is_allowed(image):
    problems = Problems("chart")
    assert not check_image_reference(problems, "image", image)
    with pytest.raises(ConfigurationError, match=r"image=.*sha256:<64 lowercase hex digits>"):
        problems.raise_if_any()


@pytest.mark.parametrize(
    "image",
    ["repo/x:1", "repo/x:1@sha256:" + "0" * 64, cdk.Token.as_string({"Ref": "Uri"})],
    ids=["tag", "digest", "token"],  # a token's text numbers the tokens made before it, which differs per worker
)
def test_an_image_by_tag_by_digest_or_a_token_is_accepted(image):
    problems = Problems("chart")
    assert check_image_reference(problems, "image", image)
    problems.raise_if_any()


@pytest.mark.parametrize(
    "value, hint",
    [
        ("TRN1.32XLARGE", " (did you mean 'trn1.32xlarge'?)"),
        (" trn1.32xlarge ", " (did you mean 'trn1.32xlarge'?)"),
        ("trn1.32xlarg", " (did you mean 'trn1.32xlarge'?)"),
        ("trn1.32xlarge", ""),
        ("x9.large", ""),
        (32, ""),
    ],
)
def test_a_refusal_names_the_nearest_valid_value_when_one_is_near(value, hint):
    assert nearest(value, ["trn1.2xlarge", "trn1.32xlarge", "trn1n.32xlarge"]) == hint


@pytest.mark.parametrize(
    "value, choices, hint",
    [
        ("node_group", ["karpenter", "node-group"], " (did you mean 'node-group'?)"),
        ("NODE GROUP", ["karpenter", "node-group"], " (did you mean 'node-group'?)"),
        ("instance_type", ["instanceType", "nodeCount"], " (did you mean 'instanceType'?)"),
        (1.36, ["1.34", "1.35", "1.36"], " (did you mean '1.36'?)"),
        (1.3, ["1.34", "1.35", "1.36"], ""),
        (True, ["true", "false"], ""),
    ],
)
def test_a_separator_variant_or_a_number_whose_text_is_a_choice_is_named(value, choices, hint):
    assert nearest(value, choices) == hint


@pytest.mark.parametrize(
    "value, hint",
    [
        ("4", " (did you mean 4?)"),
        (" 4.0 ", " (did you mean 4?)"),
        (4.0, " (did you mean 4?)"),
        ("4.5", ""),
        ("four", ""),
        (float("nan"), ""),
        (True, ""),
        (4, ""),
    ],
)
def test_a_whole_number_given_as_text_or_float_is_named_where_an_integer_goes(value, hint):
    assert whole_number_hint(value) == hint


def test_an_az_name_where_an_az_id_goes_is_told_the_id_format_and_the_command_that_lists_them():
    hint = az_name_hint("us-west-2a")
    assert "'us-west-2a' is an AZ name" in hint and "usw2-az4" in hint
    assert "aws ec2 describe-availability-zones --region us-west-2" in hint and "ZoneName,ZoneId" in hint
    assert az_name_hint("usw2-az4") == az_name_hint(None) == ""

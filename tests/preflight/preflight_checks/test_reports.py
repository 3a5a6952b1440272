"""What a run says: the failure message and the table."""

from __future__ import annotations


def test_the_failure_message_names_each_failure_and_what_to_do(checks):
    results = [
        checks.CheckResult("on-demand-vcpus/Trn", "fail", "384 of 256 vCPUs", "request 384"),
        checks.CheckResult("offering/AcceleratedNodes", "pass", "offered"),
        checks.CheckResult("kubernetes-version/1.36", "unknown", "refused", "allow eks:DescribeClusterVersions"),
    ]
    assert checks.failure_message(results) == (
        "Preflight: 1 of 3 checks failed.\n"
        "- on-demand-vcpus/Trn: 384 of 256 vCPUs. What to do: request 384\n"
        "1 check could not be made (kubernetes-version/1.36): see the preflight function's log."
    )


def test_a_long_failure_message_is_cut_with_the_count_of_lines_left_out(checks):
    results = [checks.CheckResult(f"subnet-addresses/s-{i}", "fail", "x" * 100, "y" * 50) for i in range(100)]
    text = checks.failure_message(results)
    assert len(text) <= 3500
    omitted = int(text.rsplit("… ", 1)[1].split(" ")[0])
    assert text.count("\n- ") + omitted == 100
    assert text.endswith("more lines omitted: see the preflight function's log.")


def test_the_table_has_a_row_per_check_and_the_advice_of_failures(checks):
    results = [
        checks.CheckResult("availability-zone/usw2-az4", "pass", "usw2-az4 is us-west-2d"),
        checks.CheckResult("on-demand-vcpus/Trn", "fail", "384 of 256", "request an increase"),
    ]
    lines = checks.format_table(results).splitlines()
    assert lines[0].split() == ["CHECK", "STATUS", "MESSAGE"]
    assert lines[1].split()[:2] == ["availability-zone/usw2-az4", "pass"]
    assert lines[2].split()[:2] == ["on-demand-vcpus/Trn", "fail"]
    assert lines[3].strip() == "→ request an increase"

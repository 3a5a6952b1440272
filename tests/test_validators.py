"""Real validators on real synth output: cfn-lint on every template, cdk-nag AwsSolutions on the whole app."""

import json
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest
from cdk_nag import AwsSolutionsChecks

from tests.conftest import build_default_app

VARIANTS = {
    "default": {},
    "trn1n-4-nodes-bucket-admin": {
        "instanceType": "trn1n.32xlarge",
        "nodeCount": "4",
        "dataBucketName": "my-training-data",
        "adminRoleArn": "arn:aws:iam::123456789012:role/Admin",
    },
    "trn2-us-east-2": {"instanceType": "trn2.48xlarge", "region": "us-east-2", "trainiumAzId": "use2-az3"},
    "single-trn1-2xlarge": {"instanceType": "trn1.2xlarge", "nodeCount": "1", "kubernetesVersion": "1.34"},
}
CFN_LINT_NOISE = ("W3005",)  # DependsOn that CDK emits next to a Ref/GetAtt: redundant, harmless


@pytest.mark.parametrize("context", VARIANTS.values(), ids=VARIANTS.keys())
def test_cfn_lint_finds_no_errors_or_warnings(context, tmp_path):
    app, stack = build_default_app(**context)
    assembly = app.synth()
    templates = [str(tmp_path / artifact.template_file) for artifact in assembly.stacks]
    for artifact in assembly.stacks:
        (tmp_path / artifact.template_file).write_text(json.dumps(artifact.template))
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "cfn-lint"),
            "--regions",
            stack.region,
            "--ignore-checks",
            *CFN_LINT_NOISE,
            "--",
            *templates,
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[:4000]


@pytest.mark.parametrize("context", VARIANTS.values(), ids=VARIANTS.keys())
def test_cdk_nag_aws_solutions_has_no_unacknowledged_finding(context):
    app, _ = build_default_app(**context)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    try:
        app.synth()
    except RuntimeError as error:  # jsii surfaces ValidationFailed as RuntimeError
        report = Path(app.outdir, "validation-report.json")
        pytest.fail(f"cdk-nag findings: {error}\n{report.read_text() if report.exists() else ''}")


def test_every_acknowledgement_has_a_specific_reason():
    _, stack = build_default_app(dataBucketName="my-training-data")
    acknowledged = {}
    for construct in stack.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                acknowledged.update(entry.data)
    nag = {rule: reason for rule, reason in acknowledged.items() if rule.startswith("AwsSolutions::")}
    assert len(nag) >= 10, "the stack acknowledges its cdk-nag findings in code"
    for rule, reason in nag.items():
        assert "[" in rule or rule == "AwsSolutions::AwsSolutions-L1", f"{rule}: acknowledge the finding, not the rule"
        assert len(reason) >= 80, f"{rule}: reason too short to be specific: {reason!r}"

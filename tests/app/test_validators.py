"""Real validators on real synth output: cfn-lint on every template, cdk-nag AwsSolutions on the whole app."""

import json
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest
from cdk_nag import AwsSolutionsChecks

from tests.support.apps import COMPOSER_TRAINING, KUBEFLOW_TRAINING, TRAINIUM_EKS, build_default_stack

ADMIN = "arn:aws:iam::123456789012:role/Admin"
VARIANTS = {
    "default": (TRAINIUM_EKS, {}),
    "trn1n-4-nodes-bucket-admin": (
        TRAINIUM_EKS,
        {
            "instanceType": "trn1n.32xlarge",
            "nodeCount": "4",
            "dataBucketName": "my-training-data",
            "dataBucketPrefix": "datasets/",
            "dataExportPrefix": "runs/",
            "adminRoleArn": ADMIN,
        },
    ),
    "trn2-us-east-2": (
        TRAINIUM_EKS,
        {"instanceType": "trn2.48xlarge", "region": "us-east-2", "trainiumAzId": "use2-az3"},
    ),
    "single-trn1-2xlarge": (
        TRAINIUM_EKS,
        {"instanceType": "trn1.2xlarge", "nodeCount": "1", "kubernetesVersion": "1.34"},
    ),
    "trn1-node-group": (TRAINIUM_EKS, {"provisioning": "node-group", "adminRoleArn": ADMIN}),
    "trn1-invocation-alarm-dns-alert": (TRAINIUM_EKS, {"kubectlInvocationAlarm": "true", "dnsFirewall": "alert"}),
    "kubeflow-default": (KUBEFLOW_TRAINING, {}),
    "kubeflow-2-trn1-admin": (
        KUBEFLOW_TRAINING,
        {"kubeflowAcceleratedType": "trn1.32xlarge", "kubeflowAcceleratedNodes": "2", "adminRoleArn": ADMIN},
    ),
    "kubeflow-gpu-us-east-1": (
        KUBEFLOW_TRAINING,
        {"region": "us-east-1", "kubeflowAzId": "use1-az6", "kubeflowAcceleratedType": "g5.12xlarge"},
    ),
    "composer-default": (COMPOSER_TRAINING, {}),
    "composer-node-group-idle-30": (COMPOSER_TRAINING, {"provisioning": "node-group"}),
    "composer-2-p5-us-east-1": (
        COMPOSER_TRAINING,
        {
            "region": "us-east-1",
            "composerAzId": "use1-az6",
            "composerInstanceType": "p5.48xlarge",
            "composerNodeCount": "2",
        },
    ),
}
RULES_WITHOUT_FINDING_IDS = (
    "AwsSolutions::AwsSolutions-L1",
    "AwsSolutions::AwsSolutions-S1",
    "AwsSolutions::AwsSolutions-SQS3",
)
"""Rules whose findings carry no finding id (one finding per resource): acknowledged on the one resource."""
CFN_LINT_NOISE = ("W3005",)  # DependsOn that CDK emits next to a Ref/GetAtt: redundant, harmless


@pytest.mark.parametrize("name, context", VARIANTS.values(), ids=VARIANTS.keys())
def test_cfn_lint_finds_no_errors_or_warnings(name, context, tmp_path):
    app, stack = build_default_stack(name, **context)
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


@pytest.mark.parametrize("name, context", VARIANTS.values(), ids=VARIANTS.keys())
def test_cdk_nag_aws_solutions_has_no_unacknowledged_finding(name, context):
    app, _ = build_default_stack(name, **context)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    try:
        app.synth()
    except RuntimeError as error:  # jsii surfaces ValidationFailed as RuntimeError
        report = Path(app.outdir, "validation-report.json")
        pytest.fail(f"cdk-nag findings: {error}\n{report.read_text() if report.exists() else ''}")


@pytest.mark.parametrize("name", [TRAINIUM_EKS, KUBEFLOW_TRAINING, COMPOSER_TRAINING])
def test_every_acknowledgement_has_a_specific_reason(name):
    context = {"dataBucketName": "my-training-data"} if name == TRAINIUM_EKS else {}
    _, stack = build_default_stack(name, **context)
    acknowledged = {}
    for construct in stack.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                acknowledged.update(entry.data)
    nag = {rule: reason for rule, reason in acknowledged.items() if rule.startswith("AwsSolutions::")}
    assert len(nag) >= 10, "the stack acknowledges its cdk-nag findings in code"
    for rule, reason in nag.items():
        assert "[" in rule or rule in RULES_WITHOUT_FINDING_IDS, f"{rule}: acknowledge the finding, not the rule"
        assert len(reason) >= 80, f"{rule}: reason too short to be specific: {reason!r}"

"""The README's main job, run for real: the CDK CLI synthesizes app.py offline with -c overrides."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.apps import REPO

CDK = REPO / "node_modules" / ".bin" / "cdk"

pytestmark = pytest.mark.skipif(not CDK.exists(), reason="the CDK CLI is installed by `make install` (npm ci)")


def cdk_synth(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "AWS_EC2_METADATA_DISABLED": "true",
        "CDK_DISABLE_CLI_TELEMETRY": "true",
        "AWS_ACCESS_KEY_ID": "",
        "AWS_SECRET_ACCESS_KEY": "",
        "AWS_PROFILE": "",
    }
    return subprocess.run(
        [str(CDK), "synth", "--quiet", "--output", str(tmp_path / "cdk.out"), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_cli_synth_applies_context_overrides_without_credentials(tmp_path):
    result = cdk_synth(tmp_path, "-c", "instanceType=trn1n.32xlarge", "-c", "nodeCount=4")
    assert result.returncode == 0, result.stderr[-3000:]
    template = json.loads((tmp_path / "cdk.out" / "TrainiumEks.template.json").read_text())
    launch_templates = [
        r["Properties"]["LaunchTemplateData"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::EC2::LaunchTemplate" and "NetworkInterfaces" in r["Properties"]["LaunchTemplateData"]
    ]
    (data,) = launch_templates
    assert data["InstanceType"] == "trn1n.32xlarge" and len(data["NetworkInterfaces"]) == 16
    scaling = [
        r["Properties"]["ScalingConfig"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::EKS::Nodegroup" and r["Properties"]["AmiType"] == "AL2023_x86_64_NEURON"
    ]
    assert scaling == [{"MinSize": 4, "DesiredSize": 4, "MaxSize": 4}]
    assert not (REPO / "cdk.context.json").exists(), "synth made no context lookup"


def test_cli_synth_reports_bad_settings_in_one_message(tmp_path):
    result = cdk_synth(tmp_path, "-c", "nodeCount=0", "-c", "lustreStorageGiB=1000")
    assert result.returncode != 0
    assert "TrainiumEks: 2 configuration problems" in result.stderr
    assert "nodeCount=0" in result.stderr and "lustreStorageGiB=1000" in result.stderr
    assert "Traceback" not in result.stderr

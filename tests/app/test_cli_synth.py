"""The README's main job, run for real: the CDK CLI synthesizes app.py offline with -c overrides."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Dict, Optional

import pytest

from tests.support.apps import REPO
from tests.support.documentation import page

CDK = REPO / "node_modules" / ".bin" / "cdk"

pytestmark = pytest.mark.skipif(not CDK.exists(), reason="the CDK CLI is installed by `make install` (npm ci)")


def cdk_synth(tmp_path: Path, *args: str, cwd: Optional[Path] = None) -> subprocess.CompletedProcess:
    """``cdk synth`` of the app in ``cwd`` (default: this checkout) into ``tmp_path/cdk.out``, as a shell that never
    activated the venv runs it: cdk.json's launcher runs ``.venv/bin/python -O app.py`` itself."""
    env = {
        **os.environ,
        "PATH": os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if ".venv" not in p),
        "AWS_EC2_METADATA_DISABLED": "true",
        "CDK_DISABLE_CLI_TELEMETRY": "true",
        "AWS_ACCESS_KEY_ID": "",
        "AWS_SECRET_ACCESS_KEY": "",
        "AWS_PROFILE": "",
    }
    return subprocess.run(
        [str(CDK), "synth", "--quiet", "--output", str(tmp_path / "cdk.out"), *args],
        cwd=cwd or REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_cli_synth_applies_context_overrides_without_credentials(tmp_path):
    result = cdk_synth(
        tmp_path, "-c", "instanceType=trn1n.32xlarge", "-c", "nodeCount=4", "-c", "provisioning=node-group"
    )
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


def tracked_copy(destination: Path) -> Path:
    """The files git tracks, copied to ``destination``: a second checkout of the same commit at another path, with this
    checkout's virtual environment as its ``.venv`` (cdk.json's launcher runs ``.venv/bin/python -O app.py``)."""
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    for name in files:
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target)
    (destination / ".venv").symlink_to(REPO / ".venv")
    return destination


def assembly(root: Path) -> Dict[str, bytes]:
    """Every file of a cloud assembly by its path inside it."""
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


@pytest.mark.skipif(shutil.which("git") is None, reason="git lists the tracked files")
def test_two_synths_from_two_checkouts_give_a_byte_identical_cloud_assembly(tmp_path):
    """The second synth also runs the app without ``-O`` (jsii's type checks on): cdk.json's ``-O`` changes no byte."""
    first = cdk_synth(tmp_path / "first")
    assert first.returncode == 0, first.stderr[-3000:]
    assert json.loads((REPO / "cdk.json").read_text())["app"] == "sh scripts/cdk_app.sh"
    checkout = tracked_copy(tmp_path / "elsewhere" / "trainium-eks")
    second = cdk_synth(tmp_path / "second", "--app", ".venv/bin/python app.py", cwd=checkout)
    assert second.returncode == 0, second.stderr[-3000:]
    one, other = assembly(tmp_path / "first" / "cdk.out"), assembly(tmp_path / "second" / "cdk.out")
    assert sorted(one) == sorted(other)
    differing = [name for name in one if one[name] != other[name]]
    assert differing == [], f"files that differ between the two synths: {differing[:10]}"
    assert not any(b"jsii-kernel-" in content for content in one.values()), "no temporary path in the assembly"


TEMPLATE_FIGURES = re.compile(r"(TrainiumEks|KubeflowTraining|ComposerTraining) ([0-9]+) (?:resources )?\(([0-9,]+)")
"""The template figures of docs/benchmark.md: ``<stack> <resources> resources (<bytes> bytes)``."""


def test_the_readmes_template_figures_are_what_synth_writes_today(tmp_path):
    result = cdk_synth(tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    figures = TEMPLATE_FIGURES.findall(page("benchmark.md"))
    quoted = {stack: (int(count), int(size.replace(",", ""))) for stack, count, size in figures}
    actual = {}
    for stack in quoted:
        path = tmp_path / "cdk.out" / f"{stack}.template.json"
        actual[stack] = (len(json.loads(path.read_text())["Resources"]), path.stat().st_size)
    assert len(quoted) == 3 and quoted == actual, "update the figures of docs/benchmark.md (make bench prints them)"


def test_a_stack_built_alone_is_the_same_bytes_as_in_the_whole_app(tmp_path):
    """``make deploy STACK=...`` (and diff, destroy) builds that stack alone (``-c stacks``): what it deploys is what
    ``make synth`` shows."""
    whole = cdk_synth(tmp_path / "whole")
    assert whole.returncode == 0, whole.stderr[-3000:]
    alone = cdk_synth(tmp_path / "alone", "-c", "stacks=KubeflowTraining")
    assert alone.returncode == 0, alone.stderr[-3000:]
    name = "KubeflowTraining.template.json"
    assert (tmp_path / "alone" / "cdk.out" / name).read_bytes() == (tmp_path / "whole" / "cdk.out" / name).read_bytes()
    assert not (tmp_path / "alone" / "cdk.out" / "TrainiumEks.template.json").exists()
    command = ["make", "-n", "deploy", "STACK=KubeflowTraining"]
    recipe = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert "deploy KubeflowTraining -c stacks=KubeflowTraining" in recipe.stdout, recipe.stdout[-2000:]

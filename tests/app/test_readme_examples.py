"""Every Python example of the README and of the topic pages of docs/ is a whole program that runs and synthesizes its
app, offline, from the checkout (as a user runs it there: ``images/`` is relative to it); and each of its stacks is
destroyed, as CloudFormation deletes in waves, without a delete losing what it needs (the rehearsal's order promise,
:mod:`rehearsal.delete_needs`)."""

import json
import os
import re
import subprocess
import sys

import pytest

from rehearsal.intrinsics import StackIdentity
from rehearsal.promises import order_respects_needs
from tests.support.apps import CDK_JSON_CONTEXT, REPO
from tests.support.destroy import scenario_result
from tests.support.documentation import pages

BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
EXAMPLES = [example for path in pages() for example in BLOCK.findall(path.read_text())]


def test_the_readme_has_its_examples():
    assert len(EXAMPLES) >= 5
    assert BLOCK.findall(pages()[0].read_text()), "the README shows one composed example"


@pytest.mark.parametrize("source", EXAMPLES, ids=[f"example-{n}" for n in range(1, len(EXAMPLES) + 1)])
def test_a_readme_example_runs_and_synthesizes(source, tmp_path):
    assert "app.synth()" in source, "an example ends by synthesizing its app"
    program = tmp_path / "example.py"
    program.write_text(source)
    context = {**CDK_JSON_CONTEXT, "aws:cdk:disable-asset-staging": True}
    env = {
        **os.environ,
        "CDK_OUTDIR": str(tmp_path / "cdk.out"),
        "CDK_CONTEXT_JSON": json.dumps(context),
        "AWS_EC2_METADATA_DISABLED": "true",
        "PYTHONPATH": str(REPO),
    }
    result = subprocess.run([sys.executable, str(program)], cwd=REPO, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    templates = sorted((tmp_path / "cdk.out").glob("*.template.json"))
    assert templates, "the example's app wrote its templates"
    regions = {
        artifact.get("displayName", name): artifact["environment"].rsplit("/", 1)[1]
        for name, artifact in json.loads((tmp_path / "cdk.out" / "manifest.json").read_text())["artifacts"].items()
        if artifact.get("type") == "aws:cloudformation:stack"
    }
    for path in templates:
        stack = path.name.removesuffix(".template.json")
        region = regions.get(stack, "us-west-2")
        region = region if region != "unknown-region" else "us-west-2"
        destroyed = scenario_result(json.loads(path.read_text()), None, StackIdentity(stack, region))
        assert order_respects_needs(destroyed) == [], f"cdk destroy of {stack}"

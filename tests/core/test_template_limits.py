"""CloudFormation's limits and the deploy's critical path, whatever the node count."""

import json
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest

from tests.support.apps import REPO, SHARED, build_default_app, new_app
from trainium_eks.core.template_limits import TEMPLATE_SIZE_LIMIT, TemplateSizeCheck, check_template_sizes

DEPLOY_PATH = REPO / "scripts" / "deploy_path.py"
STEERING_MODEL = SHARED / "tools" / "deploy_model.py"
CRITICAL_PATH_TARGET_MINUTES = 26.1
"""The modeled critical path of the seed stack (26.1 min): the preflight (its log group, role, function and custom
resource, 2.0 min: first in the deploy, nothing before it, by design), KMS key, cluster, the VPC CNI's Pod Identity
role and add-on before the system nodes (1.6 min: the CNI's credentials no longer come from the node role, and the
nodes are not Ready without it), the node role, the system node group, Volcano, the wait for its admission webhooks
to serve (a Queue created before is denied: tests/e2e/test_deploy.py), its queue, the wait for the queue to be
opened (Volcano's job webhook denies a job before), the jobs' releases. Volcano waits for the system nodes in
CloudFormation, because its pre-install hook Job runs there and Helm gives that hook and the wait the whole --timeout
each (docs/deploy-behaviour.md). The deploy issue asks for 18; nothing else may lengthen the path meanwhile."""


DEFAULT_APP_BUDGET_BYTES = 310_000
"""The most the default app's largest template (TrainiumEks) may take of CloudFormation's 1,000,000 bytes: 31 %,
the rest for what users add to it. It was a quarter until the fabric check learned to bisect and its release to taint
suspect nodes (265 KB then): the two programs its pods run from ConfigMaps are 65 KB of it, code only
(``mounted_program.program_source``); compressing them would make the template depend on the machine's zlib build
(zlib-ng writes other bytes), and users' snapshot tests with it. It was 300 KB until strict network policy mode
(2026-12-07: 300.9 KB) added five resources (kube-system's, amazon-cloudwatch's and volcano-system's allow-all
policies, the two namespaces created before their pods), and 305 KB until each held job got a peers policy of its own
(2026-12-07: 308.3 KB): the release program creates it (the ConfigMap's code grew) and an admission policy limits the
release account to that shape (its policy and binding, two resources)."""


def template_bytes(app) -> int:
    assembly = app.synth()
    return Path(assembly.directory, "TrainiumEks.template.json").stat().st_size


def test_template_bytes_do_not_grow_with_the_node_count():
    two = template_bytes(build_default_app(nodeCount="2")[0])
    many = template_bytes(build_default_app(nodeCount="450")[0])
    assert many - two < 100, (two, many)
    assert many <= DEFAULT_APP_BUDGET_BYTES, f"{many} bytes: keep the default app within its budget"


def test_a_template_over_the_limit_is_a_synth_error_that_says_why():
    app = new_app()
    stack = cdk.Stack(app, "Big")
    check_template_sizes(stack)
    check_template_sizes(stack)  # registered once, whoever asks
    cdk.CfnResource(stack, "Blob", type="Custom::Blob", properties={"Data": "x" * TEMPLATE_SIZE_LIMIT})
    with pytest.raises(RuntimeError) as raised:
        app.synth()
    report = Path(app.outdir, "validation-report.json").read_text()
    assert "trainium-eks-template-size" in report and "Big.template.json" in report and "1,000,000" in report
    assert "Validation failed" in str(raised.value) or "validation" in str(raised.value).lower()


def test_the_default_stack_registers_the_size_check():
    app, _ = build_default_app()
    plugins = [child for child in app.node.children if child.node.id == "TrainiumEksTemplateSizeCheck"]
    assert len(plugins) == 1
    assert TemplateSizeCheck().rule_ids == ["trainium-eks-template-size"]


def test_the_modeled_deploy_critical_path_is_at_most_its_target(tmp_path):
    app, _ = build_default_app()
    assembly = app.synth()
    out = tmp_path / "cdk.out"
    out.mkdir()
    for artifact in assembly.stacks:
        (out / artifact.template_file).write_text(json.dumps(artifact.template))
    result = subprocess.run([sys.executable, str(DEPLOY_PATH), str(out)], capture_output=True, text=True, check=True)
    minutes = float(result.stdout.split("critical path ")[1].split(" min")[0])
    assert minutes <= CRITICAL_PATH_TARGET_MINUTES, result.stdout
    path = result.stdout.split("\n")[1:]
    on_path = [line.split()[-1] for line in path if line.strip()]
    assert any(name.startswith("ClusterSystemNodegroup") for name in on_path), "the system nodes, then Volcano"
    assert not any(name.startswith("AcceleratedNodes") for name in on_path), "jobs never wait for training nodes"
    preflight = [index for index, name in enumerate(on_path) if name.startswith("Preflight")]
    assert preflight and preflight == list(range(len(preflight))), "the preflight comes first"
    if STEERING_MODEL.exists():
        steering = subprocess.run([sys.executable, str(STEERING_MODEL), str(out)], capture_output=True, text=True)
        assert f"critical path {minutes:.1f} min" in steering.stdout, "the project's model agrees with the steering one"

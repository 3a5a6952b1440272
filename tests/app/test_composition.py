"""The constructs compose the way CDK users write apps: split stacks, imported clusters, their own jobs."""

import json

import aws_cdk as cdk
import pytest

from tests.support.apps import new_app
from tests.support.clusters import ENV, imported_cluster
from trainium_eks.constructs.cluster import TrainingCluster
from trainium_eks.constructs.cluster_addons import ClusterAddons
from trainium_eks.constructs.job_sequence import JobSequence
from trainium_eks.constructs.lustre_storage import LustreStorage
from trainium_eks.constructs.network import TrainingNetwork
from trainium_eks.constructs.training_node_group import TrainingNodeGroup
from trainium_eks.constructs.training_pod_identity import TrainingPodIdentity
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.manifests.jobs.volcano_job import VolcanoJobChart


def cluster_stack(app):
    stack = cdk.Stack(app, "Cluster", env=ENV)
    network = TrainingNetwork(stack, "Network", node_az_id="usw2-az4")
    cluster = TrainingCluster(stack, "Cluster", vpc=network.vpc, admin_role_arn="arn:aws:iam::123456789012:role/Admin")
    return stack, network, cluster


def workload(stack, network, cluster, storage=None):
    nodes = TrainingNodeGroup(
        stack,
        "Nodes",
        cluster=cluster.cluster,
        subnet=network.node_subnet,
        availability_zone_id=network.node_az_id,
        node_role=cluster.node_role,
    )
    if storage is None:
        storage = LustreStorage(stack, "Storage", vpc=network.vpc, subnet=network.node_subnet)
    storage.allow_clients(nodes.security_group, cluster.cluster.cluster_security_group)
    identity = TrainingPodIdentity(stack, "Identity", cluster=cluster.cluster)
    addons = ClusterAddons(stack, "Addons", cluster=cluster.cluster, volume=storage.volume_source)
    nodes.add_shared_volume(addons.volume_chart.claim_name)
    jobs = JobSequence(stack, "Jobs", cluster=cluster.cluster, prerequisites=addons.job_prerequisites)
    jobs.add(
        "Train",
        VolcanoJobChart(
            name="train",
            image="example.com/train:1",
            node_group=nodes.topology,
            script="/opt/train.py",
            namespace=identity.namespace,
            resolve=jobs.resolve,
        ),
    )
    return nodes, storage


def synth(app):
    """Stack name -> (template, the names of the stacks it depends on)."""
    stacks = app.synth().stacks
    names = {artifact.stack_name for artifact in stacks}
    return {a.stack_name: (a.template, {d.id for d in a.dependencies} & names) for a in stacks}


def ingress_rules(template, port=None):
    """The stand-alone ingress rules of a template (on ``port``: the library's Lustre client rules on that port)."""
    return [
        r
        for r in template["Resources"].values()
        if r["Type"] == "AWS::EC2::SecurityGroupIngress"
        and (port is None or (r["Properties"].get("FromPort") == port and "Lustre" in r["Properties"]["Description"]))
    ]


def test_cluster_stack_first_and_everything_else_in_a_second_stack():
    app = new_app()
    stack, network, cluster = cluster_stack(app)
    workload(cdk.Stack(app, "Workload", env=ENV), network, cluster)
    found = synth(app)
    assert found["Cluster"][1] == set(), "the cluster stack depends on nothing of the workload stack"
    assert found["Workload"][1] == {"Cluster"}
    cluster_rules = [r for r in ingress_rules(found["Workload"][0]) if "Cluster" in json.dumps(r["Properties"])]
    assert len(cluster_rules) >= 4, "the rules tying the two stacks live in the dependent (workload) stack"


def test_storage_in_the_cluster_stack_and_node_groups_in_a_later_stack():
    """The storage's client rules are made from the later stack's code, for groups of both stacks: they land there."""
    app = new_app()
    stack, network, cluster = cluster_stack(app)
    storage = LustreStorage(stack, "Storage", vpc=network.vpc, subnet=network.node_subnet)
    workload(cdk.Stack(app, "Nodes", env=ENV), network, cluster, storage=storage)
    found = synth(app)
    assert found["Cluster"][1] == set() and found["Nodes"][1] == {"Cluster"}
    assert len(ingress_rules(found["Nodes"][0], 988)) == 2, "file system <-> node group, both ways, in the later stack"
    assert len(ingress_rules(found["Cluster"][0], 988)) == 2, "file system <-> cluster group: both in the first stack"


def test_three_stacks_network_and_cluster_storage_node_groups():
    app = new_app()
    _, network, cluster = cluster_stack(app)
    storage_stack = cdk.Stack(app, "Storage", env=ENV)
    storage = LustreStorage(storage_stack, "Storage", vpc=network.vpc, subnet=network.node_subnet)
    workload(cdk.Stack(app, "Training", env=ENV), network, cluster, storage=storage)
    found = synth(app)
    assert found["Cluster"][1] == set()
    assert found["Storage"][1] == {"Cluster"}
    assert found["Training"][1] == {"Cluster", "Storage"}


def test_an_imported_cluster_takes_node_groups_add_ons_and_jobs():
    app = new_app()
    stack = cdk.Stack(app, "OnExisting", env=ENV)
    network, cluster = imported_cluster(stack)
    nodes = TrainingNodeGroup(stack, "Nodes", cluster=cluster, subnet=network.node_subnet)
    storage = LustreStorage(stack, "Storage", vpc=network.vpc, subnet=network.node_subnet)
    storage.allow_clients(nodes.security_group, cluster.cluster_security_group)
    addons = ClusterAddons(stack, "Addons", cluster=cluster, volume=storage.volume_source)
    nodes.add_shared_volume(addons.volume_chart.claim_name)
    jobs = JobSequence(stack, "Jobs", cluster=cluster, prerequisites=addons.job_prerequisites)
    jobs.add(
        "Train",
        VolcanoJobChart(name="train", image="example.com/t:1", node_group=nodes.topology, script="/opt/t.py"),
    )
    template = synth(app)["OnExisting"][0]
    tokens = {
        r["Properties"]["ServiceToken"]
        for r in template["Resources"].values()
        if "ServiceToken" in r.get("Properties", {})
    }
    assert tokens == {"arn:aws:lambda:us-west-2:123456789012:function:kubectl-provider"}
    assert not any(r["Type"] == "AWS::EKS::Cluster" for r in template["Resources"].values())


@pytest.mark.parametrize(
    "missing,construct",
    [("kubectl_provider", "addons"), ("vpc", "nodes"), ("cluster_security_group_id", "nodes")],
)
def test_an_imported_cluster_without_a_needed_attribute_is_refused_saying_which(missing, construct):
    stack = cdk.Stack(new_app(), "OnExisting", env=ENV)
    network, cluster = imported_cluster(stack, **{missing: None})
    with pytest.raises(ConfigurationError) as raised:
        if construct == "nodes":
            TrainingNodeGroup(stack, "Nodes", cluster=cluster, subnet=network.node_subnet)
        else:
            ClusterAddons(stack, "Addons", cluster=cluster, volume=_volume())
    (problem,) = raised.value.problems
    attribute = {"cluster_security_group_id": "cluster_security_group"}.get(missing, missing)
    assert f"a cluster with {attribute}" in problem and "from_cluster_attributes" in problem


def _volume():
    from trainium_eks.core.conventions import LustreVolumeSource

    return LustreVolumeSource("fs-0123456789abcdef0", "fs.example", "abcdefgh", 1200)


def test_running_app_py_directly_uses_the_venvs_node(tmp_path):
    """`.venv/bin/python app.py` (IDEs, a custom `app` command) starts jsii on Node 24 from PyPI, not the machine's."""
    import subprocess
    import sys

    from tests.support.apps import REPO

    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "CDK_OUTDIR": str(tmp_path / "out")}
    script = "import os; import aws_cdk; print(os.environ.get('JSII_NODE', ''))"
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr[-2000:]
    node = result.stdout.strip().splitlines()[-1]
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout
    assert version.startswith("v24."), (node, version)
    assert "end-of-life" not in result.stderr

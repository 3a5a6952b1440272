"""What a destroy needs, as dependencies of what needs it: CloudFormation deletes a resource only once everything that
depends on it (DependsOn, Ref, GetAtt) is gone, and deletes in parallel whatever has no dependents left; so a need
that is not a dependency can be deleted first (AWS CloudFormation user guide, "DependsOn attribute": "resources are
deleted in the reverse order of their creation", which only dependencies fix).

- The kubectl provider's functions reach EKS, Lambda and S3 through the private subnets' routes to the NAT gateways and
  the S3 gateway endpoint: every Kubernetes object and Helm release the stack deletes goes while they stand.
- Karpenter's controller keeps its IAM policy until its release, and so its NodePools and EC2NodeClasses (whose
  finalizers terminate instances and delete instance profiles), are gone.
- A retained resource keeps what it holds in AWS: the subnets, security groups and VPC it references are retained
  too (an FSx for Lustre file system's network interfaces stay in them).
"""

from typing import Dict, Set

import pytest

from rehearsal.cfn_changes import dependencies
from rehearsal.delete_needs import HELD_TYPES, is_network_path
from tests.support.apps import COMPOSER_TRAINING, KUBEFLOW_TRAINING, TRAINIUM_EKS, stack_template

VARIANTS = [
    (stack, context)
    for stack in (TRAINIUM_EKS, KUBEFLOW_TRAINING, COMPOSER_TRAINING)
    for context in ({}, {"provisioning": "node-group"})
]
IDS = [f"{stack}-{context.get('provisioning', 'karpenter')}" for stack, context in VARIANTS]


def resources(stack: str, context: Dict[str, str]) -> Dict[str, Dict]:
    return stack_template(stack, **context).to_json()["Resources"]


def reach(template: Dict[str, Dict]) -> Dict[str, Set[str]]:
    """Logical id -> everything it depends on, directly or not."""
    graph = dependencies({"Resources": template}, set(template))
    closed: Dict[str, Set[str]] = {}

    def walk(name: str) -> Set[str]:
        if name not in closed:
            closed[name] = set()
            for dep in graph[name]:
                closed[name] |= {dep} | walk(dep)
        return closed[name]

    for name in graph:
        walk(name)
    return closed


@pytest.mark.parametrize("stack, context", VARIANTS, ids=IDS)
def test_every_kubernetes_object_is_deleted_while_the_kubectl_handler_still_has_its_network(stack, context):
    template = resources(stack, context)
    path = {name for name, resource in template.items() if is_network_path(name, resource["Type"])}
    assert len(path) >= 10, sorted(path)
    reached = reach(template)
    kubernetes = [name for name, resource in template.items() if resource["Type"].startswith("Custom::AWSCDK-EKS-")]
    assert len(kubernetes) > 20
    for name in kubernetes:
        missing = sorted(path - reached[name])
        assert not missing, f"{name} can be deleted after {missing}"


@pytest.mark.parametrize("stack, context", VARIANTS[::2], ids=IDS[::2])
def test_karpenter_keeps_its_policy_until_its_node_pools_and_classes_are_gone(stack, context):
    template = resources(stack, context)
    (policy,) = [name for name in template if name.startswith("KarpenterControllerRoleDefaultPolicy")]
    reached = reach(template)
    (release,) = [
        name
        for name, r in template.items()
        if r["Type"] == "Custom::AWSCDK-EKS-HelmChart" and name.startswith("KarpenterRelease")
    ]
    assert policy in reached[release]
    pools = [
        name
        for name in template
        if "NodePool" in name and template[name]["Type"] == "Custom::AWSCDK-EKS-KubernetesResource"
    ]
    assert len(pools) >= 2, pools
    for name in pools:
        assert policy in reached[name], name


@pytest.mark.parametrize("stack, context", VARIANTS, ids=IDS)
def test_a_retained_resource_keeps_the_subnets_security_groups_and_vpc_it_holds(stack, context):
    template = resources(stack, context)
    graph = dependencies({"Resources": template}, set(template))
    retained = {name for name, resource in template.items() if resource.get("DeletionPolicy") == "Retain"}
    holders = [name for name in retained if template[name]["Type"] in ("AWS::FSx::FileSystem", *HELD_TYPES)]
    for name in holders:
        held = {dep for dep in graph[name] if template[dep]["Type"] in HELD_TYPES}
        assert held <= retained, f"{name} holds {sorted(held - retained)}, which a destroy would try to delete"


def test_trainium_eks_keeps_its_file_systems_network_and_deletes_the_rest_of_it():
    template = resources(TRAINIUM_EKS, {})
    kept = sorted(
        resource["Type"]
        for resource in template.values()
        if resource["Type"].startswith("AWS::EC2::") and resource.get("DeletionPolicy") == "Retain"
    )
    assert kept == [
        "AWS::EC2::SecurityGroup",
        "AWS::EC2::SecurityGroupIngress",
        "AWS::EC2::Subnet",
        "AWS::EC2::VPC",
    ], "the storage group with its own rule (TCP 988-1023, its servers), the node subnet, the VPC; no route, no NAT"

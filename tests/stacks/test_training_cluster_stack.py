"""Facts that must live in one place stay in one place: what cdk.json and the documentation repeat matches the
modules."""

import json

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template

from tests.support.apps import CDK_JSON_CONTEXT, build_default_stack, resources_of, stack_template
from tests.support.clusters import ENV
from tests.support.documentation import all_text, page
from trainium_eks.constructs.lustre_storage import DEFAULT_STORAGE_CAPACITY_GIB
from trainium_eks.constructs.training_node_group import DEFAULT_INSTANCE_TYPE, DEFAULT_NODE_COUNT
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.facts import versions
from trainium_eks.facts.regions import NODE_AZ_ID_BY_REGION
from trainium_eks.stacks import composer_training_stack as composer_stack
from trainium_eks.stacks import kubeflow_training_stack as kubeflow_stack
from trainium_eks.stacks.composer_training_stack import ComposerTrainingStack
from trainium_eks.stacks.training_cluster_stack import DEFAULT_AZ_ID

DOCUMENTATION = all_text()
"""The README and the topic pages: each fact is stated once, in the page of its topic."""


def test_cdk_json_defaults_are_the_library_defaults():
    assert CDK_JSON_CONTEXT["instanceType"] == DEFAULT_INSTANCE_TYPE
    assert CDK_JSON_CONTEXT["nodeCount"] == DEFAULT_NODE_COUNT
    # Empty AZ keys take the region's Trainium AZ, which in cdk.json's region is the library's default.
    assert [CDK_JSON_CONTEXT[key] for key in ("trainiumAzId", "kubeflowAzId", "composerAzId")] == ["", "", ""]
    assert NODE_AZ_ID_BY_REGION[CDK_JSON_CONTEXT["region"]] == DEFAULT_AZ_ID
    assert CDK_JSON_CONTEXT["kubernetesVersion"] == versions.DEFAULT_KUBERNETES_VERSION
    assert CDK_JSON_CONTEXT["lustreStorageGiB"] == DEFAULT_STORAGE_CAPACITY_GIB
    assert CDK_JSON_CONTEXT["kubeflowCpuNodes"] == kubeflow_stack.DEFAULT_CPU_NODE_COUNT
    assert CDK_JSON_CONTEXT["kubeflowAcceleratedType"] == ""  # no accelerated group by default
    assert CDK_JSON_CONTEXT["kubeflowAcceleratedNodes"] == kubeflow_stack.DEFAULT_ACCELERATED_NODE_COUNT
    assert CDK_JSON_CONTEXT["composerInstanceType"] == composer_stack.DEFAULT_INSTANCE_TYPE
    assert CDK_JSON_CONTEXT["composerNodeCount"] == composer_stack.DEFAULT_NODE_COUNT
    assert CDK_JSON_CONTEXT["stacks"] == ""  # every stack


@pytest.mark.parametrize(
    "pin",
    [versions.NEURON_DEVICE_PLUGIN, versions.EFA_DEVICE_PLUGIN, versions.ETCD, versions.TENSORBOARD],
    ids=lambda pin: pin.repository,
)
def test_readme_states_the_pinned_image_tags(pin):
    assert f"{pin.repository.removeprefix('docker.io/')}:{pin.tag}" in DOCUMENTATION


def test_readme_states_the_pinned_volcano_chart_and_kubernetes_version():
    assert f"chart {versions.VOLCANO.version}" in DOCUMENTATION
    assert f"Kubernetes {versions.DEFAULT_KUBERNETES_VERSION}" in DOCUMENTATION
    *older, newest = versions.KUBERNETES_VERSIONS
    assert f"{', '.join(older)} or {newest}" in DOCUMENTATION


def test_readme_lists_every_setting_of_the_default_app():
    from trainium_eks.stacks.app_context import KNOWN_KEYS

    for key in KNOWN_KEYS:
        assert f"| `{key}` |" in page("settings.md"), key


@pytest.mark.parametrize(
    "pin", [versions.NVIDIA_DEVICE_PLUGIN, versions.PYTORCH_RUNTIME], ids=lambda pin: pin.repository
)
def test_readme_states_the_images_of_the_new_stacks(pin):
    assert f"{pin.repository.removeprefix('docker.io/')}:{pin.tag}" in DOCUMENTATION


def test_readme_states_the_kubeflow_trainer_chart_and_the_stack_defaults():
    assert f"`{versions.KUBEFLOW_TRAINER.repository}` {versions.KUBEFLOW_TRAINER.version}" in DOCUMENTATION
    assert f"{kubeflow_stack.DEFAULT_CPU_NODE_COUNT} × {kubeflow_stack.DEFAULT_CPU_INSTANCE_TYPE}" in DOCUMENTATION
    assert f"{composer_stack.DEFAULT_NODE_COUNT} × {composer_stack.DEFAULT_INSTANCE_TYPE}" in DOCUMENTATION


# --- Issue 17: each stack's endpoint is private unless something in it needs a public one ------------------------


def endpoint_of(template):
    (cluster,) = resources_of(template, "AWS::EKS::Cluster").values()
    config = cluster["Properties"]["ResourcesVpcConfig"]
    return config["EndpointPublicAccess"], config["EndpointPrivateAccess"], config.get("PublicAccessCidrs")


def warnings_of(stack, code):
    return [entry.data for entry in stack.node.metadata if entry.type == "aws:cdk:warning" and code in str(entry.data)]


@pytest.mark.parametrize("name", ["TrainiumEks", "ComposerTraining"])
def test_a_stack_that_needs_no_public_endpoint_is_private_by_default(name):
    assert endpoint_of(stack_template(name)) == (False, True, None)


def test_the_hybrid_workflow_stack_is_public_to_all_by_default_and_says_why():
    assert endpoint_of(stack_template("KubeflowTraining")) == (True, True, ["0.0.0.0/0"])
    _, stack = build_default_stack("KubeflowTraining")
    (warning,) = warnings_of(stack, "trainium-eks:publicEndpointOpen")
    assert "publicEndpointCidrs" in warning and "eks:call" in warning and "connect-eks.html" in warning


@pytest.mark.parametrize("name", ["TrainiumEks", "KubeflowTraining", "ComposerTraining"])
def test_public_endpoint_cidrs_restrict_the_public_endpoint_of_every_stack(name):
    template = stack_template(name, publicEndpointCidrs="203.0.113.0/24, 198.51.100.7/32")
    assert endpoint_of(template) == (True, True, ["203.0.113.0/24", "198.51.100.7/32"])


def test_an_explicit_open_endpoint_is_a_choice_without_the_warning():
    _, stack = build_default_stack("KubeflowTraining", publicEndpointCidrs="0.0.0.0/0")
    assert warnings_of(stack, "trainium-eks:publicEndpointOpen") == []


def test_a_bad_public_endpoint_cidr_of_the_context_is_one_clear_message():
    with pytest.raises(ConfigurationError) as error:
        build_default_stack("TrainiumEks", publicEndpointCidrs="203.0.113.0/24,10.0.0.1/8,my-laptop")
    (problem,) = [p for p in error.value.problems if p.startswith("publicEndpointCidrs=")]
    assert "'10.0.0.1/8': host bits set (the block is 10.0.0.0/8)" in problem
    assert "'my-laptop': not an IPv4 CIDR block" in problem and "checkip.amazonaws.com" in problem


@pytest.mark.parametrize("name", ["TrainiumEks", "KubeflowTraining", "ComposerTraining"])
def test_every_stack_of_its_own_network_has_a_dns_firewall_that_blocks_unless_set_otherwise(name):
    rules = resources_of(stack_template(name), "AWS::Route53Resolver::FirewallRuleGroup")
    (group,) = rules.values()
    assert [rule["Action"] for rule in group["Properties"]["FirewallRules"]] == ["ALLOW", "BLOCK"]
    alert = resources_of(stack_template(name, dnsFirewall="alert"), "AWS::Route53Resolver::FirewallRuleGroup")
    assert [rule["Action"] for group in alert.values() for rule in group["Properties"]["FirewallRules"]] == [
        "ALLOW",
        "ALERT",
    ]
    off = stack_template(name, dnsFirewall="off")
    assert resources_of(off, "AWS::Route53Resolver::FirewallRuleGroupAssociation") == {}


@pytest.mark.parametrize("mode", ["strict", "standard"])
def test_the_network_policy_mode_setting_reaches_the_vpc_cni_add_on(mode):
    (cni,) = [
        addon["Properties"]
        for addon in resources_of(
            stack_template("KubeflowTraining", networkPolicyMode=mode), "AWS::EKS::Addon"
        ).values()
        if addon["Properties"]["AddonName"] == "vpc-cni"
    ]
    env = json.loads(cni["ConfigurationValues"]).get("env", {})
    assert env.get("NETWORK_POLICY_ENFORCING_MODE") == ("strict" if mode == "strict" else None)


def test_the_allowed_domains_setting_reaches_the_firewalls_list():
    template = stack_template("TrainiumEks", dnsAllowedDomains="datasets.example.org")
    lists = resources_of(template, "AWS::Route53Resolver::FirewallDomainList").values()
    assert any("datasets.example.org" in each["Properties"]["Domains"] for each in lists)


def test_a_stack_given_a_vpc_builds_no_dns_firewall():
    """The VPC's DNS is its owner's: a firewall on it would answer NXDOMAIN to their other workloads."""
    app = cdk.App()
    network_stack = cdk.Stack(app, "Net", env=ENV)
    vpc = ec2.Vpc(network_stack, "Vpc", max_azs=2)
    stack = ComposerTrainingStack(app, "Own", vpc=vpc, node_subnet=vpc.private_subnets[0], env=ENV)
    assert stack.dns_firewall is None
    assert Template.from_stack(stack).find_resources("AWS::Route53Resolver::FirewallRuleGroupAssociation") == {}

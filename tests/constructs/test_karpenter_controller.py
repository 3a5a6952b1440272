"""KarpenterController: the reference CloudFormation of Karpenter v1.14 (policies, queue, rules), node access, the
charts in order."""

import json

import aws_cdk as cdk
import pytest
from aws_cdk import assertions

from tests.support.apps import new_app, resources_of, stack_template
from trainium_eks.constructs.cluster import TrainingCluster
from trainium_eks.constructs.karpenter_controller import (
    INTERRUPTION_EVENTS,
    KARPENTER_NAMESPACE,
    KARPENTER_SERVICE_ACCOUNT,
    KarpenterController,
    controller_env,
)
from trainium_eks.constructs.network import TrainingNetwork
from trainium_eks.core.conventions import SYSTEM_NODE_LABELS
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.facts import versions
from trainium_eks.stacks.app_context import STACKS

REFERENCE_SIDS = {
    "AllowScopedEC2InstanceAccessActions",
    "AllowScopedEC2LaunchTemplateAccessActions",
    "AllowScopedEC2InstanceActionsWithTags",
    "AllowScopedResourceCreationTagging",
    "AllowScopedResourceTagging",
    "AllowScopedDeletion",
    "AllowPassingInstanceRole",
    "AllowScopedInstanceProfileCreationActions",
    "AllowScopedInstanceProfileTagActions",
    "AllowScopedInstanceProfileActions",
    "AllowAPIServerEndpointDiscovery",
    "AllowInterruptionQueueActions",
    "AllowZonalShiftStatusReadOnly",
    "AllowRegionalReadActions",
    "AllowSSMReadActions",
    "AllowPricingReadActions",
    "AllowUnscopedInstanceProfileListAction",
    "AllowInstanceProfileReadActions",
}
"""The Sids of the six controller policies of Karpenter's reference template for v1.14 (aws/karpenter-provider-aws
v1.14.1, website/content/en/docs/getting-started/getting-started-with-karpenter/cloudformation.yaml)."""


@pytest.fixture(scope="module")
def built():
    app = new_app()
    stack = cdk.Stack(app, "Standalone", env=cdk.Environment(region="us-west-2"))
    network = TrainingNetwork(stack, "Network", node_az_id="usw2-az4")
    cluster = TrainingCluster(stack, "Cluster", vpc=network.vpc)
    controller = KarpenterController(stack, "Karpenter", cluster=cluster.cluster, after=[cluster.system_nodegroup])
    return controller, assertions.Template.from_stack(stack)


def statements(template):
    policies = [
        p for k, p in resources_of(template, "AWS::IAM::Policy").items() if k.startswith("KarpenterControllerRole")
    ]
    assert len(policies) == 1
    return policies[0]["Properties"]["PolicyDocument"]["Statement"]


def releases(template):
    return {
        r["Properties"]["Release"]: (k, r) for k, r in resources_of(template, "Custom::AWSCDK-EKS-HelmChart").items()
    }


def test_controller_policy_has_every_statement_of_the_reference(built):
    _, template = built
    assert {s["Sid"] for s in statements(template)} == REFERENCE_SIDS


def test_every_mutating_ec2_statement_is_scoped_to_this_cluster_and_a_node_pool(built):
    _, template = built
    for statement in statements(template):
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        mutating = [
            a
            for a in actions
            if a.startswith(("ec2:", "iam:"))
            and a.split(":")[1].startswith(("Create", "Terminate", "Delete", "Tag", "Add", "Remove"))
        ]
        if not mutating or statement["Sid"] == "AllowScopedEC2InstanceAccessActions":
            continue
        text = json.dumps(statement.get("Condition", {}))
        assert "eks:eks-cluster-name" in text, statement["Sid"]
        assert "karpenter.sh/nodepool" in text or "karpenter.k8s.aws/ec2nodeclass" in text, statement["Sid"]


def test_pass_role_is_only_for_the_node_role_to_ec2(built):
    _, template = built
    (statement,) = [s for s in statements(template) if s["Sid"] == "AllowPassingInstanceRole"]
    assert statement["Resource"] == {
        "Fn::GetAtt": [
            next(k for k in resources_of(template, "AWS::IAM::Role") if k.startswith("KarpenterNodeRole")),
            "Arn",
        ]
    }
    assert statement["Condition"]["StringEquals"]["iam:PassedToService"] == [
        "ec2.amazonaws.com",
        "ec2.amazonaws.com.cn",
    ]


def test_interruption_queue_and_its_five_rules(built):
    controller, template = built
    template.has_resource_properties("AWS::SQS::Queue", {"MessageRetentionPeriod": 300, "SqsManagedSseEnabled": True})
    rules = resources_of(template, "AWS::Events::Rule")
    assert len(rules) == len(INTERRUPTION_EVENTS) == 5
    patterns = sorted(
        (r["Properties"]["EventPattern"]["source"][0], r["Properties"]["EventPattern"]["detail-type"][0])
        for r in rules.values()
    )
    assert patterns == sorted(tuple(v) for v in INTERRUPTION_EVENTS.values())
    queue_id = next(iter(resources_of(template, "AWS::SQS::Queue")))
    for rule in rules.values():
        assert rule["Properties"]["Targets"][0]["Arn"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    policy = next(iter(resources_of(template, "AWS::SQS::QueuePolicy").values()))["Properties"]["PolicyDocument"]
    text = json.dumps(policy)
    assert "aws:SecureTransport" in text and "events.amazonaws.com" in text


def test_node_role_joins_through_an_ec2_linux_access_entry(built):
    _, template = built
    template.has_resource_properties(
        "AWS::EKS::AccessEntry",
        {
            "Type": "EC2_LINUX",
            "PrincipalArn": {"Fn::GetAtt": [assertions.Match.string_like_regexp("^KarpenterNodeRole"), "Arn"]},
        },
    )


def test_controller_role_is_bound_by_pod_identity(built):
    _, template = built
    template.has_resource_properties(
        "AWS::EKS::PodIdentityAssociation",
        {"Namespace": KARPENTER_NAMESPACE, "ServiceAccount": KARPENTER_SERVICE_ACCOUNT},
    )


def test_crds_chart_then_controller_chart_without_its_crds(built):
    _, template = built
    found = releases(template)
    crd_id, crds = found["karpenter-crd"]
    release_id, release = found["karpenter"]
    assert crds["Properties"]["Repository"] == versions.KARPENTER_CRD.repository
    assert release["Properties"]["Repository"] == versions.KARPENTER.repository
    assert release["Properties"]["Version"] == crds["Properties"]["Version"] == versions.KARPENTER.version
    assert release["Properties"]["SkipCrds"] is True
    assert crd_id in release["DependsOn"]
    assert any(d.startswith("ClusterSystemNodegroup") for d in release["DependsOn"])
    values = json.dumps(release["Properties"]["Values"])
    assert "clusterName" in values and "interruptionQueue" in values
    for key, value in SYSTEM_NODE_LABELS.items():
        assert key in values and value in values


def test_release_waits_within_the_handlers_limit(built):
    _, template = built
    _, release = releases(template)["karpenter"]
    assert release["Properties"]["Wait"] is True
    minutes = int(release["Properties"]["Timeout"].rstrip("s")) / 60
    assert minutes <= 11


@pytest.mark.parametrize("name", STACKS)
def test_the_controller_gets_its_region_from_the_chart_not_from_imds(name):
    """The nodes' hop limit of 1 keeps IMDS from the controller's pods (not on the host network); Karpenter exits when
    it finds no region (v1.14.1 pkg/operator/operator.go), so the chart's controller.env sets AWS_REGION."""
    template = stack_template(name)
    _, release = releases(template)["karpenter"]
    values = json.dumps(release["Properties"]["Values"])
    assert '\\"env\\":[{\\"name\\":\\"AWS_REGION\\",\\"value\\":\\"us-west-2\\"}]' in values
    assert controller_env("us-west-2") == [{"name": "AWS_REGION", "value": "us-west-2"}]
    assert '\\"hostNetwork\\"' not in values


@pytest.mark.parametrize("name", STACKS)
def test_karpenter_replaces_the_nodes_that_report_themselves_unhealthy(name):
    """Node repair is Karpenter's alpha gate NodeRepair, off in the chart's values (settings.featureGates); each stack's
    controller turns it on and leaves the chart's other gates as they are (Helm merges the values into the chart's)."""
    _, release = releases(stack_template(name))["karpenter"]
    values = json.dumps(release["Properties"]["Values"])
    assert '\\"featureGates\\":{\\"nodeRepair\\":true}' in values


def test_node_repair_can_be_left_off():
    app = new_app()
    stack = cdk.Stack(app, "Standalone", env=cdk.Environment(region="us-west-2"))
    cluster = TrainingCluster(stack, "Cluster", vpc=TrainingNetwork(stack, "Network", node_az_id="usw2-az4").vpc)
    KarpenterController(stack, "Karpenter", cluster=cluster.cluster, node_repair=False)
    _, release = releases(assertions.Template.from_stack(stack))["karpenter"]
    assert '\\"featureGates\\":{\\"nodeRepair\\":false}' in json.dumps(release["Properties"]["Values"])


def test_node_repair_is_true_or_false():
    app = new_app()
    stack = cdk.Stack(app, "Standalone", env=cdk.Environment(region="us-west-2"))
    cluster = TrainingCluster(stack, "Cluster", vpc=TrainingNetwork(stack, "Network", node_az_id="usw2-az4").vpc)
    with pytest.raises(ConfigurationError, match="node_repair"):
        KarpenterController(stack, "Karpenter", cluster=cluster.cluster, node_repair="yes")

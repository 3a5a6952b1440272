"""TrainingCluster: control plane, access, logging, encryption, kubectl layer, system nodes, add-ons."""

import json

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_eks_v2 as eks

from tests.support.apps import default_template, new_app, only, resources_of, stack_template
from tests.support.manifests import MANIFEST, manifest_of
from trainium_eks.constructs.cluster import VPC_CNI_SERVICE_ACCOUNT, TrainingCluster
from trainium_eks.constructs.network import TrainingNetwork
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.facts import versions
from trainium_eks.manifests.access.system_network_policy import ALLOW_ALL_POLICY
from trainium_eks.stacks.app_context import STACKS


def test_cluster_version_logging_and_secrets_encryption(template):
    cluster = only(template, "AWS::EKS::Cluster")["Properties"]
    assert cluster["Version"] == versions.DEFAULT_KUBERNETES_VERSION == "1.36"
    assert cluster["AccessConfig"]["AuthenticationMode"] == "API"
    assert cluster["Logging"]["ClusterLogging"]["EnabledTypes"] == [
        {"Type": "api"},
        {"Type": "audit"},
        {"Type": "authenticator"},
    ]
    assert cluster["EncryptionConfig"][0]["Resources"] == ["secrets"]
    key_id = cluster["EncryptionConfig"][0]["Provider"]["KeyArn"]["Fn::GetAtt"][0]
    key = resources_of(template, "AWS::KMS::Key")[key_id]
    assert key["Properties"]["EnableKeyRotation"] is True
    assert key["DeletionPolicy"] == "Retain"
    assert cluster["ResourcesVpcConfig"]["EndpointPrivateAccess"] is True
    assert len(cluster["ResourcesVpcConfig"]["SubnetIds"]) == 2
    assert all("Private" in s["Ref"] for s in cluster["ResourcesVpcConfig"]["SubnetIds"])


@pytest.mark.parametrize("version", versions.KUBERNETES_VERSIONS)
def test_kubectl_layer_matches_the_kubernetes_version(version):
    template = default_template(kubernetesVersion=version)
    assert only(template, "AWS::EKS::Cluster")["Properties"]["Version"] == version
    layers = [
        layer["Properties"]["Description"] for layer in resources_of(template, "AWS::Lambda::LayerVersion").values()
    ]
    assert any(d.startswith(f"/opt/kubectl/kubectl {version}.") for d in layers), layers


def test_admin_role_gets_a_cluster_admin_access_entry():
    arn = "arn:aws:iam::123456789012:role/platform/Admin"
    template = default_template(adminRoleArn=arn)
    template.has_resource_properties(
        "AWS::EKS::AccessEntry",
        {
            "PrincipalArn": arn,
            "AccessPolicies": [
                {
                    "AccessScope": {"Type": "cluster"},
                    "PolicyArn": {
                        "Fn::Join": [
                            "",
                            [
                                "arn:",
                                {"Ref": "AWS::Partition"},
                                ":eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy",
                            ],
                        ]
                    },
                }
            ],
        },
    )


def test_no_admin_entry_without_an_admin_role(template):
    entries = resources_of(template, "AWS::EKS::AccessEntry").values()
    assert all("GetAtt" in json.dumps(e["Properties"]["PrincipalArn"]) for e in entries), "only the kubectl role"


def test_system_node_group_is_small_on_demand_and_in_the_private_subnets(template):
    (system,) = [
        ng["Properties"]
        for ng in resources_of(template, "AWS::EKS::Nodegroup").values()
        if ng["Properties"]["AmiType"] == "AL2023_x86_64_STANDARD"
    ]
    assert system["ScalingConfig"] == {"MinSize": 2, "DesiredSize": 2, "MaxSize": 4}
    assert system["Labels"] == {"trainium-eks/node-role": "system"}
    assert system["NodeRepairConfig"] == {"Enabled": True}
    assert len(system["Subnets"]) == 2
    assert "Taints" not in system
    launch_template_id = system["LaunchTemplate"]["Id"]["Ref"]
    data = resources_of(template, "AWS::EC2::LaunchTemplate")[launch_template_id]["Properties"]["LaunchTemplateData"]
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    assert data["BlockDeviceMappings"][0]["Ebs"]["Encrypted"] is True


def addons(template):
    return {a["Properties"]["AddonName"]: a for a in resources_of(template, "AWS::EKS::Addon").values()}


def test_managed_add_ons(template):
    found = addons(template)
    assert set(found) == {
        "vpc-cni",
        "coredns",
        "kube-proxy",
        "eks-pod-identity-agent",
        "aws-fsx-csi-driver",
        "eks-node-monitoring-agent",
        "amazon-cloudwatch-observability",
    }
    assert all(a["Properties"]["ResolveConflicts"] == "OVERWRITE" for a in found.values())


def test_fsx_csi_driver_uses_pod_identity_with_a_least_privilege_role(template):
    fsx = addons(template)["aws-fsx-csi-driver"]
    (association,) = fsx["Properties"]["PodIdentityAssociations"]
    assert association["ServiceAccount"] == "fsx-csi-controller-sa"
    role_id = association["RoleArn"]["Fn::GetAtt"][0]
    role = resources_of(template, "AWS::IAM::Role")[role_id]["Properties"]
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert sorted(role["AssumeRolePolicyDocument"]["Statement"][0]["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
    assert "ManagedPolicyArns" not in role
    policies = [
        p for p in resources_of(template, "AWS::IAM::Policy").values() if {"Ref": role_id} in p["Properties"]["Roles"]
    ]
    statements = [s for p in policies for s in p["Properties"]["PolicyDocument"]["Statement"]]
    assert {s["Action"] for s in statements} == {"fsx:DescribeFileSystems", "fsx:UpdateFileSystem"}
    update = next(s for s in statements if s["Action"] == "fsx:UpdateFileSystem")
    assert "file-system/" in json.dumps(update["Resource"]), "resize is limited to the stack's file system"


def test_add_ons_that_run_deployments_wait_for_the_system_nodes(template):
    found = addons(template)
    (system_id,) = [
        k
        for k, ng in resources_of(template, "AWS::EKS::Nodegroup").items()
        if ng["Properties"]["AmiType"] == "AL2023_x86_64_STANDARD"
    ]
    assert system_id in found["coredns"]["DependsOn"]
    assert system_id in found["aws-fsx-csi-driver"]["DependsOn"]


def build_cluster(**props):
    app = new_app()
    stack = cdk.Stack(app, "S", env=cdk.Environment(region="us-west-2"))
    network = TrainingNetwork(stack, "Net", node_az_id="usw2-az4")
    return TrainingCluster(stack, "Cluster", vpc=network.vpc, **props), stack


def test_add_on_versions_can_be_pinned():
    _, stack = build_cluster(addon_versions={"vpc-cni": "v1.21.1-eksbuild.1"})
    assertions.Template.from_stack(stack).has_resource_properties(
        "AWS::EKS::Addon", {"AddonName": "vpc-cni", "AddonVersion": "v1.21.1-eksbuild.1"}
    )


def test_a_vpc_cni_without_efa_only_support_or_strict_mode_is_refused():
    for version in ("v1.18.3-eksbuild.1", "v1.19.6-eksbuild.1"):
        with pytest.raises(ValueError, match=r"vpc-cni must be v1.20.0 or newer"):
            build_cluster(addon_versions={"vpc-cni": version})


def test_container_insights_agent_uses_pod_identity_with_the_cloudwatch_agent_policy(template):
    observability = addons(template)["amazon-cloudwatch-observability"]
    (association,) = observability["Properties"]["PodIdentityAssociations"]
    assert association["ServiceAccount"] == "cloudwatch-agent"
    role = resources_of(template, "AWS::IAM::Role")[association["RoleArn"]["Fn::GetAtt"][0]]["Properties"]
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert "policy/CloudWatchAgentServerPolicy" in json.dumps(role["ManagedPolicyArns"])
    assert {k for k in observability["DependsOn"] if "podidentity" in k.lower()}, "the Pod Identity agent first"


def test_container_insights_can_be_left_out():
    _, stack = build_cluster(container_insights=False)
    found = [
        a["Properties"]["AddonName"]
        for a in assertions.Template.from_stack(stack).find_resources("AWS::EKS::Addon").values()
    ]
    assert "amazon-cloudwatch-observability" not in found


def test_dashboard_graphs_neuron_and_efa_metrics_per_node_of_this_cluster(template):
    (dashboard,) = resources_of(template, "AWS::CloudWatch::Dashboard").values()
    parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    body = "".join(p if isinstance(p, str) else json.dumps(p) for p in parts)
    cluster_id = next(iter(resources_of(template, "AWS::EKS::Cluster")))
    for metric in (
        "node_neuroncore_utilization",
        "node_neurondevice_runtime_memory_used_bytes",
        "node_efa_rx_bytes",
        "node_efa_tx_bytes",
        "node_neuron_execution_errors_total",
    ):
        assert f'MetricName=\\"{metric}\\"' in body, metric
    assert body.count("{ContainerInsights,ClusterName,InstanceId,NodeName}") == 8
    assert {"Ref": cluster_id} in parts


def test_vpc_cni_enforces_network_policies_strictly_from_a_pods_first_packet(template):
    cni = addons(template)["vpc-cni"]
    assert json.loads(cni["Properties"]["ConfigurationValues"]) == {
        "enableNetworkPolicy": "true",
        "env": {"NETWORK_POLICY_ENFORCING_MODE": "strict"},
    }


def allow_all_policies(template):
    """The allow-all NetworkPolicy manifests of a template, by namespace: their logical IDs."""
    return {
        obj["metadata"]["namespace"]: lid
        for lid, resource in resources_of(template, MANIFEST).items()
        for obj in [manifest_of(resource)]
        if obj["kind"] == "NetworkPolicy" and obj["metadata"]["name"] == ALLOW_ALL_POLICY
    }


def test_in_strict_mode_kube_system_admits_its_pods_traffic_before_they_exist():
    """The allow-all policy of kube-system is applied before CoreDNS and the CSI drivers (and, through
    ``system_workloads_after``, Karpenter and the device plugins), not before the vpc-cni add-on (the deploy's critical
    path); amazon-cloudwatch's with the namespace, before the add-on."""
    _, stack = build_cluster()
    template = assertions.Template.from_stack(stack)
    resources = template.to_json()["Resources"]
    policies = allow_all_policies(template)
    assert sorted(policies) == ["amazon-cloudwatch", "kube-system"]
    by_name = {r["Properties"]["AddonName"]: lid for lid, r in resources_of(template, "AWS::EKS::Addon").items()}
    assert policies["kube-system"] in resources[by_name["coredns"]]["DependsOn"]
    assert policies["kube-system"] not in resources[by_name["vpc-cni"]].get("DependsOn", [])
    assert policies["amazon-cloudwatch"] in resources[by_name["amazon-cloudwatch-observability"]]["DependsOn"]
    namespaces = [manifest_of(r)["metadata"]["name"] for r in resources_of(template, MANIFEST).values()]
    assert "amazon-cloudwatch" in namespaces and "kube-system" not in namespaces


def test_in_standard_mode_the_agent_keeps_its_default_and_the_namespaces_stay_open_for_a_switch_back():
    """The allow-all policies stay in standard mode (they change nothing there), so a stack switched from strict to
    standard never deletes them while agents on its nodes still run strict and would deny the pods they leave."""
    cluster, stack = build_cluster(network_policy_mode="standard")
    template = assertions.Template.from_stack(stack)
    cni = addons(template)["vpc-cni"]
    assert json.loads(cni["Properties"]["ConfigurationValues"]) == {"enableNetworkPolicy": "true"}
    assert sorted(allow_all_policies(template)) == ["amazon-cloudwatch", "kube-system"]
    assert cluster.allow_all_traffic("kube-system") is cluster.allow_all_traffic("kube-system", create_namespace=True)
    with pytest.raises(ConfigurationError, match=r"network_policy_mode='lenient': strict or standard"):
        build_cluster(network_policy_mode="lenient")


# --- Issue 17: a pod cannot become its node ---------------------------------------------------------------------


@pytest.mark.parametrize("name", STACKS)
def test_aws_node_gets_the_cni_policy_from_its_own_role_bound_by_the_vpc_cni_add_on(name):
    template = stack_template(name)
    vpc_cni = addons(template)["vpc-cni"]
    (association,) = vpc_cni["Properties"]["PodIdentityAssociations"]
    assert association["ServiceAccount"] == VPC_CNI_SERVICE_ACCOUNT == "aws-node"
    role = resources_of(template, "AWS::IAM::Role")[association["RoleArn"]["Fn::GetAtt"][0]]["Properties"]
    assert [json.dumps(arn) for arn in role["ManagedPolicyArns"]] == [
        json.dumps({"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::aws:policy/AmazonEKS_CNI_Policy"]]})
    ]
    (statement,) = role["AssumeRolePolicyDocument"]["Statement"]
    tags = statement["Condition"]["StringEquals"]
    assert (tags["aws:RequestTag/kubernetes-namespace"], tags["aws:RequestTag/kubernetes-service-account"]) == (
        "kube-system",
        "aws-node",
    )


@pytest.mark.parametrize("name", STACKS)
def test_the_cni_add_on_and_the_pod_identity_agent_exist_before_any_node_joins(name):
    """aws-node takes its credentials from the Pod Identity agent; both add-ons (and the association) come before the
    system nodes, before every node group (after vpc-cni) and before Karpenter (after both), and the node role drops
    the CNI policy only after the add-on has its association."""
    resources = stack_template(name).to_json()["Resources"]
    by_type = {}
    for logical_id, resource in resources.items():
        by_type.setdefault(resource["Type"], {})[logical_id] = resource
    addon_ids = {r["Properties"]["AddonName"]: k for k, r in by_type["AWS::EKS::Addon"].items()}
    system = next(k for k in by_type["AWS::EKS::Nodegroup"] if k.startswith("ClusterSystemNodegroup"))
    assert {addon_ids["vpc-cni"], addon_ids["eks-pod-identity-agent"]} <= set(resources[system]["DependsOn"])
    node_role = next(k for k in by_type["AWS::IAM::Role"] if k.startswith("ClusterNodeRole"))
    assert addon_ids["vpc-cni"] in resources[node_role]["DependsOn"]
    assert addon_ids["vpc-cni"] not in json.dumps(resources[addon_ids["vpc-cni"]].get("DependsOn", []))


def test_the_endpoint_is_private_unless_cidr_blocks_are_admitted():
    cluster, stack = build_cluster()
    config = only(assertions.Template.from_stack(stack), "AWS::EKS::Cluster")["Properties"]["ResourcesVpcConfig"]
    assert (config["EndpointPublicAccess"], config["EndpointPrivateAccess"]) == (False, True)
    assert "PublicAccessCidrs" not in config and cluster.public_endpoint_cidrs == []
    cluster, stack = build_cluster(public_endpoint_cidrs=["203.0.113.0/24", "198.51.100.7/32"])
    config = only(assertions.Template.from_stack(stack), "AWS::EKS::Cluster")["Properties"]["ResourcesVpcConfig"]
    assert (config["EndpointPublicAccess"], config["EndpointPrivateAccess"]) == (True, True)
    assert config["PublicAccessCidrs"] == ["203.0.113.0/24", "198.51.100.7/32"]


def test_the_kubectl_provider_runs_in_the_private_subnets_so_a_private_endpoint_works():
    """aws-eks-v2 places the kubectl handler in the cluster's private subnets whenever private access is on
    (aws-cdk-lib 2.275.0 aws-eks-v2/lib/cluster.js: ``kubectlSubnets=privateSubnets`` under
    ``endpointAccess._config.privateAccess``)."""
    _, stack = build_cluster()
    template = assertions.Template.from_stack(stack)
    handlers = [
        r["Properties"]
        for k, r in resources_of(template, "AWS::Lambda::Function").items()
        if k.startswith("ClusterKubectlProviderHandler")
    ]
    assert handlers and all(h["VpcConfig"]["SubnetIds"] for h in handlers)


@pytest.mark.parametrize(
    "cidrs, reason",
    [
        (["203.0.113.5/24"], "host bits set (the block is 203.0.113.0/24)"),
        (["203.0.113.0/33"], "not a prefix length of 0 to 32"),
        (["198.51.100.7"], "not an IPv4 CIDR block"),
        (["2001:db8::/32"], "not an IPv4 address"),
        (["203.0.113.0/24", "203.0.113.0/24"], "repeated: 203.0.113.0/24"),
        ("203.0.113.0/24", "a list of IPv4 CIDR blocks"),
    ],
)
def test_a_bad_public_endpoint_cidr_is_refused_with_one_clear_message(cidrs, reason):
    with pytest.raises(ConfigurationError) as error:
        build_cluster(public_endpoint_cidrs=cidrs)
    (problem,) = [p for p in error.value.problems if p.startswith("public_endpoint_cidrs=")]
    assert reason in problem and "such as 203.0.113.0/24" in problem


def test_endpoint_access_and_public_endpoint_cidrs_are_one_or_the_other():
    with pytest.raises(ConfigurationError, match="public_endpoint_cidrs=.*none with endpoint_access"):
        build_cluster(endpoint_access=eks.EndpointAccess.PUBLIC, public_endpoint_cidrs=["203.0.113.0/24"])


def test_a_private_endpoint_in_a_vpc_without_private_subnets_is_refused_naming_the_setting():
    stack = cdk.Stack(new_app(), "S", env=cdk.Environment(region="us-west-2"))
    vpc = cdk.aws_ec2.Vpc.from_vpc_attributes(stack, "Vpc", vpc_id="vpc-0123456789abcdef0", availability_zones=["a"])
    with pytest.raises(ConfigurationError, match="vpc='vpc-0123456789abcdef0': a VPC with private subnets"):
        TrainingCluster(stack, "Cluster", vpc=vpc)
    with pytest.raises(ConfigurationError, match="a VPC with private subnets"):
        TrainingCluster(stack, "Restricted", vpc=vpc, public_endpoint_cidrs=["203.0.113.0/24"])

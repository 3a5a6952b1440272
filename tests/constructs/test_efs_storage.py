"""EfsStorage (the file system, its mount targets and security group) and EfsVolumeChart (its Kubernetes objects)."""

import json
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_efs as efs
from aws_cdk import aws_kms as kms
from cdk_nag import AwsSolutionsChecks

from tests.support.apps import new_app, only, resources_of
from tests.support.clusters import ENV
from tests.support.k8s_validation import validate_objects
from tests.support.replacement import replacement_key
from trainium_eks.constructs.efs_storage import EfsStorage
from trainium_eks.constructs.network import TrainingNetwork
from trainium_eks.core.conventions import EfsVolumeSource
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.facts import versions
from trainium_eks.manifests.storage.efs_volume import CLAIM_REQUEST, EfsVolumeChart

FILE_SYSTEM_ID = "fs-0123456789abcdef0"
VOLUME = EfsVolumeSource(file_system_id=FILE_SYSTEM_ID)


def storage_stack(*, clients=1, **props):
    """A stack with a three-AZ VPC, ``clients`` client security groups and an EfsStorage."""
    stack = cdk.Stack(new_app(), "S", env=ENV)
    vpc = ec2.Vpc(stack, "Vpc", max_azs=3)
    groups = [ec2.SecurityGroup(stack, f"Client{i}", vpc=vpc) for i in range(clients)]
    storage = EfsStorage(stack, "Efs", vpc=vpc, client_security_groups=groups, **props)
    return stack, vpc, groups, storage


def logical_id(stack, construct):
    return stack.get_logical_id(construct.node.default_child)


def nfs_rules(template, group_id):
    return [
        r["Properties"]
        for r in resources_of(template, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == {"Fn::GetAtt": [group_id, "GroupId"]}
    ]


# --- The file system -------------------------------------------------------------------------------------------


def test_file_system_is_encrypted_elastic_backed_up_and_retained():
    stack, _, _, _ = storage_stack()
    file_system = only(assertions.Template.from_stack(stack), "AWS::EFS::FileSystem")
    assert file_system["DeletionPolicy"] == "Retain" and file_system["UpdateReplacePolicy"] == "Retain"
    props = file_system["Properties"]
    assert props["Encrypted"] is True and "KmsKeyId" not in props, "the AWS managed key by default"
    assert props["PerformanceMode"] == "generalPurpose"
    assert props["ThroughputMode"] == "elastic"
    assert props["BackupPolicy"] == {"Status": "ENABLED"}
    assert props["LifecyclePolicies"] == [
        {"TransitionToIA": "AFTER_30_DAYS"},
        {"TransitionToPrimaryStorageClass": "AFTER_1_ACCESS"},
    ]


def test_customer_managed_key_and_no_lifecycle():
    stack = cdk.Stack(new_app(), "S", env=ENV)
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    EfsStorage(stack, "Efs", vpc=ec2.Vpc(stack, "Vpc", max_azs=2), kms_key=key, transition_to_ia=None)
    props = only(assertions.Template.from_stack(stack), "AWS::EFS::FileSystem")["Properties"]
    assert props["Encrypted"] is True
    assert props["KmsKeyId"] == {"Fn::GetAtt": [logical_id(stack, key), "Arn"]}
    assert "LifecyclePolicies" not in props


def test_file_system_policy_admits_clients_through_mount_targets_over_tls_only():
    stack, _, _, _ = storage_stack()
    policy = only(assertions.Template.from_stack(stack), "AWS::EFS::FileSystem")["Properties"]["FileSystemPolicy"]
    (statement,) = policy["Statement"]
    assert statement["Effect"] == "Allow" and statement["Principal"] == {"AWS": "*"}
    assert sorted(statement["Action"]) == [
        "elasticfilesystem:ClientMount",
        "elasticfilesystem:ClientRootAccess",
        "elasticfilesystem:ClientWrite",
    ], "ClientMount included: the CDK's own policy leaves it out and the EFS CSI driver could not mount"
    assert statement["Condition"] == {
        "Bool": {"elasticfilesystem:AccessedViaMountTarget": "true", "aws:SecureTransport": "true"}
    }


def test_tls_can_be_left_optional():
    stack, _, _, _ = storage_stack(require_tls=False)
    policy = only(assertions.Template.from_stack(stack), "AWS::EFS::FileSystem")["Properties"]["FileSystemPolicy"]
    assert policy["Statement"][0]["Condition"] == {"Bool": {"elasticfilesystem:AccessedViaMountTarget": "true"}}


def test_attributes():
    stack, _, _, storage = storage_stack()
    file_system_id = logical_id(stack, storage.file_system)
    assert stack.resolve(storage.file_system_id) == {"Ref": file_system_id}
    assert stack.resolve(storage.file_system_arn) == {"Fn::GetAtt": [file_system_id, "Arn"]}
    assert stack.resolve(storage.volume_source.file_system_id) == {"Ref": file_system_id}
    assert stack.resolve(storage.security_group.security_group_id) == {
        "Fn::GetAtt": [logical_id(stack, storage.security_group), "GroupId"]
    }


# --- Mount targets ---------------------------------------------------------------------------------------------


def test_one_mount_target_in_each_private_subnet_with_the_file_system_security_group():
    stack, vpc, _, storage = storage_stack()
    template = assertions.Template.from_stack(stack)
    targets = [t["Properties"] for t in resources_of(template, "AWS::EFS::MountTarget").values()]
    assert sorted(json.dumps(t["SubnetId"]) for t in targets) == sorted(
        json.dumps(stack.resolve(s.subnet_id)) for s in vpc.private_subnets
    )
    assert len(targets) == 3
    group = {"Fn::GetAtt": [logical_id(stack, storage.security_group), "GroupId"]}
    assert all(t["SecurityGroups"] == [group] for t in targets)


def test_training_network_gets_one_mount_target_per_az_and_none_in_the_accelerated_subnet():
    stack = cdk.Stack(new_app(), "S", env=ENV)
    network = TrainingNetwork(stack, "Net", node_az_id="usw2-az4")
    EfsStorage(stack, "Efs", vpc=network.vpc)
    targets = resources_of(assertions.Template.from_stack(stack), "AWS::EFS::MountTarget").values()
    subnets = sorted(t["Properties"]["SubnetId"]["Ref"] for t in targets)
    assert len(subnets) == 2 and all("Private" in s for s in subnets), subnets


def test_explicit_subnets():
    stack = cdk.Stack(new_app(), "S", env=ENV)
    vpc = ec2.Vpc(stack, "Vpc", max_azs=3)
    EfsStorage(stack, "Efs", vpc=vpc, subnets=vpc.private_subnets[:2])
    assertions.Template.from_stack(stack).resource_count_is("AWS::EFS::MountTarget", 2)


# --- Security group --------------------------------------------------------------------------------------------


def test_security_group_admits_nfs_from_each_client_and_nothing_else():
    stack, _, groups, storage = storage_stack(clients=2)
    template = assertions.Template.from_stack(stack)
    efs_group = logical_id(stack, storage.security_group)
    rules = nfs_rules(template, efs_group)
    assert sorted(json.dumps(r["SourceSecurityGroupId"]) for r in rules) == sorted(
        json.dumps({"Fn::GetAtt": [logical_id(stack, g), "GroupId"]}) for g in groups
    )
    assert all((r["IpProtocol"], r["FromPort"], r["ToPort"]) == ("tcp", 2049, 2049) for r in rules)
    group = resources_of(template, "AWS::EC2::SecurityGroup")[efs_group]["Properties"]
    assert "SecurityGroupIngress" not in group, "no inline rule, no CIDR rule"
    assert group["SecurityGroupEgress"] == [
        {
            "CidrIp": "255.255.255.255/32",
            "Description": "Disallow all traffic",
            "FromPort": 252,
            "IpProtocol": "icmp",
            "ToPort": 86,
        }
    ], "mount targets never open connections"


def test_clients_get_no_rule_back_because_nfs_replies_ride_the_client_connection():
    """Security groups are stateful: the mount target's replies pass on the connection the client opened, and EFS
    mount targets never connect to clients (unlike FSx for Lustre servers), so no rule admits EFS into a client."""
    stack, _, groups, _ = storage_stack(clients=2)
    template = assertions.Template.from_stack(stack)
    for group in groups:
        assert nfs_rules(template, logical_id(stack, group)) == []
    assert len(resources_of(template, "AWS::EC2::SecurityGroupIngress")) == 2


def test_allow_clients_adds_rules_later_and_checks_types():
    stack, vpc, _, storage = storage_stack(clients=0)
    late = ec2.SecurityGroup(stack, "Late", vpc=vpc)
    storage.allow_clients(late)
    rules = nfs_rules(assertions.Template.from_stack(stack), logical_id(stack, storage.security_group))
    assert [r["SourceSecurityGroupId"] for r in rules] == [{"Fn::GetAtt": [logical_id(stack, late), "GroupId"]}]
    with pytest.raises(ConfigurationError, match=r"security_groups\[0\]='sg-123'"):
        storage.allow_clients("sg-123")


def test_a_named_client_has_a_rule_of_its_own_name_and_takes_no_position():
    stack, vpc, groups, storage = storage_stack(clients=1)
    optional, late = (ec2.SecurityGroup(stack, name, vpc=vpc) for name in ("Optional", "Late"))
    storage.allow_clients(optional, name="GpuNodes")
    storage.allow_clients(late)
    rules = resources_of(assertions.Template.from_stack(stack), "AWS::EC2::SecurityGroupIngress")
    peers = {lid.removeprefix("Efs")[:-8]: r["Properties"]["SourceSecurityGroupId"] for lid, r in rules.items()}
    assert peers == {
        "FromClient0": {"Fn::GetAtt": [logical_id(stack, groups[0]), "GroupId"]},
        "FromGpuNodes": {"Fn::GetAtt": [logical_id(stack, optional), "GroupId"]},
        "FromClient1": {"Fn::GetAtt": [logical_id(stack, late), "GroupId"]},
    }
    with pytest.raises(ConfigurationError, match=r"(?s)name='gpu-nodes'.*security_groups=2"):
        storage.allow_clients(optional, late, name="gpu-nodes")


def test_an_efs_clients_name_is_neither_a_positional_name_nor_one_taken():
    stack, vpc, _groups, storage = storage_stack(clients=1)
    optional = ec2.SecurityGroup(stack, "Optional", vpc=vpc)
    storage.allow_clients(optional, name="GpuNodes")
    with pytest.raises(ConfigurationError, match=r"name='GpuNodes': a name no other client"):
        storage.allow_clients(optional, name="GpuNodes")
    with pytest.raises(ConfigurationError, match=r"name='Client0': a name other than Client<n>"):
        storage.allow_clients(optional, name="Client0")


def stack_dependencies(app):
    """Stack name -> the names of the stacks it depends on (synthesizing fails on a dependency cycle)."""
    stacks = app.synth().stacks
    return {a.stack_name: {d.id for d in a.dependencies} & {b.stack_name for b in stacks} for a in stacks}


def test_clients_in_a_later_stack_get_their_rule_in_that_stack_without_a_cycle():
    app = new_app()
    storage_stack_ = cdk.Stack(app, "Storage", env=ENV)
    vpc = ec2.Vpc(storage_stack_, "Vpc", max_azs=2)
    storage = EfsStorage(storage_stack_, "Efs", vpc=vpc)
    nodes = cdk.Stack(app, "Nodes", env=ENV)
    client = ec2.SecurityGroup(nodes, "Client", vpc=vpc)
    storage.allow_clients(client)
    assert stack_dependencies(app) == {"Storage": set(), "Nodes": {"Storage"}}
    assert resources_of(assertions.Template.from_stack(storage_stack_), "AWS::EC2::SecurityGroupIngress") == {}
    (rule,) = resources_of(assertions.Template.from_stack(nodes), "AWS::EC2::SecurityGroupIngress").values()
    assert rule["Properties"]["FromPort"] == 2049
    assert "Storage" in json.dumps(rule["Properties"]["GroupId"]), "the file system's group, from the storage stack"


def test_clients_in_an_earlier_stack_get_their_rule_in_the_storage_stack_without_a_cycle():
    app = new_app()
    network = cdk.Stack(app, "Network", env=ENV)
    vpc = ec2.Vpc(network, "Vpc", max_azs=2)
    client = ec2.SecurityGroup(network, "Client", vpc=vpc)
    storage_stack_ = cdk.Stack(app, "Storage", env=ENV)
    EfsStorage(storage_stack_, "Efs", vpc=vpc, client_security_groups=[client])
    assert stack_dependencies(app) == {"Network": set(), "Storage": {"Network"}}
    assert resources_of(assertions.Template.from_stack(network), "AWS::EC2::SecurityGroupIngress") == {}
    (rule,) = resources_of(assertions.Template.from_stack(storage_stack_), "AWS::EC2::SecurityGroupIngress").values()
    assert "Network" in json.dumps(rule["Properties"]["SourceSecurityGroupId"]), "the client group, from its stack"


# --- Data safety and cdk-nag -----------------------------------------------------------------------------------


def file_system_key(stack):
    resources = assertions.Template.from_stack(stack).to_json()["Resources"]
    (file_system,) = [k for k, r in resources.items() if r["Type"] == "AWS::EFS::FileSystem"]
    return replacement_key(resources, file_system)


@pytest.mark.parametrize(
    "change",
    [
        {"clients": 3},
        {"transition_to_ia": efs.LifecyclePolicy.AFTER_90_DAYS},
        {"transition_to_ia": None},
        {"require_tls": False},
    ],
    ids=["more clients", "later IA", "no IA", "no TLS"],
)
def test_unrelated_settings_keep_the_logical_id_and_replacement_causing_properties(change):
    before, _, _, _ = storage_stack()
    after, _, _, _ = storage_stack(**change)
    assert file_system_key(before) == file_system_key(after)


def test_the_data_safety_check_notices_a_new_key():
    before, _, _, _ = storage_stack()
    after = cdk.Stack(new_app(), "S", env=ENV)
    key = kms.Key(after, "Key", enable_key_rotation=True)
    EfsStorage(after, "Efs", vpc=ec2.Vpc(after, "Vpc", max_azs=3), kms_key=key)
    assert file_system_key(before) != file_system_key(after)


def test_cdk_nag_aws_solutions_finds_nothing_in_the_storage():
    app = new_app()
    stack = cdk.Stack(app, "S", env=ENV)
    vpc = ec2.Vpc.from_vpc_attributes(
        stack,
        "Vpc",
        vpc_id="vpc-0123456789abcdef0",
        availability_zones=["us-west-2a", "us-west-2b"],
        private_subnet_ids=["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
    )
    client = ec2.SecurityGroup.from_security_group_id(stack, "Client", "sg-0123456789abcdef0")
    EfsStorage(stack, "Efs", vpc=vpc, client_security_groups=[client])
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    app.synth()


def test_cfn_lint_finds_nothing_in_the_storage_on_the_training_network(tmp_path):
    app = new_app()
    stack = cdk.Stack(app, "S", env=ENV)
    network = TrainingNetwork(stack, "Net", node_az_id="usw2-az4")
    client = ec2.SecurityGroup(stack, "Client", vpc=network.vpc)
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    EfsStorage(stack, "Efs", vpc=network.vpc, client_security_groups=[client], kms_key=key)
    path = tmp_path / "template.json"
    path.write_text(json.dumps(app.synth().get_stack_by_name("S").template))
    result = subprocess.run(
        [str(Path(sys.executable).parent / "cfn-lint"), "--regions", "us-west-2", "--", str(path)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[:4000]


# --- Bad input -------------------------------------------------------------------------------------------------


def test_every_bad_setting_is_reported_in_one_error():
    stack = cdk.Stack(new_app(), "S", env=ENV)
    public_only = ec2.Vpc(
        stack,
        "Vpc",
        max_azs=2,
        nat_gateways=0,
        subnet_configuration=[ec2.SubnetConfiguration(name="Public", subnet_type=ec2.SubnetType.PUBLIC)],
    )
    with pytest.raises(ConfigurationError) as error:
        EfsStorage(
            stack,
            "Efs",
            vpc=public_only,
            client_security_groups="sg-0123456789abcdef0",
            kms_key="alias/aws/elasticfilesystem",
            transition_to_ia="30 days",
            require_tls="yes",
        )
    assert len(error.value.problems) == 5, error.value
    message = str(error.value)
    assert "vpc='S/Vpc': a VPC with private subnets" in message
    assert "client_security_groups='sg-0123456789abcdef0': a list of ec2.ISecurityGroup" in message
    assert "kms_key='alias/aws/elasticfilesystem': a kms.IKey" in message
    assert "transition_to_ia='30 days': an efs.LifecyclePolicy" in message
    assert "require_tls='yes': true or false" in message


def test_a_vpc_that_is_not_one_is_refused_with_the_other_problems():
    stack = cdk.Stack(new_app(), "S", env=ENV)
    with pytest.raises(ConfigurationError) as error:
        EfsStorage(stack, "Efs", vpc="vpc-0123456789abcdef0", client_security_groups=[None])
    assert [p.split("=")[0] for p in error.value.problems] == ["vpc", "client_security_groups[0]"]


@pytest.mark.parametrize(
    "subnets, allowed",
    [
        ([], "a non-empty list of ec2.ISubnet"),
        ("subnet-0123456789abcdef0", "a non-empty list of ec2.ISubnet"),
        ("same AZ", "at most one subnet per Availability Zone"),
    ],
    ids=["empty", "a string", "two in one AZ"],
)
def test_bad_subnets(subnets, allowed):
    stack = cdk.Stack(new_app(), "S", env=ENV)
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2)
    if subnets == "same AZ":
        subnets = [vpc.public_subnets[0], vpc.private_subnets[0]]
    with pytest.raises(ConfigurationError, match=allowed):
        EfsStorage(stack, "Efs", vpc=vpc, subnets=subnets)


def test_bad_chart_settings_are_reported_in_one_error():
    with pytest.raises(ConfigurationError) as error:
        EfsVolumeChart(
            volume=EfsVolumeSource(file_system_id="fs-XYZ"),
            namespace="Training",
            storage_class_name="efs_sc",
            volume_name="",
            claim_name="EFS Claim",
        )
    assert [p.split("=")[0] for p in error.value.problems] == [
        "volume.file_system_id",
        "namespace",
        "storage_class_name",
        "volume_name",
        "claim_name",
    ]
    assert "claim_name='EFS Claim': a DNS-1123 subdomain" in str(error.value)


def test_chart_refuses_what_is_not_a_volume_source():
    with pytest.raises(ConfigurationError, match="volume='fs-0123456789abcdef0': an EfsVolumeSource"):
        EfsVolumeChart(volume=FILE_SYSTEM_ID)


# --- The chart -------------------------------------------------------------------------------------------------


def chart_objects(volume=VOLUME, **props):
    chart = EfsVolumeChart(volume=volume, **props)
    return chart, {(o["kind"], o["metadata"]["name"]): o for o in chart.manifests()}


def test_chart_objects_are_the_workshop_storage_class_volume_and_claim():
    chart, found = chart_objects()
    assert set(found) == {
        ("StorageClass", "efs-sc"),
        ("PersistentVolume", "efs-pv"),
        ("PersistentVolumeClaim", "efs-sc-claim"),
    }
    assert chart.claim_name == "efs-sc-claim"
    storage_class = found["StorageClass", "efs-sc"]
    assert storage_class["provisioner"] == "efs.csi.aws.com"
    assert storage_class["parameters"] == {
        "provisioningMode": "efs-ap",
        "fileSystemId": FILE_SYSTEM_ID,
        "directoryPerms": "700",
    }
    assert storage_class["reclaimPolicy"] == "Retain"
    assert "namespace" not in storage_class["metadata"]

    volume = found["PersistentVolume", "efs-pv"]
    assert "namespace" not in volume["metadata"]
    spec = volume["spec"]
    assert spec["accessModes"] == ["ReadWriteMany"]
    assert spec["persistentVolumeReclaimPolicy"] == "Retain"
    assert spec["storageClassName"] == "efs-sc"
    assert spec["capacity"] == {"storage": "5Gi"}
    assert spec["csi"] == {
        "driver": "efs.csi.aws.com",
        "volumeHandle": FILE_SYSTEM_ID,
        "volumeAttributes": {"encryptInTransit": "true"},
    }
    assert spec["claimRef"] == {"namespace": "training", "name": "efs-sc-claim"}

    claim = found["PersistentVolumeClaim", "efs-sc-claim"]
    assert claim["metadata"]["namespace"] == "training"
    assert claim["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "storageClassName": "efs-sc",
        "volumeName": "efs-pv",
        "resources": {"requests": {"storage": CLAIM_REQUEST}},
    }
    assert all(o["metadata"]["labels"]["app.kubernetes.io/part-of"] == "trainium-eks" for o in found.values())


def test_chart_names_and_namespace_follow_the_settings():
    chart, found = chart_objects(namespace="research", storage_class_name="shared", volume_name="v", claim_name="c")
    assert set(found) == {("StorageClass", "shared"), ("PersistentVolume", "v"), ("PersistentVolumeClaim", "c")}
    assert chart.claim_name == "c"
    assert found["PersistentVolume", "v"]["spec"]["claimRef"] == {"namespace": "research", "name": "c"}
    assert found["PersistentVolume", "v"]["spec"]["storageClassName"] == "shared"
    assert found["PersistentVolumeClaim", "c"]["spec"]["volumeName"] == "v"
    assert found["PersistentVolumeClaim", "c"]["metadata"]["namespace"] == "research"


def test_chart_takes_the_file_system_id_token_of_the_construct():
    stack, _, _, storage = storage_stack()
    _, found = chart_objects(storage.volume_source)
    handle = found["PersistentVolume", "efs-pv"]["spec"]["csi"]["volumeHandle"]
    assert stack.resolve(handle) == {"Ref": logical_id(stack, storage.file_system)}
    assert stack.resolve(found["StorageClass", "efs-sc"]["parameters"]["fileSystemId"]) == stack.resolve(handle)


@pytest.mark.parametrize("version", versions.KUBERNETES_VERSIONS)
def test_chart_validates_strictly_for_every_supported_kubernetes_version(version, tmp_path):
    chart, _ = chart_objects()
    validate_objects(chart.manifests(), tmp_path, k8s_version=version)

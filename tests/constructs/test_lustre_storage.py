"""LustreStorage: the FSx for Lustre file system, its security group rules, sizes and data repository."""

import json

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_s3 as s3

from tests.support.apps import BUCKET_CONTEXT, default_template, new_app, only, resources_of
from trainium_eks.constructs.lustre_storage import LustreStorage
from trainium_eks.core.validation import ConfigurationError


def test_file_system_is_persistent_2_lustre_2_15_lz4_in_the_accelerated_subnet_and_retained(template):
    file_system = only(template, "AWS::FSx::FileSystem")
    assert file_system["DeletionPolicy"] == "Retain" and file_system["UpdateReplacePolicy"] == "Retain"
    props = file_system["Properties"]
    assert props["FileSystemType"] == "LUSTRE"
    assert props["FileSystemTypeVersion"] == "2.15"
    assert props["StorageCapacity"] == 1200
    assert props["LustreConfiguration"]["DeploymentType"] == "PERSISTENT_2"
    assert props["LustreConfiguration"]["DataCompressionType"] == "LZ4"
    assert props["LustreConfiguration"]["PerUnitStorageThroughput"] == 250
    assert props["LustreConfiguration"]["AutomaticBackupRetentionDays"] == 7
    (subnet,) = props["SubnetIds"]
    assert "Accelerated" in subnet["Ref"]


def test_lustre_storage_context_sets_the_size():
    props = only(default_template(lustreStorageGiB="4800"), "AWS::FSx::FileSystem")["Properties"]
    assert props["StorageCapacity"] == 4800


def lustre_rules(template):
    groups = resources_of(template, "AWS::EC2::SecurityGroup")
    fsx_sg = next(k for k, v in groups.items() if v["Properties"]["GroupDescription"].startswith("FSx for Lustre"))
    rules = [
        r["Properties"]
        for r in resources_of(template, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == {"Fn::GetAtt": [fsx_sg, "GroupId"]}
    ]
    return fsx_sg, rules


def test_lustre_security_group_allows_988_and_1018_to_1023_from_itself_and_both_node_groups(template):
    fsx_sg, rules = lustre_rules(template)
    node_sg = next(
        k
        for k, v in resources_of(template, "AWS::EC2::SecurityGroup").items()
        if v["Properties"]["GroupDescription"].startswith("Accelerated nodes")
    )
    self_rules = [r for r in rules if r["SourceSecurityGroupId"] == {"Fn::GetAtt": [fsx_sg, "GroupId"]}]
    assert [(r["FromPort"], r["ToPort"]) for r in self_rules] == [(988, 1023)], "servers reach each other"
    node_ports = sorted(
        (r["FromPort"], r["ToPort"])
        for r in rules
        if r["SourceSecurityGroupId"] == {"Fn::GetAtt": [node_sg, "GroupId"]}
    )
    assert node_ports == [(988, 988), (1018, 1023)]
    cluster_sg_ports = sorted(
        (r["FromPort"], r["ToPort"])
        for r in rules
        if "ClusterSecurityGroupId" in json.dumps(r["SourceSecurityGroupId"])
    )
    assert cluster_sg_ports == [(988, 988), (1018, 1023)], "system nodes (TensorBoard, staging) mount it too"
    assert all(r["IpProtocol"] == "tcp" for r in rules)


def test_the_file_system_is_created_after_its_self_rule_and_not_after_the_clients_rules(template):
    """FSx refuses CreateFileSystem unless the group admits LNET from itself (InvalidNetworkSettings); the clients'
    rules need not exist yet, and waiting for the cluster's would hold the file system back until the cluster is up."""
    fsx_sg, _ = lustre_rules(template)
    ingress = resources_of(template, "AWS::EC2::SecurityGroupIngress")
    own = {
        logical_id
        for logical_id, rule in ingress.items()
        if rule["Properties"]["GroupId"]
        == rule["Properties"].get("SourceSecurityGroupId")
        == {"Fn::GetAtt": [fsx_sg, "GroupId"]}
    }
    assert len(own) == 1
    depends = set(only(template, "AWS::FSx::FileSystem").get("DependsOn", []))
    assert own <= depends
    assert not (depends & (set(ingress) - own)), "no client rule holds the file system back"
    assert not any("Cluster" in d for d in depends)


def test_no_data_repository_association_without_a_bucket(template):
    template.resource_count_is("AWS::FSx::DataRepositoryAssociation", 0)


def test_data_bucket_is_imported_and_nothing_is_exported_by_default():
    template = default_template(**BUCKET_CONTEXT)
    association = only(template, "AWS::FSx::DataRepositoryAssociation")
    assert association["DeletionPolicy"] == "Retain"
    props = association["Properties"]
    assert props["DataRepositoryPath"] == "s3://my-training-data/"
    assert props["FileSystemPath"] == "/bucket"
    assert props["BatchImportMetaDataOnCreate"] is True
    assert props["S3"] == {
        "AutoImportPolicy": {"Events": ["NEW", "CHANGED", "DELETED"]},
        "AutoExportPolicy": {"Events": []},
    }, "import only, said explicitly: an update of an association that exported turns its export off"


def test_an_export_prefix_gets_its_own_association_that_exports_new_and_changed_files_only():
    template = default_template(**BUCKET_CONTEXT, dataBucketPrefix="datasets/", dataExportPrefix="runs/")
    associations = {
        r["Properties"]["FileSystemPath"]: r
        for r in resources_of(template, "AWS::FSx::DataRepositoryAssociation").values()
    }
    assert set(associations) == {"/bucket", "/export"}
    imported, exported = associations["/bucket"], associations["/export"]
    assert imported["Properties"]["DataRepositoryPath"] == "s3://my-training-data/datasets/"
    assert imported["Properties"]["S3"]["AutoExportPolicy"] == {"Events": []}
    assert exported["Properties"]["DataRepositoryPath"] == "s3://my-training-data/runs/"
    assert exported["Properties"]["S3"] == {
        "AutoImportPolicy": {"Events": ["NEW", "CHANGED", "DELETED"]},
        "AutoExportPolicy": {"Events": ["NEW", "CHANGED"]},
    }, "a deletion on the file system never deletes an object"
    assert exported["DeletionPolicy"] == "Retain"


@pytest.mark.parametrize(
    "props, problem",
    [
        ({"export_prefix": "runs/"}, "export_prefix='runs/': a prefix outside the imported one (the whole bucket;"),
        (
            {"data_bucket_prefix": "data/", "export_prefix": "data/runs/"},
            "export_prefix='data/runs/': a prefix outside",
        ),
        ({"data_bucket_prefix": "data/runs/", "export_prefix": "data/"}, "export_prefix='data/': a prefix outside"),
        ({"data_bucket_prefix": "data/", "export_prefix": "data/"}, "export_prefix='data/': a prefix outside"),
        ({"data_bucket_prefix": "data", "export_prefix": "runs/"}, "data_bucket_prefix='data': a key prefix in the"),
        ({"data_bucket_prefix": "data/", "export_prefix": "runs"}, "export_prefix='runs': a key prefix in the bucket"),
        ({"data_bucket_prefix": "data/*/", "export_prefix": "runs/"}, "data_bucket_prefix='data/*/': a key prefix"),
        ({"data_bucket_prefix": "data/", "export_prefix": ""}, "export_prefix='': a key prefix in the bucket"),
        (
            {"data_bucket_prefix": "data/", "export_prefix": "runs/", "export_path": "/bucket/runs"},
            "export_path='/bucket/runs': a path outside /bucket (FSx: two data repository associations",
        ),
        ({"data_bucket": None, "export_prefix": "runs/"}, "export_prefix='runs/': set only with a data bucket"),
    ],
)
def test_prefixes_and_paths_two_associations_cannot_share_are_refused(props, problem):
    stack = cdk.Stack(new_app(), "S")
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2)
    props = {"data_bucket": s3.Bucket(stack, "Bucket"), **props}
    with pytest.raises(ConfigurationError) as raised:
        LustreStorage(stack, "Fs", vpc=vpc, subnet=vpc.private_subnets[0], **props)
    (found,) = raised.value.problems
    assert found.startswith(problem)


def test_sibling_prefixes_that_share_their_first_letters_are_not_nested():
    stack = cdk.Stack(new_app(), "S")
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2)
    storage = LustreStorage(
        stack,
        "Fs",
        vpc=vpc,
        subnet=vpc.private_subnets[0],
        data_bucket=s3.Bucket(stack, "Bucket"),
        data_bucket_prefix="data/",
        export_prefix="data-runs/",
        export_path="/bucket-runs",
    )
    assert storage.export_path == "/bucket-runs" and storage.export_association is not None


def test_scratch_file_systems_take_no_throughput_and_no_backups():
    app = new_app()
    stack = cdk.Stack(app, "S")
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2)
    LustreStorage(
        stack,
        "Fs",
        vpc=vpc,
        subnet=vpc.private_subnets[0],
        storage_capacity_gib=2400,
        deployment_type=fsx.LustreDeploymentType.SCRATCH_2,
    )
    props = only(assertions.Template.from_stack(stack), "AWS::FSx::FileSystem")["Properties"]
    assert props["LustreConfiguration"]["DeploymentType"] == "SCRATCH_2"
    assert "PerUnitStorageThroughput" not in props["LustreConfiguration"]
    assert "AutomaticBackupRetentionDays" not in props["LustreConfiguration"]


def test_granting_the_csi_driver_of_a_cluster_without_it_says_how_to_install_it():
    stack = cdk.Stack(new_app(), "S")
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2)
    storage = LustreStorage(stack, "Fs", vpc=vpc, subnet=vpc.private_subnets[0])
    with pytest.raises(ConfigurationError) as raised:
        storage.grant_csi_driver(None)  # TrainingCluster(fsx_csi_driver=False).fsx_csi_driver_role
    (problem,) = raised.value.problems
    assert problem.startswith("role=None: the FSx CSI driver's IAM role") and "fsx_csi_driver=True" in problem


def test_a_named_client_has_rules_of_its_own_name_and_takes_no_position():
    stack = cdk.Stack(new_app(), "S")
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2)
    first, optional, late = (ec2.SecurityGroup(stack, name, vpc=vpc) for name in ("First", "Optional", "Late"))
    storage = LustreStorage(stack, "Fs", vpc=vpc, subnet=vpc.private_subnets[0], client_security_groups=[first])
    storage.allow_clients(optional, name="GpuNodes")
    storage.allow_clients(late)

    def group(construct):
        return json.dumps({"Fn::GetAtt": [stack.get_logical_id(construct.node.default_child), "GroupId"]})

    own = group(storage.security_group)
    rules = resources_of(assertions.Template.from_stack(stack), "AWS::EC2::SecurityGroupIngress")
    pairs = {}
    for lid, rule in rules.items():
        if not lid.startswith(("FsFrom", "FsTo")):
            continue  # the file system's own group admitting itself
        name = lid.removeprefix("Fs")[:-8].rsplit("Port", 1)[0]
        pairs.setdefault(name, set()).add(
            (json.dumps(rule["Properties"]["GroupId"]), json.dumps(rule["Properties"]["SourceSecurityGroupId"]))
        )
    expected = {}
    for name, client in (("Client0", first), ("GpuNodes", optional), ("Client1", late)):
        expected[f"From{name}"] = {(own, group(client))}
        expected[f"To{name}"] = {(group(client), own)}
    assert pairs == expected
    with pytest.raises(ConfigurationError, match=r"name='2nd'"):
        storage.allow_clients(late, name="2nd")


def test_a_clients_name_is_neither_a_positional_name_nor_one_taken():
    stack = cdk.Stack(new_app(), "S")
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2)
    first, second = (ec2.SecurityGroup(stack, name, vpc=vpc) for name in ("First", "Second"))
    storage = LustreStorage(stack, "Fs", vpc=vpc, subnet=vpc.private_subnets[0])
    storage.allow_clients(first, name="GpuNodes")
    with pytest.raises(ConfigurationError, match=r"name='GpuNodes': a name no other client of the file system has"):
        storage.allow_clients(second, name="GpuNodes")
    with pytest.raises(ConfigurationError, match=r"name='Client3': a name other than Client<n>"):
        storage.allow_clients(second, name="Client3")
    storage.allow_clients(second, name="Clients")


@pytest.mark.parametrize("size", [1200, 2400, 4800, 7200])
def test_allowed_persistent_2_sizes_synthesize(size):
    assert (
        only(default_template(lustreStorageGiB=size), "AWS::FSx::FileSystem")["Properties"]["StorageCapacity"] == size
    )

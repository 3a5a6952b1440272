"""TrainiumEksStack built from Python: its own defaults, where its props go, and its refusals before building."""

import aws_cdk as cdk
import pytest
from aws_cdk import assertions

from tests.support.apps import REPO, new_app, only, resources_of
from tests.support.manifests import job_manifests, node_pools, nodegroups, pool_requirements
from trainium_eks.constructs.efa_layout import EfaLayout
from trainium_eks.constructs.node_provisioning import NodeProvisioning
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.stacks.trainium_eks_stack import TrainiumEksStack

ENV = cdk.Environment(region="us-west-2", account="123456789012")


@pytest.fixture(scope="module")
def default():
    stack = TrainiumEksStack(new_app(), "Defaults", env=ENV)
    return stack, assertions.Template.from_stack(stack)


@pytest.fixture(scope="module")
def custom():
    stack = TrainiumEksStack(
        new_app(),
        "Custom",
        env=ENV,
        node_count=4,
        lustre_storage_gib=2400,
        data_bucket_name="my-training-data",
        efa_layout=EfaLayout.ALL_EFA,
        image_directory=str(REPO / "images" / "bert-pretrain"),
        provisioning=NodeProvisioning.NODE_GROUP,
    )
    return stack, assertions.Template.from_stack(stack)


def test_the_defaults_are_two_trn1_nodes_and_1200_gib_of_lustre_without_a_seed_run(default):
    stack, template = default
    assert stack.accelerated_nodes.instance.name == "trn1.32xlarge"
    assert stack.accelerated_nodes.efa_layout is EfaLayout.IP_OPTIMIZED
    assert list(nodegroups(template)) == ["system"], "Karpenter launches the Trainium nodes"
    pool = node_pools(template)["neuron"]["NodePool"]
    assert pool_requirements(pool)["node.kubernetes.io/instance-type"] == ["trn1.32xlarge"]
    assert pool["spec"]["limits"]["nodes"] == "2"
    assert stack.accelerated_nodes.topology.node_count == 2
    file_system = only(template, "AWS::FSx::FileSystem")
    assert file_system["Properties"]["StorageCapacity"] == 1200
    template.resource_count_is("AWS::FSx::DataRepositoryAssociation", 0)
    assert stack.seed_jobs is None and job_manifests(template) == {}, "no image_directory, no seed run"
    (fsx_id,) = resources_of(template, "AWS::FSx::FileSystem")
    assert template.to_json()["Outputs"]["FileSystemId"] == {"Value": {"Ref": fsx_id}}
    assert [line.component for line in stack.cost_lines][-2:] == ["FSx for Lustre", "Trainium nodes"]


def test_props_reach_the_node_group_the_file_system_its_bucket_and_the_seed_run(custom):
    stack, template = custom
    assert nodegroups(template)["neuron"]["ScalingConfig"] == {"MinSize": 4, "DesiredSize": 4, "MaxSize": 4}
    assert only(template, "AWS::FSx::FileSystem")["Properties"]["StorageCapacity"] == 2400
    association = only(template, "AWS::FSx::DataRepositoryAssociation")["Properties"]
    assert association["DataRepositoryPath"] == "s3://my-training-data/"
    (launch,) = [
        r["Properties"]["LaunchTemplateData"]
        for r in resources_of(template, "AWS::EC2::LaunchTemplate").values()
        if r["Properties"]["LaunchTemplateData"].get("InstanceType") == "trn1.32xlarge"
    ]
    interfaces = [(i["DeviceIndex"], i["InterfaceType"]) for i in launch["NetworkInterfaces"]]
    assert interfaces == [(0, "efa")] + [(1, "efa")] * 7, "EfaLayout.ALL_EFA: an EFA with ENA on every card"
    checks = {"PrecompileFabricCheck", "TrainingFabricCheck"}
    assert set(job_manifests(template)) == {"Staging", "Precompile", "Training"} | checks
    claim = stack.addons.volume_chart.claim_name
    topology = stack.accelerated_nodes.topology
    assert claim in topology.shared_claims, "the accelerated nodes reach the Lustre claim"
    staging = job_manifests(template)["Staging"]["spec"]["template"]["spec"]
    assert staging["nodeSelector"] == {"node.kubernetes.io/instance-type": "m7i.xlarge"}, "staged on the system nodes"
    assert staging["tolerations"] == []
    for job in (stack.seed_jobs.precompile, stack.seed_jobs.training):
        assert job.workload.node_group == topology and job.nodes == 4
        assert job.workload.volumes == {claim: "/data"}


def test_every_problem_of_the_stacks_own_props_is_named_by_its_prop_before_anything_is_built():
    app = new_app()
    with pytest.raises(ConfigurationError) as raised:
        TrainiumEksStack(
            app,
            "Bad",
            env=ENV,
            node_count=0,
            lustre_storage_gib=1000,
            efa_layout="fast",
            data_bucket_name="Bad_Bucket",
        )
    assert [problem.split(": ", 1)[0] for problem in raised.value.problems] == [
        "node_count=0",
        "lustre_storage_gib=1000",
        "efa_layout='fast'",
        "data_bucket_name='Bad_Bucket'",
    ], "lustre_storage_gib, not the storage construct's storage_capacity_gib"
    assert raised.value.problems[3].startswith("data_bucket_name='Bad_Bucket': the name of an existing S3 bucket: ")
    assert app.node.find_child("Bad").node.children == [], "nothing is built from refused settings"


def test_the_lustre_size_takes_the_name_the_app_gives_it():
    with pytest.raises(ConfigurationError) as raised:
        TrainiumEksStack(
            new_app(), "Named", env=ENV, lustre_storage_gib=3600, setting_names={"lustre_storage_gib": "lustreSize"}
        )
    (problem,) = raised.value.problems
    assert problem.startswith("lustreSize=3600: PERSISTENT_2 allows 1200, 2400 or a multiple of 2400 GiB")


@pytest.mark.parametrize(
    "props, says",
    [
        (
            {"instance_type": "TRN1.32XLARGE"},
            "instance_type='TRN1.32XLARGE': an instance type of the catalog (did you mean 'trn1.32xlarge'?)",
        ),
        ({"availability_zone_id": "us-west-2a"}, "'us-west-2a' is an AZ name, which maps to a different zone in each"),
    ],
)
def test_a_refusal_says_the_value_a_near_miss_meant(props, says):
    with pytest.raises(ConfigurationError) as raised:
        TrainiumEksStack(new_app(), "Near", env=ENV, **props)
    assert any(says in problem for problem in raised.value.problems), raised.value.problems

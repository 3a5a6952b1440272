"""Every bad setting of the default app stops synth with one error naming the setting, the value and what is allowed."""

import pytest

from tests.conftest import build_default_app
from trainium_eks.validation import ConfigurationError


def problems_of(**context):
    with pytest.raises(ConfigurationError) as raised:
        build_default_app(**context)
    return raised.value.problems


def test_unknown_instance_type():
    (problem,) = problems_of(instanceType="trn9.huge")
    assert problem.startswith("instanceType='trn9.huge': unknown instance type; supported: trn1.2xlarge, trn1.32xlarge")


def test_more_than_one_node_without_efa():
    (problem,) = problems_of(instanceType="trn1.2xlarge", nodeCount="2")
    assert problem.startswith("nodeCount=2: trn1.2xlarge has no EFA")
    assert "trn1.32xlarge" in problem


@pytest.mark.parametrize("count", ["0", "-1", "451"])
def test_node_count_out_of_range(count):
    (problem,) = problems_of(nodeCount=count)
    assert problem == (
        f"nodeCount={int(count)}: an integer from 1 to 450 (the EKS limit of 450 nodes per managed node group)"
    )


def test_node_count_that_is_not_a_number():
    (problem,) = problems_of(nodeCount="two")
    assert problem == "nodeCount='two': a whole number"


def test_az_id_of_another_region():
    (problem,) = problems_of(trainiumAzId="use1-az6")
    assert problem.startswith("trainiumAzId='use1-az6': an AZ ID of region us-west-2: usw2-az1, usw2-az2")


def test_az_id_that_does_not_exist():
    (problem,) = problems_of(trainiumAzId="usw2-az9")
    assert problem.startswith("trainiumAzId='usw2-az9': an AZ ID of region us-west-2")


def test_az_id_that_does_not_offer_the_instance_type():
    (problem,) = problems_of(trainiumAzId="usw2-az1")
    assert problem == "trainiumAzId='usw2-az1': trn1.32xlarge is not offered there; it is offered in usw2-az3, usw2-az4"


def test_region_that_does_not_offer_the_instance_type():
    (problem,) = problems_of(instanceType="trn2.48xlarge")
    assert problem == (
        "trainiumAzId='usw2-az4': trn2.48xlarge is not offered there; it is offered in regions us-east-2, ap-south-2"
    )


@pytest.mark.parametrize("size", ["1000", "3600", "2401"])
def test_lustre_size_fsx_does_not_allow(size):
    (problem,) = problems_of(lustreStorageGiB=size)
    assert problem.startswith(f"lustreStorageGiB={int(size)}: PERSISTENT_2 allows 1200, 2400 or a multiple of 2400 GiB")


def test_throughput_not_allowed_for_the_deployment_type():
    from aws_cdk import aws_fsx as fsx

    from trainium_eks.constructs.lustre_storage import check_lustre_settings
    from trainium_eks.validation import Problems

    problems = Problems("test")
    check_lustre_settings(problems, storage_capacity_gib=1200, throughput_per_tib=200)
    check_lustre_settings(
        problems,
        storage_capacity_gib=1200,
        deployment_type=fsx.LustreDeploymentType.PERSISTENT_1,
        throughput_per_tib=125,
    )
    assert list(problems) == [
        "throughput_per_tib=200: PERSISTENT_2 allows 125, 250, 500, 1000 MB/s/TiB",
        "throughput_per_tib=125: PERSISTENT_1 allows 50, 100, 200 MB/s/TiB",
    ]


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws:iam::123456789012:user/alice",
        "arn:aws:sts::123456789012:assumed-role/Admin/alice",
        "arn:aws:iam::12345:role/Admin",
        "Admin",
    ],
)
def test_admin_role_arn_that_is_not_an_iam_role_arn(arn):
    (problem,) = problems_of(adminRoleArn=arn)
    assert problem.startswith(f"adminRoleArn={arn!r}: an IAM role ARN such as arn:aws:iam::123456789012:role/Admin")


def test_unsupported_kubernetes_version():
    (problem,) = problems_of(kubernetesVersion="1.29")
    assert problem.startswith("kubernetesVersion='1.29': one of 1.34, 1.35, 1.36")


def test_all_problems_are_reported_at_once():
    with pytest.raises(ConfigurationError) as raised:
        build_default_app(instanceType="trn1.2xlarge", nodeCount="3", lustreStorageGiB="1000", adminRoleArn="x")
    message = str(raised.value)
    assert message.startswith("TrainiumEks: 3 configuration problems:")
    for setting in ("nodeCount=3", "lustreStorageGiB=1000", "adminRoleArn='x'"):
        assert setting in message


def test_accepted_role_arn_forms():
    for arn in ("arn:aws:iam::123456789012:role/Admin", "arn:aws-cn:iam::123456789012:role/path/to/Admin"):
        build_default_app(adminRoleArn=arn)


def test_data_bucket_name_that_s3_does_not_allow():
    (problem,) = problems_of(dataBucketName="My_Bucket")
    assert problem.startswith("dataBucketName='My_Bucket': the name of an existing S3 bucket")


def test_lustre_storage_construct_refuses_a_throughput_and_size_together():
    import aws_cdk as cdk
    from aws_cdk import aws_ec2 as ec2

    from tests.conftest import new_app
    from trainium_eks.constructs.lustre_storage import LustreStorage

    stack = cdk.Stack(new_app(), "S")
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2)
    with pytest.raises(ConfigurationError) as raised:
        LustreStorage(
            stack, "Fs", vpc=vpc, subnet=vpc.private_subnets[0], storage_capacity_gib=3000, throughput_per_tib=200
        )
    assert raised.value.problems == [
        "storage_capacity_gib=3000: PERSISTENT_2 allows 1200, 2400 or a multiple of 2400 GiB (nearest: 2400 or 4800)",
        "throughput_per_tib=200: PERSISTENT_2 allows 125, 250, 500, 1000 MB/s/TiB",
    ]

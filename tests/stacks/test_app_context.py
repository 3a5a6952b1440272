"""Every bad setting of the default app stops synth with one error naming the setting, the value and what is allowed."""

import aws_cdk as cdk
import pytest

from tests.support.apps import REPO, build_default_app, build_default_stack, new_app
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.stacks.app_context import AZ_KEYS, STACKS, settings_from_context
from trainium_eks.stacks.trainium_eks_stack import TrainiumEksStack


def problems_of(**context):
    with pytest.raises(ConfigurationError) as raised:
        build_default_app(**context)
    return raised.value.problems


def test_unknown_instance_type():
    (problem,) = problems_of(instanceType="trn9.huge")
    assert problem.startswith("instanceType='trn9.huge': an instance type of the catalog: trn1.2xlarge, trn1.32xlarge")


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
    assert problem == "nodeCount='two': a whole number (such as 4)"


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
    from trainium_eks.core.validation import Problems

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
        "arn:aws:sts::123456789012:assumed-role/Admin/alice",
        "arn:aws:iam::12345:role/Admin",
        "Admin",
        "arn:aws:iam::123456789012:role/Admin\n",
        " arn:aws:iam::123456789012:role/Admin",
        "arn:aws:iam::123456789012:role/Admin extra",
    ],
)
def test_admin_role_arn_that_is_not_an_iam_role_or_user_arn(arn):
    (problem,) = problems_of(adminRoleArn=arn)
    assert problem.startswith(f"adminRoleArn={arn!r}: ")
    assert "IAM role ARN with its path" in problem or "surrounding spaces" in problem


def test_admin_role_arn_of_another_partition():
    (problem,) = problems_of(adminRoleArn="arn:aws-cn:iam::123456789012:role/Admin")
    assert problem.endswith("an ARN of partition aws, the partition of region us-west-2")


def test_unsupported_kubernetes_version():
    (problem,) = problems_of(kubernetesVersion="1.29")
    assert problem.startswith("kubernetesVersion='1.29': one of 1.34, 1.35, 1.36")


def test_all_problems_are_reported_at_once():
    with pytest.raises(ConfigurationError) as raised:
        build_default_app(instanceType="trn1.2xlarge", nodeCount="3", lustreStorageGiB="1000", trainiumAzId="use1-az6")
    message = str(raised.value)
    assert message.startswith("TrainiumEks: 3 configuration problems:")
    for setting in ("nodeCount=3", "lustreStorageGiB=1000", "trainiumAzId='use1-az6'"):
        assert setting in message


def test_problems_of_the_context_and_of_unparsable_values_are_reported_together():
    with pytest.raises(ConfigurationError) as raised:
        build_default_app(nodeCount="two", adminRoleArn="x", dataBucketName="Bad_Bucket", kubernetesVersion=1.35)
    assert sorted(problem.split("=")[0] for problem in raised.value.problems) == [
        "adminRoleArn",
        "dataBucketName",
        "kubernetesVersion",
        "nodeCount",
    ]


def test_accepted_admin_arn_forms():
    for arn in (
        "arn:aws:iam::123456789012:role/Admin",
        "arn:aws:iam::123456789012:role/aws-reserved/sso.amazonaws.com/us-west-2/AWSReservedSSO_Admin_0123456789abcdef",
        "arn:aws:iam::123456789012:user/alice",
    ):
        build_default_app(adminRoleArn=arn)


def test_data_bucket_name_that_s3_does_not_allow():
    (problem,) = problems_of(dataBucketName="My_Bucket")
    assert problem.startswith("dataBucketName='My_Bucket': the name of an existing S3 bucket")


@pytest.mark.parametrize(
    "context, problem",
    [
        ({"dataExportPrefix": "runs/"}, "dataExportPrefix='runs/': set only with a data bucket"),
        (
            {"dataBucketName": "my-training-data", "dataExportPrefix": "runs/"},
            "dataExportPrefix='runs/': a prefix outside the imported one (the whole bucket;",
        ),
        (
            {"dataBucketName": "my-training-data", "dataBucketPrefix": "/datasets"},
            "dataBucketPrefix='/datasets': a key prefix in the bucket",
        ),
    ],
)
def test_data_bucket_prefixes_the_file_system_cannot_link_are_refused_naming_the_key(context, problem):
    (found,) = problems_of(**context)
    assert found.startswith(problem)


def test_lustre_storage_construct_refuses_a_throughput_and_size_together():
    import aws_cdk as cdk
    from aws_cdk import aws_ec2 as ec2

    from tests.support.apps import new_app
    from trainium_eks.constructs.lustre_storage import LustreStorage

    stack = cdk.Stack(new_app(), "S")
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2)
    with pytest.raises(ConfigurationError) as raised:
        LustreStorage(
            stack, "Fs", vpc=vpc, subnet=vpc.private_subnets[0], storage_capacity_gib=3000, throughput_per_tib=200
        )
    assert raised.value.problems == [
        "storage_capacity_gib=3000: PERSISTENT_2 allows 1200, 2400 or a multiple of 2400 GiB up to 2147483647 "
        "(nearest: 2400 or 4800)",
        "throughput_per_tib=200: PERSISTENT_2 allows 125, 250, 500, 1000 MB/s/TiB",
    ]


@pytest.mark.parametrize(
    "key,suggested",
    [
        ("nodecount", "nodeCount"),
        ("instance_type", "instanceType"),
        ("trainiumAZId", "trainiumAzId"),
        ("regoin", "region"),
    ],
)
def test_an_unknown_key_is_refused_with_the_nearest_known_key(key, suggested):
    problems = problems_of(**{key: "4"})
    (problem,) = [problem for problem in problems if problem.startswith(f"{key}=")]
    assert problem.startswith(f"{key}='4': not a setting of the default app (did you mean {suggested!r}?); the keys ")


def test_cdk_feature_flags_and_cli_keys_are_not_settings_to_check():
    build_default_app(**{"@aws-cdk/core:newStyleStackSynthesis": True, "aws:cdk:enable-path-metadata": True})


@pytest.mark.parametrize(
    "key,value",
    [
        ("instanceType", True),
        ("instanceType", 32),
        ("trainiumAzId", ["usw2-az4"]),
        ("kubernetesVersion", 1.36),
        ("kubernetesVersion", {"minor": 36}),
        ("nodeCount", True),
        ("nodeCount", 2.5),
        ("nodeCount", [2]),
        ("lustreStorageGiB", "1200GiB"),
        ("dataBucketName", 7),
        ("adminRoleArn", False),
        ("account", 123456789012),
        ("region", None),
    ],
)
def test_a_value_of_the_wrong_json_type_is_refused_naming_the_key(key, value):
    problems = problems_of(**{key: value})
    assert any(problem.startswith(f"{key}=") for problem in problems), problems


@pytest.mark.parametrize(
    "region,hint",
    [
        ("US-WEST-2", " (did you mean 'us-west-2'?)"),
        ("us-west-2a", " (did you mean 'us-west-2'?)"),
        ("moon-base-1", ""),
    ],
)
def test_region_is_checked_first_and_named_as_region(region, hint):
    (problem,) = problems_of(region=region)
    assert problem.startswith(
        f"region={region!r}: a region the library knows the AZ IDs of (synth makes no lookups){hint}: "
    )
    assert "us-west-2" in problem and "trainiumAzId" not in problem


@pytest.mark.parametrize("account", ["12345678901", "1234567890123", "12345678901a", "123456789012\n"])
def test_account_is_twelve_digits(account):
    (problem,) = problems_of(account=account)
    assert problem.startswith(f"account={account!r}: 12 digits")


@pytest.mark.parametrize(
    "name,reason",
    [
        ("ab", "3-63 lowercase"),
        ("a" * 64, "3-63 lowercase"),
        ("My-Bucket", "3-63 lowercase"),
        ("my bucket", "3-63 lowercase"),
        ("-bucket", "3-63 lowercase"),
        ("bucket.", "3-63 lowercase"),
        ("my..bucket", "no two adjacent dots"),
        ("192.168.5.4", "not formatted as an IP address"),
        ("xn--bucket", "S3 reserves 'xn--'"),
        ("sthree-bucket", "S3 reserves 'sthree-'"),
        ("bucket-s3alias", "S3 reserves '-s3alias'"),
        ("bucket--ol-s3", "S3 reserves '--ol-s3'"),
    ],
)
def test_data_bucket_name_follows_every_s3_naming_rule(name, reason):
    (problem,) = problems_of(dataBucketName=name)
    assert problem.startswith(f"dataBucketName={name!r}: the name of an existing S3 bucket: {reason}")


def test_lustre_storage_has_fsx_upper_bound():
    (problem,) = problems_of(lustreStorageGiB=str(2_147_483_647 + 2400 - 2_147_483_647 % 2400))
    assert "up to 2147483647" in problem


README_INSTANCE_TYPES = ["trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge", "trn1.2xlarge", "p4d.24xlarge"]
README_INSTANCE_TYPES += ["p5.48xlarge", "m7i.xlarge", "m6i.xlarge", "m5.xlarge"]


@pytest.mark.parametrize("instance_type", README_INSTANCE_TYPES)
def test_every_instance_type_synthesizes_or_is_refused_naming_instance_type(instance_type):
    """With the defaults otherwise: a type either synthesizes, or the message blames instanceType (or what the type
    needs besides: one node without EFA, an AZ that offers it), in the user's terms."""
    try:
        build_default_app(instanceType=instance_type)
    except ConfigurationError as error:
        keys = {problem.split("=")[0] for problem in error.problems}
        assert keys <= {"instanceType", "nodeCount", "trainiumAzId"}, error.problems
        assert "precompile" not in str(error) and "processes_per_node" not in str(error)


def test_the_training_stack_itself_refuses_a_gpu_type_for_its_neuron_seed_run_and_takes_it_without():
    images = str(REPO / "images" / "bert-pretrain")
    env = cdk.Environment(region="us-east-1")
    with pytest.raises(ConfigurationError) as raised:
        TrainiumEksStack(
            new_app(),
            "Seed",
            env=env,
            instance_type="p5.48xlarge",
            availability_zone_id="use1-az6",
            image_directory=images,
        )
    (problem,) = raised.value.problems
    assert problem.startswith(
        "instance_type='p5.48xlarge': the seed jobs pre-compile and train BERT with the Neuron SDK"
    )
    stack = TrainiumEksStack(
        new_app(), "Own", env=env, instance_type="p5.48xlarge", availability_zone_id="use1-az6", seed_jobs=False
    )
    assert stack.accelerated_nodes.instance.name == "p5.48xlarge"


@pytest.mark.parametrize(
    "region,az_id", [("us-west-2", "usw2-az4"), ("us-east-1", "use1-az6"), ("us-east-2", "use2-az3")]
)
def test_region_alone_is_enough_every_stack_takes_the_regions_trainium_az(region, az_id):
    """Except where the catalog knows the Trainium AZ does not offer a stack's default types: usw2-az4 has no g5."""
    settings = settings_from_context(new_app(region=region).node)
    expected = dict.fromkeys(STACKS, az_id)
    if region == "us-west-2":
        expected["ComposerTraining"] = "usw2-az3"
    assert {stack: settings.props[stack]["availability_zone_id"] for stack in STACKS} == expected
    _, stack = build_default_app(region=region)
    assert stack.props.availability_zone_id == az_id


def test_a_stack_keeps_its_default_types_az_when_another_type_is_offered_there():
    settings = settings_from_context(new_app(composerInstanceType="g6.xlarge").node)
    assert settings.props["ComposerTraining"]["availability_zone_id"] == "usw2-az3", "no move: az3 offers g6 too"
    settings = settings_from_context(new_app(kubeflowAcceleratedType="g5.12xlarge").node)
    assert settings.props["KubeflowTraining"]["availability_zone_id"] == "usw2-az3", "usw2-az4 offers no g5"


def test_a_region_without_a_default_az_asks_for_each_built_stacks_az_key_naming_its_az_ids():
    found = problems_of(region="eu-west-1", stacks="TrainiumEks,ComposerTraining")
    assert [problem.split("=")[0] for problem in found] == ["trainiumAzId", "composerAzId"]
    assert all("in eu-west-1, one of euw1-az1, euw1-az2, euw1-az3" in problem for problem in found), found
    assert all("describe-instance-type-offerings" in problem for problem in found)


def test_provisioning_is_karpenter_or_node_group():
    (problem,) = problems_of(provisioning="fargate")
    assert problem == "provisioning='fargate': one of karpenter, node-group"
    settings = settings_from_context(new_app(provisioning="node-group", idleMinutes="").node)
    assert settings.props["TrainiumEks"]["provisioning"].value == "node-group"


@pytest.mark.parametrize(
    ("minutes", "allowed"), [("0", "from 1 minute to 24 hours"), ("1441", "from 1 minute to 24 hours")]
)
def test_idle_minutes_out_of_range(minutes, allowed):
    (problem,) = problems_of(idleMinutes=minutes)
    assert problem.startswith("idleMinutes=") and allowed in problem


def test_idle_minutes_with_node_groups_is_refused():
    (problem,) = problems_of(provisioning="node-group", idleMinutes="30")
    assert problem.startswith("idleMinutes=") and "provisioning node-group" in problem


def test_idle_minutes_reach_every_pool():
    _, stack = build_default_app(idleMinutes="30")
    assert stack.accelerated_nodes.idle_timeout.to_minutes() == 30


@pytest.mark.parametrize(("value", "expected"), [(True, True), ("true", True), (False, False), ("false", False)])
def test_preflight_is_true_or_false(value, expected):
    settings = settings_from_context(new_app(preflight=value).node)
    assert all(settings.props[stack]["preflight"] is expected for stack in settings.stacks)


def test_preflight_is_refused_unless_true_or_false():
    (problem,) = problems_of(preflight="yes")
    assert problem == "preflight='yes': true or false"


@pytest.mark.parametrize(
    "stack,key,value,nearest",
    [
        # a case or spacing variant of an allowed word
        ("TrainiumEks", "instanceType", "TRN1.32XLARGE", "'trn1.32xlarge'"),
        ("TrainiumEks", "instanceType", " trn1.32xlarge", "'trn1.32xlarge'"),
        ("ComposerTraining", "composerInstanceType", "G5.XLARGE", "'g5.xlarge'"),
        ("TrainiumEks", "trainiumAzId", "USW2-AZ4", "'usw2-az4'"),
        ("KubeflowTraining", "kubeflowAzId", "Usw2-Az4", "'usw2-az4'"),
        ("ComposerTraining", "composerAzId", "usw2_az4", "'usw2-az4'"),
        ("TrainiumEks", "provisioning", "Karpenter", "'karpenter'"),
        ("TrainiumEks", "provisioning", "node_group", "'node-group'"),
        ("TrainiumEks", "preflight", "True", "'true'"),
        ("TrainiumEks", "stacks", "trainiumeks", "'TrainiumEks'"),
        ("TrainiumEks", "region", "US-West-2", "'us-west-2'"),
        ("TrainiumEks", "kubernetesVersion", "v1.36", "'1.36'"),
        # a number where a string goes
        ("TrainiumEks", "kubernetesVersion", 1.36, "'1.36'"),
        ("TrainiumEks", "dataBucketName", 20261201, "'20261201'"),
        # a numeric string where a whole number goes
        ("TrainiumEks", "nodeCount", "4.0", "4"),
        ("TrainiumEks", "lustreStorageGiB", "2400.0", "2400"),
        ("TrainiumEks", "idleMinutes", "10.0", "10"),
        ("KubeflowTraining", "kubeflowCpuNodes", "6.0", "6"),
        ("ComposerTraining", "composerNodeCount", "1.0", "1"),
    ],
)
def test_a_near_miss_of_a_setting_is_refused_naming_the_key_what_is_allowed_and_the_value_it_means(
    stack, key, value, nearest
):
    context = {key: value} if key == "stacks" else {key: value, "stacks": stack}
    with pytest.raises(ConfigurationError) as raised:
        build_default_stack(stack, **context) if key != "stacks" else build_default_app(**context)
    (problem,) = raised.value.problems
    named, allowed = problem.split(": ", 1)
    assert named == f"{key}={value!r}"
    assert f"(did you mean {nearest}?)" in allowed
    assert allowed.split(" (did you mean")[0].strip(), problem


@pytest.mark.parametrize("stack,key", [(stack, key) for stack, key in AZ_KEYS.items()])
def test_an_az_name_where_an_az_id_goes_names_the_id_format_and_the_command_that_lists_them(stack, key):
    with pytest.raises(ConfigurationError) as raised:
        build_default_stack(stack, **{key: "us-west-2b"})
    (problem,) = raised.value.problems
    assert problem.startswith(f"{key}='us-west-2b': an AZ ID of region us-west-2: usw2-az1, ")
    assert "(such as usw2-az4)" in problem and "aws ec2 describe-availability-zones --region us-west-2" in problem


def test_network_policy_mode_is_strict_or_standard_and_strict_when_unset():
    (problem,) = problems_of(networkPolicyMode="default")
    assert problem == "networkPolicyMode='default': one of strict, standard"
    assert (
        settings_from_context(new_app(networkPolicyMode="standard").node).props["ComposerTraining"][
            "network_policy_mode"
        ]
        == "standard"
    )
    assert settings_from_context(new_app().node).props["TrainiumEks"].get("network_policy_mode", "strict") == "strict"


def test_dns_firewall_is_block_alert_or_off():
    (problem,) = problems_of(dnsFirewall="deny")
    assert problem == "dnsFirewall='deny': one of block, alert, off"
    settings = settings_from_context(new_app(dnsFirewall="alert").node)
    assert settings.props["KubeflowTraining"]["dns_firewall"].value == "alert"


@pytest.mark.parametrize(
    "value,parsed",
    [
        ("data.example.com, *.hf.co", ("data.example.com", "*.hf.co")),
        (["Data.Example.com"], ("data.example.com",)),
    ],
)
def test_dns_allowed_domains_are_a_comma_separated_string_or_a_list(value, parsed):
    settings = settings_from_context(new_app(dnsAllowedDomains=value).node)
    assert settings.props["ComposerTraining"]["dns_allowed_domains"] == parsed


def test_a_dns_allowed_domain_a_domain_list_refuses_is_named():
    (problem,) = problems_of(dnsAllowedDomains="data.example.com,*")
    assert problem.startswith("dnsAllowedDomains='*': a domain, not *")

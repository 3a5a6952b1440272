"""Principle 2: changing unrelated settings never replaces the file system or the image repository.

Which properties force a replacement is read from the CloudFormation resource schemas that cfn-lint ships
(``createOnlyProperties``); resources those properties reference (the file system's subnet and security group) are
checked the same way, recursively.
"""

import pytest

from tests.support.apps import COMPOSER_TRAINING, KUBEFLOW_TRAINING, TRAINIUM_EKS, stack_template
from tests.support.replacement import create_only_properties, replacement_key

PROTECTED_TYPES = (
    "AWS::FSx::FileSystem",
    "AWS::FSx::DataRepositoryAssociation",
    "AWS::EFS::FileSystem",
    "AWS::ECR::Repository",
    "AWS::S3::Bucket",
)
BASES = {
    TRAINIUM_EKS: {"dataBucketName": "my-training-data"},
    KUBEFLOW_TRAINING: {},
    COMPOSER_TRAINING: {},
}
FILE_SYSTEMS = {
    TRAINIUM_EKS: "AWS::FSx::FileSystem",
    KUBEFLOW_TRAINING: "AWS::EFS::FileSystem",
    COMPOSER_TRAINING: "AWS::EFS::FileSystem",
}
VARIANTS = [
    (TRAINIUM_EKS, {"nodeCount": "4"}),
    (TRAINIUM_EKS, {"instanceType": "trn1n.32xlarge"}),
    (TRAINIUM_EKS, {"kubernetesVersion": "1.35"}),
    (TRAINIUM_EKS, {"instanceType": "trn1.2xlarge", "nodeCount": "1"}),
    (TRAINIUM_EKS, {"provisioning": "node-group"}),
    (TRAINIUM_EKS, {"idleMinutes": "60"}),
    (KUBEFLOW_TRAINING, {"kubeflowCpuNodes": "3"}),
    (KUBEFLOW_TRAINING, {"kubeflowAcceleratedType": "trn1.32xlarge", "kubeflowAcceleratedNodes": "2"}),
    (KUBEFLOW_TRAINING, {"kubeflowAcceleratedType": "g5.12xlarge", "kubernetesVersion": "1.35"}),
    (COMPOSER_TRAINING, {"composerInstanceType": "g6.xlarge"}),
    (COMPOSER_TRAINING, {"provisioning": "node-group"}),
    (COMPOSER_TRAINING, {"composerInstanceType": "g5.48xlarge", "composerNodeCount": "3"}),
]


def protected(template):
    resources = template.to_json()["Resources"]
    keys = {}
    for logical_id, resource in resources.items():
        if resource["Type"] in PROTECTED_TYPES:
            replacement_key(resources, logical_id, keys)
    return keys


def test_the_schemas_name_the_replacement_causing_properties():
    assert ["SubnetIds"] in create_only_properties("AWS::FSx::FileSystem")
    assert ["SecurityGroupIds"] in create_only_properties("AWS::FSx::FileSystem")
    assert ["EncryptionConfiguration"] in create_only_properties("AWS::ECR::Repository")


@pytest.mark.parametrize("stack", list(BASES))
def test_protected_resources_are_found_with_their_dependencies(stack):
    keys = protected(stack_template(stack, **BASES[stack]))
    types = sorted(t for t, _, _ in keys.values())
    assert types.count(FILE_SYSTEMS[stack]) == 1
    assert types.count("AWS::ECR::Repository") == 1
    if stack == TRAINIUM_EKS:  # FSx: subnet and security group are create-only (EFS: on the mount targets only)
        assert "AWS::EC2::Subnet" in types and "AWS::EC2::SecurityGroup" in types


def _variant_id(variant):
    stack, settings = variant
    return stack + ":" + ",".join(f"{k}={x}" for k, x in settings.items())


@pytest.mark.parametrize("variant", VARIANTS, ids=_variant_id)
def test_unrelated_settings_keep_logical_ids_and_replacement_causing_properties(variant):
    stack, settings = variant
    before = protected(stack_template(stack, **BASES[stack]))
    after = protected(stack_template(stack, **BASES[stack], **settings))
    assert before == after


@pytest.mark.parametrize("stack", list(BASES))
def test_protected_resources_are_retained(stack):
    for logical_id, (resource_type, _, deletion_policy) in protected(stack_template(stack, **BASES[stack])).items():
        if resource_type in PROTECTED_TYPES:
            assert deletion_policy == "Retain", logical_id

"""Principle 2: changing unrelated settings never replaces the file system or the image repository.

Which properties force a replacement is read from the CloudFormation resource schemas that cfn-lint ships
(``createOnlyProperties``); resources those properties reference (the file system's subnet and security group) are
checked the same way, recursively.
"""

import json
from functools import lru_cache
from pathlib import Path

import cfnlint
import pytest

from tests.conftest import COMPOSER_TRAINING, KUBEFLOW_TRAINING, TRAINIUM_EKS, stack_template

SCHEMAS = Path(cfnlint.__file__).parent / "data" / "schemas"
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
    (KUBEFLOW_TRAINING, {"kubeflowCpuNodes": "3"}),
    (KUBEFLOW_TRAINING, {"kubeflowAcceleratedType": "trn1.32xlarge", "kubeflowAcceleratedNodes": "2"}),
    (KUBEFLOW_TRAINING, {"kubeflowAcceleratedType": "g5.12xlarge", "kubernetesVersion": "1.35"}),
    (COMPOSER_TRAINING, {"composerInstanceType": "g6.xlarge"}),
    (COMPOSER_TRAINING, {"composerInstanceType": "g5.48xlarge", "composerNodeCount": "3"}),
]


@lru_cache(maxsize=None)
def create_only_properties(resource_type):
    schema_hash = json.loads((SCHEMAS / "providers" / "us-west-2.json").read_text())[resource_type]
    schema = json.loads((SCHEMAS / "resources" / f"{schema_hash}.json").read_text())
    return tuple(path.split("/")[2:] for path in schema.get("createOnlyProperties", ()))


def value_at(properties, path):
    for key in path:
        if not isinstance(properties, dict) or key not in properties:
            return None
        properties = properties[key]
    return properties


def referenced_ids(value):
    text = json.dumps(value)
    ids = set()
    for marker in ('{"Ref": "', '{"Fn::GetAtt": ["'):
        for part in text.split(marker)[1:]:
            ids.add(part.split('"')[0])
    return ids


def replacement_key(resources, logical_id, seen=None):
    """Logical id -> create-only property values, for ``logical_id`` and what those values reference."""
    seen = {} if seen is None else seen
    if logical_id in seen or logical_id not in resources:
        return seen
    resource = resources[logical_id]
    values = {
        "/".join(path): value_at(resource.get("Properties", {}), path)
        for path in create_only_properties(resource["Type"])
    }
    seen[logical_id] = (resource["Type"], values, resource.get("DeletionPolicy"))
    for value in values.values():
        for referenced in referenced_ids(value):
            replacement_key(resources, referenced, seen)
    return seen


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

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

from tests.conftest import default_template

SCHEMAS = Path(cfnlint.__file__).parent / "data" / "schemas"
PROTECTED_TYPES = ("AWS::FSx::FileSystem", "AWS::FSx::DataRepositoryAssociation", "AWS::ECR::Repository")
BASE = {"dataBucketName": "my-training-data"}
VARIANTS = [
    {"nodeCount": "4"},
    {"instanceType": "trn1n.32xlarge"},
    {"kubernetesVersion": "1.35"},
    {"instanceType": "trn1.2xlarge", "nodeCount": "1"},
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


def test_protected_resources_are_found_with_their_dependencies():
    keys = protected(default_template(**BASE))
    types = sorted(t for t, _, _ in keys.values())
    assert types.count("AWS::FSx::FileSystem") == 1
    assert types.count("AWS::ECR::Repository") == 1
    assert "AWS::EC2::Subnet" in types and "AWS::EC2::SecurityGroup" in types


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: ",".join(f"{k}={x}" for k, x in v.items()))
def test_unrelated_settings_keep_logical_ids_and_replacement_causing_properties(variant):
    before = protected(default_template(**BASE))
    after = protected(default_template(**BASE, **variant))
    assert before == after


def test_protected_resources_are_retained():
    for logical_id, (resource_type, _, deletion_policy) in protected(default_template(**BASE)).items():
        if resource_type in PROTECTED_TYPES:
            assert deletion_policy == "Retain", logical_id

"""What CloudFormation replaces a resource on: its create-only properties, read from the resource schemas cfn-lint
ships, followed through the resources they reference."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import cfnlint

SCHEMAS = Path(cfnlint.__file__).parent / "data" / "schemas"


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

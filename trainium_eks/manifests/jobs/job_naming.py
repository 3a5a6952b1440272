"""Job names that carry a hash of the job's spec (principle 3: jobs are immutable Kubernetes objects)."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Callable, Optional

from trainium_eks.core.validation import Problems, check_pattern

BASE_NAME = re.compile(r"^[a-z]([a-z0-9-]{0,26}[a-z0-9])?$")
"""A job's base name: a DNS label of at most 28 characters, so that ``<base>-<hash>-node-<i>-0`` pod names stay under
the 63 characters of a host name (Volcano's svc plugin makes them host names)."""


def check_base_name(problems: Problems, name: Any) -> bool:
    """``name`` is a job's base name (:data:`BASE_NAME`)."""
    return check_pattern(
        problems, "name", name, BASE_NAME, "a lowercase DNS label of at most 28 characters, starting with a letter"
    )


HASH_LENGTH = 10
PLACEHOLDER = "__JOB_NAME__"
"""Stands for the job's name inside the spec that is hashed (the name cannot be part of its own hash)."""

JOB_NAME = PLACEHOLDER
"""Write this in a job's arguments or environment where the job's own name goes (``--output-dir
/data/output/<JOB_NAME>``): it becomes ``<name>-<hash>``, so each run of a changed job writes, checkpoints and resumes
in a place of its own, never in an earlier run's."""


def hashed_name(base: str, spec: Any, resolve: Optional[Callable[[Any], Any]] = None) -> str:
    """``<base>-<first 10 hex digits of sha256(spec)>``.

    ``spec`` is the rendered object with :data:`PLACEHOLDER` where the name goes. ``resolve`` turns CDK tokens
    (an image asset's URI, say) into their CloudFormation form first, so the hash does not depend on token numbering
    and the same spec always gives the same name.
    """
    canonical = json.dumps(resolve(spec) if resolve else spec, sort_keys=True, separators=(",", ":"))
    return f"{base}-{hashlib.sha256(canonical.encode()).hexdigest()[:HASH_LENGTH]}"


def with_name(spec: Any, name: str) -> Any:
    """``spec`` with every :data:`PLACEHOLDER` replaced by ``name``."""
    return json.loads(json.dumps(spec).replace(PLACEHOLDER, name))

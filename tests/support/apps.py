"""Apps built the way `cdk synth` builds the default app, offline, and their templates (cached per context)."""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, Tuple

import aws_cdk as cdk
from aws_cdk import assertions

import app as default_app
from trainium_eks.stacks.training_cluster_stack import TrainingClusterStack
from trainium_eks.stacks.trainium_eks_stack import TrainiumEksStack

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
TRAINIUM_EKS = "TrainiumEks"
KUBEFLOW_TRAINING = "KubeflowTraining"
COMPOSER_TRAINING = "ComposerTraining"
BUCKET_CONTEXT = {"dataBucketName": "my-training-data"}
"""Context that links the TrainiumEks file system to a data bucket."""
CDK_JSON_CONTEXT: Dict[str, Any] = json.loads((REPO / "cdk.json").read_text())["context"]

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


def new_app(**context: Any) -> cdk.App:
    """An app with the context of cdk.json (feature flags included), overridden by ``context``.

    Asset staging is off: tests read templates, not the 60 MB of kubectl and AWS CLI layers.
    """
    merged = {**CDK_JSON_CONTEXT, "aws:cdk:disable-asset-staging": True, **context}
    return cdk.App(context=merged)


def build_default_app(**context: Any) -> Tuple[cdk.App, TrainiumEksStack]:
    """The default app of app.py with only its ``TrainiumEks`` stack, with ``context`` as if given by ``cdk synth -c
    key=value``."""
    app = new_app(**{"stacks": TRAINIUM_EKS, **context})
    return app, default_app.build_app(app)[TRAINIUM_EKS]


def build_default_stack(name: str, **context: Any) -> Tuple[cdk.App, TrainingClusterStack]:
    """The default app with only its stack ``name`` (``KubeflowTraining``, ...), with ``context``."""
    app = new_app(**{**context, "stacks": name})
    return app, default_app.build_app(app)[name]


@lru_cache(maxsize=None)
def _default_template(name: str, items: Tuple[Tuple[str, Any], ...]) -> assertions.Template:
    _, stack = build_default_stack(name, **dict(items))
    return assertions.Template.from_stack(stack)


def default_template(**context: Any) -> assertions.Template:
    """The template of the default app's ``TrainiumEks`` stack (cached per context)."""
    return _default_template(TRAINIUM_EKS, tuple(sorted(context.items())))


def stack_template(name: str, **context: Any) -> assertions.Template:
    """The template of the default app's stack ``name`` (cached per context)."""
    return _default_template(name, tuple(sorted(context.items())))


def resources_of(template: assertions.Template, resource_type: str) -> Dict[str, Dict[str, Any]]:
    """Logical id -> resource of every ``resource_type`` in ``template``."""
    return template.find_resources(resource_type)


def only(template: assertions.Template, resource_type: str) -> Dict[str, Any]:
    """The one resource of ``resource_type``; fails when there is not exactly one."""
    found = resources_of(template, resource_type)
    assert len(found) == 1, f"expected one {resource_type}, found {sorted(found)}"
    return next(iter(found.values()))


def role_by_description(template: assertions.Template, text: str) -> Tuple[str, Dict[str, Any]]:
    """Logical id and properties of the IAM role whose description contains ``text``."""
    return next(
        (k, r["Properties"])
        for k, r in resources_of(template, "AWS::IAM::Role").items()
        if text in r["Properties"].get("Description", "")
    )


def function_by_description(template: assertions.Template, description: str) -> str:
    """Logical id of the one Lambda function whose description starts with ``description``."""
    (name,) = [
        name
        for name, resource in resources_of(template, "AWS::Lambda::Function").items()
        if resource["Properties"].get("Description", "").startswith(description)
    ]
    return name

"""The scenarios of the default app (``app.py``), as data, and how to build its templates.

Each scenario is (name, old variant, new variant, promises). Settings the app reads from its context are variants
of context; the rest are variants that patch the code the app is built from, the way a user would edit it: the
training script's arguments, the Volcano chart pin, the ``seed_jobs`` prop of ``TrainingStack``. More stacks
(KubeflowTraining, ComposerTraining) add their own scenario tuples with their stack name.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, List, Mapping, Tuple

from trainium_eks.rehearsal.promises import ALL_PROMISES, NAMESPACE_VOLUME_CLAIM_SURVIVE
from trainium_eks.rehearsal.scenario import Patch, Scenario, TemplateSource, Variant

TRAINIUM_EKS = "TrainiumEks"
"""The default app's stack (``app.STACK_NAME``)."""


def _smaller_batches(script_args: Callable[[str], List[str]]) -> Callable[[str], List[str]]:
    """``script_args`` with micro-batch 8 and 64 accumulation steps instead of 16 and 32 (the same global batch)."""

    @functools.wraps(script_args)
    def changed(output_dir: str) -> List[str]:
        args = list(script_args(output_dir))
        for flag, value in (("--batch_size", "8"), ("--grad_accum_usteps", "64")):
            args[args.index(flag) + 1] = value
        return args

    return changed


def _next_minor(pin: Any) -> Any:
    """A Helm chart pin one minor version newer (``1.15.1`` -> ``1.16.0``)."""
    major, minor, _ = pin.version.split(".", 2)
    return dataclasses.replace(pin, version=f"{major}.{int(minor) + 1}.0")


DEFAULT = Variant("default settings")
NODE_COUNT_4 = Variant("nodeCount=4", context=(("nodeCount", "4"),))
TRN1N = Variant("instanceType=trn1n.32xlarge", context=(("instanceType", "trn1n.32xlarge"),))
KUBERNETES_1_35 = Variant("kubernetesVersion=1.35", context=(("kubernetesVersion", "1.35"),))
SMALLER_BATCHES = Variant(
    "training arguments --batch_size 8 --grad_accum_usteps 64",
    patches=(Patch("trainium_eks.bert_phase1.script_args", _smaller_batches, "micro-batch 8, 64 accumulation steps"),),
)
NO_SEED_JOBS = Variant(
    "seed jobs removed (TrainingStack seed_jobs=False)",
    patches=(Patch("app.TrainingStack", lambda cls: functools.partial(cls, seed_jobs=False), "seed_jobs=False"),),
)
NEWER_VOLCANO = Variant(
    "Volcano chart one minor version newer",
    patches=(Patch("trainium_eks.versions.VOLCANO", _next_minor, "Volcano chart pin + 1 minor"),),
)


def trainium_eks_scenarios(stack: str = TRAINIUM_EKS) -> Tuple[Scenario, ...]:
    """The scenarios of the default app's stack."""
    without_cluster = tuple(p for p in ALL_PROMISES if p is not NAMESPACE_VOLUME_CLAIM_SURVIVE)
    return (
        Scenario("fresh deploy", stack, None, DEFAULT, ALL_PROMISES),
        Scenario("nodeCount 2 -> 4", stack, DEFAULT, NODE_COUNT_4, ALL_PROMISES),
        Scenario("instanceType trn1 -> trn1n", stack, DEFAULT, TRN1N, ALL_PROMISES),
        Scenario("a changed training argument", stack, DEFAULT, SMALLER_BATCHES, ALL_PROMISES),
        Scenario("the seed jobs removed from the app", stack, DEFAULT, NO_SEED_JOBS, ALL_PROMISES),
        Scenario("a new Volcano chart version", stack, DEFAULT, NEWER_VOLCANO, ALL_PROMISES),
        Scenario("kubernetesVersion 1.35 -> 1.36", stack, KUBERNETES_1_35, DEFAULT, ALL_PROMISES),
        # cdk destroy deletes the cluster, and everything in it with it (README: teardown).
        Scenario("cdk destroy", stack, DEFAULT, None, without_cluster),
    )


def default_app_source(new_app: Callable[..., Any], build_app: Callable[[Any], Any]) -> TemplateSource:
    """Build the default app's stack for a variant: ``new_app(**context)`` (an app with cdk.json's context and
    asset staging off), then ``build_app(app)`` (``app.build_app``), with the variant's patches applied."""

    def source(variant: Variant) -> Tuple[Mapping[str, Any], str]:
        from aws_cdk import assertions

        with variant.patched():
            stack = build_app(new_app(**dict(variant.context)))
            return assertions.Template.from_stack(stack).to_json(), stack.region

    return source

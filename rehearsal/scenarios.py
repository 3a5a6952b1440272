"""The scenarios of the default app (``app.py``), as data, and how to build its templates.

Each scenario is (name, old variant, new variant, promises). Settings the app reads from its context are variants
of context; the rest are variants that patch the code the app is built from, the way a user would edit it: the
training script's arguments, the Volcano chart pin, the ``seed_jobs`` prop of ``TrainiumEksStack``. More stacks
(KubeflowTraining, ComposerTraining) add their own scenario tuples with their stack name.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any, Callable, Dict, List, Mapping, Tuple

from rehearsal.promises import ALL_PROMISES, DEPLOY_PROMISES
from rehearsal.scenario import Patch, Scenario, TemplateSource, Variant
from trainium_eks.constructs.hybrid_workflow import HYPERPARAMETERS_ENV, JOB_NAME_ENV, RUN_ID_ENV
from trainium_eks.manifests.jobs.topology import NodeGroupTopology
from trainium_eks.manifests.storage.efs_volume import DEFAULT_CLAIM_NAME as EFS_CLAIM
from trainium_eks.stacks.kubeflow_training_stack import DEFAULT_CPU_INSTANCE_TYPE
from trainium_eks.workloads import cifar10_ddp
from trainium_eks.workloads.composer_recipe import ComposerRecipe

TRAINIUM_EKS = "TrainiumEks"
KUBEFLOW_TRAINING = "KubeflowTraining"
COMPOSER_TRAINING = "ComposerTraining"
STACKS = (TRAINIUM_EKS, KUBEFLOW_TRAINING, COMPOSER_TRAINING)
"""The stacks of the default app (``app_context.STACKS``)."""


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
    patches=(
        Patch(
            "trainium_eks.workloads.bert_phase1.script_args", _smaller_batches, "micro-batch 8, 64 accumulation steps"
        ),
    ),
)
NODE_GROUPS = Variant("provisioning=node-group", context=(("provisioning", "node-group"),))
IDLE_30 = Variant("idleMinutes=30", context=(("idleMinutes", "30"),))
LUSTRE_2400 = Variant("lustreStorageGiB=2400", context=(("lustreStorageGiB", "2400"),))
NEWER_KARPENTER = Variant(
    "Karpenter charts one minor version newer",
    patches=(
        Patch("trainium_eks.facts.versions.KARPENTER", _next_minor, "Karpenter chart pin + 1 minor"),
        Patch("trainium_eks.facts.versions.KARPENTER_CRD", _next_minor, "Karpenter CRD chart pin + 1 minor"),
    ),
)
NO_SEED_JOBS = Variant(
    "seed jobs removed (TrainiumEksStack seed_jobs=False)",
    patches=(Patch("app.TrainiumEksStack", lambda cls: functools.partial(cls, seed_jobs=False), "seed_jobs=False"),),
)
NEWER_VOLCANO = Variant(
    "Volcano chart one minor version newer",
    patches=(Patch("trainium_eks.facts.versions.VOLCANO", _next_minor, "Volcano chart pin + 1 minor"),),
)


def trainium_eks_scenarios(stack: str = TRAINIUM_EKS) -> Tuple[Scenario, ...]:
    """The scenarios of the default app's stack."""
    return (
        Scenario("fresh deploy", stack, None, DEFAULT, ALL_PROMISES),
        Scenario("nodeCount 2 -> 4", stack, DEFAULT, NODE_COUNT_4, ALL_PROMISES),
        Scenario("instanceType trn1 -> trn1n", stack, DEFAULT, TRN1N, ALL_PROMISES),
        Scenario("a changed training argument", stack, DEFAULT, SMALLER_BATCHES, ALL_PROMISES),
        Scenario("the seed jobs removed from the app", stack, DEFAULT, NO_SEED_JOBS, ALL_PROMISES),
        Scenario("a new Volcano chart version", stack, DEFAULT, NEWER_VOLCANO, ALL_PROMISES),
        Scenario("kubernetesVersion 1.35 -> 1.36", stack, KUBERNETES_1_35, DEFAULT, ALL_PROMISES),
        Scenario("node groups -> Karpenter", stack, NODE_GROUPS, DEFAULT, ALL_PROMISES),
        Scenario("Karpenter -> node groups", stack, DEFAULT, NODE_GROUPS, ALL_PROMISES),
        Scenario("idleMinutes 10 -> 30", stack, DEFAULT, IDLE_30, ALL_PROMISES),
        Scenario("lustreStorageGiB 1200 -> 2400", stack, DEFAULT, LUSTRE_2400, ALL_PROMISES),
        Scenario("new Karpenter chart versions", stack, DEFAULT, NEWER_KARPENTER, ALL_PROMISES),
        Scenario("cdk destroy", stack, DEFAULT, None, ALL_PROMISES),
        Scenario("cdk destroy with node groups", stack, NODE_GROUPS, None, ALL_PROMISES),
    )


CPU_NODES_3 = Variant("kubeflowCpuNodes=3", context=(("kubeflowCpuNodes", "3"),))
GPU_GROUP = Variant("kubeflowAcceleratedType=g6.12xlarge", context=(("kubeflowAcceleratedType", "g6.12xlarge"),))
"""A GPU group of a type the stack's AZ offers (usw2-az4 offers g6, not g5): the stack keeps its AZ. A type it does
not offer moves the stack's subnets, which an update cannot do (:mod:`.subnet_cidrs`); the preflight refuses it
(``zone-move``)."""
NEWER_TRAINER = Variant(
    "Kubeflow Trainer chart one minor version newer",
    patches=(
        Patch("trainium_eks.facts.versions.KUBEFLOW_TRAINER", _next_minor, "Kubeflow Trainer chart pin + 1 minor"),
    ),
)
FEWER_EPOCHS = Variant(
    "CIFAR-10 run with 2 epochs",
    patches=(
        Patch(
            "trainium_eks.workloads.cifar10_ddp.script_args",
            lambda script_args: functools.partial(script_args, epochs=2),
            "--epochs 2",
        ),
    ),
)
G6 = Variant("composerInstanceType=g6.xlarge", context=(("composerInstanceType", "g6.xlarge"),))
OTHER_RECIPE = Variant(
    "the medium recipe (ComposerTrainingStack recipe=...)",
    patches=(
        Patch(
            "app.ComposerTrainingStack",
            lambda cls: functools.partial(cls, recipe=ComposerRecipe.preset("medium")),
            "recipe=ComposerRecipe.preset('medium')",
        ),
    ),
)


def workflow_run(node_count: int) -> Dict[str, Any]:
    """A TrainJob as the hybrid workflow creates it for a run on the KubeflowTraining stack's CPU nodes (the run
    template with a run's name, hyperparameters and deadline)."""
    nodes = NodeGroupTopology(DEFAULT_CPU_INSTANCE_TYPE, node_count, node_count, 0, (), frozenset({EFS_CLAIM}))
    manifest = json.loads(
        json.dumps(cifar10_ddp.run_template(image="rehearsal/cifar10:run", node_group=nodes).manifest)
    )
    manifest["metadata"]["name"] = "cifar10-run-rehearsal"
    manifest["spec"]["trainer"]["env"] += [
        {"name": HYPERPARAMETERS_ENV, "value": "{}"},
        {"name": JOB_NAME_ENV, "value": "cifar10-run-rehearsal"},
        {"name": RUN_ID_ENV, "value": "arn:aws:states:us-west-2:123456789012:execution:Workflow:rehearsal"},
    ]
    manifest["spec"]["activeDeadlineSeconds"] = 24 * 3600
    return manifest


def kubeflow_training_scenarios(stack: str = KUBEFLOW_TRAINING) -> Tuple[Scenario, ...]:
    """The scenarios of the KubeflowTraining stack, with the deploy's promises only: its seed TrainJob gets its 6
    nodes through its release's capacity step (:class:`~trainium_eks.manifests.jobs.job_release_program.Capacity`),
    which the scheduling rehearsal does not run, so that its jobs-run promise is kept on the real control plane
    (``tests/e2e/test_lifecycle.py``) instead."""
    return (
        Scenario("fresh deploy", stack, None, DEFAULT, DEPLOY_PROMISES),
        Scenario("kubeflowCpuNodes 6 -> 3", stack, DEFAULT, CPU_NODES_3, DEPLOY_PROMISES),
        Scenario("a GPU group added", stack, DEFAULT, GPU_GROUP, DEPLOY_PROMISES),
        Scenario("the GPU group removed", stack, GPU_GROUP, DEFAULT, DEPLOY_PROMISES),
        Scenario("a changed training argument", stack, DEFAULT, FEWER_EPOCHS, DEPLOY_PROMISES),
        Scenario("Karpenter -> node groups", stack, DEFAULT, NODE_GROUPS, DEPLOY_PROMISES),
        Scenario("a new Kubeflow Trainer chart version", stack, DEFAULT, NEWER_TRAINER, DEPLOY_PROMISES),
        Scenario("cdk destroy", stack, DEFAULT, None, DEPLOY_PROMISES),
    )


def composer_training_scenarios(stack: str = COMPOSER_TRAINING) -> Tuple[Scenario, ...]:
    """The scenarios of the ComposerTraining stack."""
    return (
        Scenario("fresh deploy", stack, None, DEFAULT, ALL_PROMISES),
        Scenario("composerInstanceType g5 -> g6", stack, DEFAULT, G6, ALL_PROMISES),
        Scenario("Karpenter -> node groups", stack, DEFAULT, NODE_GROUPS, ALL_PROMISES),
        Scenario("another recipe", stack, DEFAULT, OTHER_RECIPE, ALL_PROMISES),
        Scenario("cdk destroy", stack, DEFAULT, None, ALL_PROMISES),
    )


def all_scenarios() -> Tuple[Scenario, ...]:
    """The scenarios of every stack of the default app."""
    return trainium_eks_scenarios() + kubeflow_training_scenarios() + composer_training_scenarios()


def default_app_sources(new_app: Callable[..., Any], build_app: Callable[[Any], Any]) -> Mapping[str, TemplateSource]:
    """Stack name -> :func:`default_app_source`, for every stack of the default app."""
    return {stack: default_app_source(new_app, build_app, stack) for stack in STACKS}


def default_app_source(
    new_app: Callable[..., Any], build_app: Callable[[Any], Any], stack: str = TRAINIUM_EKS
) -> TemplateSource:
    """Build one stack of the default app for a variant: ``new_app(**context)`` (an app with cdk.json's context and
    asset staging off) with only ``stack`` selected, then ``build_app(app)`` (``app.build_app``), with the variant's
    patches applied."""

    def source(variant: Variant) -> Tuple[Mapping[str, Any], str]:
        from aws_cdk import assertions

        with variant.patched():
            built = build_app(new_app(**{**dict(variant.context), "stacks": stack}))[stack]
            return assertions.Template.from_stack(built).to_json(), built.region

    return source

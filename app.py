#!/usr/bin/env python3
"""The default app: the library's three training systems, each a stack deployable by name.

- ``TrainiumEks``: the seed system (EKS + 2 x trn1.32xlarge + FSx for Lustre + the BERT phase-1 run);
- ``KubeflowTraining``: Kubeflow Trainer on EKS with EFS, the CIFAR-10 DDP run, and the choice of EKS or SageMaker at
  run time;
- ``ComposerTraining``: GPU nodes, the Composer baseline and speed-up recipe runs, side by side in cost.

Settings come from the context in cdk.json and can be overridden with ``cdk synth -c key=value``; docs/settings.md
lists the keys (``-c stacks=TrainiumEks`` builds one stack only). Synth is offline: no credentials, no lookups.
"""

import atexit
import os
import sys
from pathlib import Path
from typing import Dict, Mapping

import aws_cdk as cdk

from trainium_eks.core.validation import ConfigurationError
from trainium_eks.stacks.app_context import settings_from_context
from trainium_eks.stacks.composer_training_stack import ComposerTrainingStack
from trainium_eks.stacks.kubeflow_training_stack import KubeflowTrainingStack
from trainium_eks.stacks.training_cluster_stack import TrainingClusterStack
from trainium_eks.stacks.trainium_eks_stack import TrainiumEksStack

IMAGES = Path(__file__).parent / "images"

DESCRIPTIONS: Mapping[str, str] = {
    "TrainiumEks": "trainium-eks: EKS cluster with EFA-connected Trainium nodes, FSx for Lustre and ECR",
    "KubeflowTraining": "trainium-eks: Kubeflow Trainer on EKS with EFS; CIFAR-10 DDP on EKS or SageMaker",
    "ComposerTraining": "trainium-eks: EKS GPU nodes training with MosaicML Composer recipes, with their cost",
}

IMAGE_DIRECTORIES: Mapping[str, Path] = {
    "TrainiumEks": IMAGES / "bert-pretrain",
    "KubeflowTraining": IMAGES / "cifar10-ddp",
    "ComposerTraining": IMAGES / "composer-resnet",
}


def build_app(app: cdk.App) -> Dict[str, TrainingClusterStack]:
    """Add the stacks the context selects (``stacks``, default all) to ``app``, configured from its context."""
    settings = settings_from_context(app.node)
    classes = {
        "TrainiumEks": TrainiumEksStack,
        "KubeflowTraining": KubeflowTrainingStack,
        "ComposerTraining": ComposerTrainingStack,
    }
    return {
        name: classes[name](
            app,
            name,
            env=settings.env,
            description=DESCRIPTIONS[name],
            setting_names=settings.setting_names(name),
            image_directory=str(IMAGE_DIRECTORIES[name]),
            **settings.props[name],
        )
        for name in settings.stacks
    }


def main() -> None:
    # Template validation belongs to the tests (cfn-lint, every rule, on every variant of the app); aws-cdk-lib's
    # built-in validation would cost every synth about 1-2 s and a 360 MiB WebAssembly engine (docs/decisions.md).
    # No stack traces in the cloud assembly: they name the jsii kernel's temporary folder, so two synths of one commit
    # would differ (docs/decisions.md).
    app = cdk.App(
        builtin_cloud_formation_validation=False,
        stack_traces=False,
        context={"aws:cdk:disable-creation-stack-traces": True},
    )
    try:
        build_app(app)
    except ConfigurationError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    app.synth()
    leave_without_teardown()


def leave_without_teardown() -> None:
    """Exit once the cloud assembly is written: run the exit handlers (jsii stops its kernel, which deletes what it
    unpacked), then skip the interpreter's teardown of the generated aws-cdk-lib modules, about 0.2 s of every synth
    (measured by `make bench`)."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()

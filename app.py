#!/usr/bin/env python3
"""The default app: the seed system (EKS + 2 x trn1.32xlarge + FSx for Lustre + the BERT phase-1 run) in one stack.

Settings come from the context in cdk.json and can be overridden with ``cdk synth -c key=value``; the README lists
the keys. Synth is offline: no credentials, no lookups.
"""

import sys
from pathlib import Path

import aws_cdk as cdk

from trainium_eks import versions
from trainium_eks.app_context import CONTEXT_KEYS, settings_from_context
from trainium_eks.training_stack import TrainingStack
from trainium_eks.validation import ConfigurationError

STACK_NAME = "TrainiumEks"
TRAINING_IMAGE = Path(__file__).parent / "images" / "bert-pretrain"


def build_app(app: cdk.App) -> TrainingStack:
    """Add the default stack to ``app``, configured from the app's context."""
    settings = settings_from_context(app.node)
    return TrainingStack(
        app,
        STACK_NAME,
        env=settings.env,
        description="trainium-eks: EKS cluster with EFA-connected Trainium nodes, FSx for Lustre and ECR",
        setting_names=CONTEXT_KEYS,
        image_directory=str(TRAINING_IMAGE),
        image_build_args={"BASE_IMAGE": versions.NEURON_PYTORCH_TRAINING.image},
        **settings.stack_props,
    )


def main() -> None:
    app = cdk.App()
    try:
        build_app(app)
    except ConfigurationError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    app.synth()


if __name__ == "__main__":
    main()

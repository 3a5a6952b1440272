#!/usr/bin/env python3
"""The default app: the seed system (EKS + 2 x trn1.32xlarge + FSx for Lustre + the BERT phase-1 run) in one stack.

Settings come from the context in cdk.json and can be overridden with ``cdk synth -c key=value``; the README lists
the keys. Synth is offline: no credentials, no lookups.
"""

import atexit
import os
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
    # Template validation belongs to the tests (cfn-lint, every rule, on every variant of the app); aws-cdk-lib's
    # built-in validation would cost every synth about 1-2 s and a 360 MiB WebAssembly engine (README: Decisions).
    app = cdk.App(builtin_cloud_formation_validation=False)
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

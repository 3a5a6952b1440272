"""The TrainJob a run of the hybrid workflow creates: the train job's manifest with the run's name, size and settings
as JSONata, and what that template requires of the train job."""

from __future__ import annotations

import json
from typing import Any, Dict

from trainium_eks.constructs.private.jsonata import jsonata, literals
from trainium_eks.core.validation import Problems
from trainium_eks.manifests.jobs.distributed_workload import Launcher
from trainium_eks.manifests.jobs.job_release import RELEASE_ANNOTATION, WAIT_FOR_ANNOTATION
from trainium_eks.manifests.jobs.train_job import TrainJobChart

HYPERPARAMETERS_ENV = "TRAINING_HYPERPARAMETERS"
"""Environment variable of the Kubernetes job's trainer: the run's hyperparameters as a JSON object of strings, which
``images/cifar10-ddp/launch.py`` turns into script arguments exactly as it reads SageMaker's hyperparameters.json."""

JOB_NAME_ENV = "TRAINING_JOB_NAME"
"""Environment variable of the Kubernetes job's trainer: the run's job name, for per-run paths in the template's
arguments (``--output-dir /data/output/${TRAINING_JOB_NAME}``: the launch script's shell expands it)."""

RUN_ID_ENV = "TRAINING_RUN_ID"
"""Environment variable of the Kubernetes job's trainer: the ARN of the execution that created the run. The training
script records it in its checkpoint and refuses to resume a checkpoint another run wrote
(``images/cifar10-ddp/train_cifar10.py``), whatever put the two runs in one folder."""

EXECUTION_ANNOTATION = "trainium-eks/execution"
"""Annotation of a run's release Job and TrainJob: the ARN of the execution that created them. The workflow counts
only the TrainJob carrying its own ARN, and its cleanup deletes only a release carrying it: a release or TrainJob of
the run's name that another execution (should their names' digests agree) or a person created is left alone."""

EXECUTION_ARN = "$states.context.Execution.Id"
"""JSONata of the execution's ARN (Step Functions context object)."""


def trainjob_template(train_job: TrainJobChart, deadline_seconds: int) -> Dict[str, Any]:
    """The TrainJob of ``train_job`` with the run's name, node count, hyperparameters (:data:`HYPERPARAMETERS_ENV`),
    job name (:data:`JOB_NAME_ENV`) and identity (:data:`RUN_ID_ENV`) as JSONata, the execution that created it
    (:data:`EXECUTION_ANNOTATION`), ending after ``deadline_seconds`` (``activeDeadlineSeconds``, in place of the
    chart's own ``deadline_seconds``).

    Strings that a JSONata state cannot hold as plain literals in the validator's reading (empty, multi-line, or
    starting with ``{%``) become JSONata string literals, which evaluate to the same string."""
    (manifest,) = train_job.manifests()
    manifest = literals(manifest)
    metadata = manifest["metadata"]
    metadata["name"] = jsonata("$job_name")
    annotations = {  # the chart's own release does not create it: the run's release does (release_template)
        key: value
        for key, value in (metadata.get("annotations") or {}).items()
        if key not in (WAIT_FOR_ANNOTATION, RELEASE_ANNOTATION)
    }
    metadata["annotations"] = {**annotations, EXECUTION_ANNOTATION: jsonata(EXECUTION_ARN)}
    labels = metadata.get("labels") or {}
    if "app.kubernetes.io/instance" in labels:
        labels["app.kubernetes.io/instance"] = jsonata("$job_name")
    trainer = manifest["spec"]["trainer"]
    trainer["numNodes"] = jsonata("$node_count")
    trainer["env"] = [
        *trainer.get("env", []),
        {"name": HYPERPARAMETERS_ENV, "value": jsonata("$string($hyperparameters)")},
        {"name": JOB_NAME_ENV, "value": jsonata("$job_name")},
        {"name": RUN_ID_ENV, "value": jsonata(EXECUTION_ARN)},
    ]
    manifest["spec"]["activeDeadlineSeconds"] = deadline_seconds
    return manifest


def check_train_job(problems: Problems, train_job: TrainJobChart, namespace: str) -> None:
    """Record what keeps ``train_job`` from being the workflow's template: another launcher than the image's own,
    an env the workflow sets per run, another namespace, or the chart's own job name (``JOB_NAME``) in its spec,
    which every run's TrainJob would share (one output folder, and checkpoints one run resumes from another's)."""
    if train_job.workload.launcher is not Launcher.DIRECT:
        problems.add(
            "train_job",
            train_job.component,
            "a TrainJob started by the image's own launcher (launcher='direct'), which reads TRAINING_HYPERPARAMETERS "
            f"and the node count of the run; {train_job.workload.launcher.value} would ignore them",
        )
    for variable in (HYPERPARAMETERS_ENV, JOB_NAME_ENV, RUN_ID_ENV):
        if variable in train_job.workload.env:
            problems.add(
                "train_job",
                train_job.component,
                f"a TrainJob without the env {variable} (the workflow sets it for each run)",
            )
    if train_job.job_name and train_job.job_name in json.dumps(train_job.manifest.get("spec")):
        problems.add(
            "train_job",
            train_job.component,
            f"a TrainJob without JOB_NAME in its args or env: each run gets its own name, so a per-run path is "
            f"${{{JOB_NAME_ENV}}} (as in --output-dir /data/output/${{{JOB_NAME_ENV}}}); {train_job.job_name} would "
            "be every run's",
        )
    if train_job.namespace_name != namespace:
        problems.add(
            "train_job",
            train_job.component,
            f"a TrainJob in the namespace {namespace!r} (where the workflow may create TrainJobs), not "
            f"{train_job.namespace_name!r}",
        )

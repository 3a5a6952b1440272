"""The release Job a run of the hybrid workflow creates: the library's release Job
(:func:`~trainium_eks.manifests.jobs.job_release.release_job`) of the run's TrainJob, with the run's names as JSONata,
so that a run's gang gets its nodes as the stacks' own gangs do."""

from __future__ import annotations

from typing import Any, Dict, Mapping

from trainium_eks.constructs.private.jsonata import jsonata
from trainium_eks.constructs.private.trainjob_template import EXECUTION_ANNOTATION, EXECUTION_ARN
from trainium_eks.core.conventions import HELD_JOB_LABEL
from trainium_eks.manifests.jobs.job_release import release_job
from trainium_eks.manifests.jobs.job_release_program import DEADLINE_MARGIN_SECONDS, capacity_settings

TRAINJOB_VARIABLE = "$trainjob"
"""The workflow's variable holding the run's TrainJob as a Pass state's ``Assign`` renders it
(:func:`~trainium_eks.constructs.private.trainjob_template.trainjob_template`)."""


def release_name_expression(job_name: str) -> str:
    """JSONata of the name of the release Job of the job named by the JSONata ``job_name``: that name and
    ``-release``, as every release is named."""
    return f"{job_name} & '-release'"


RELEASE_NAME = release_name_expression("$job_name")
"""JSONata of a run's release Job's name."""

HELD_JOB_TEXT = f"$join($split($string({TRAINJOB_VARIABLE}), '$'), '$$')"
"""JSONata of the release's ``HELD_JOB``: the rendered TrainJob as JSON with every ``$`` doubled, which the kubelet's
expansion of ``$(VAR)`` references in environment values turns back into the text (``$$`` gives ``$``: Kubernetes
``third_party/forked/golang/expansion/expand.go``); split and joined, since a ``$`` in ``$replace``'s replacement
has a meaning of its own."""


def waiting_seconds(trainjob: Mapping[str, Any]) -> int:
    """The longest the run's release may go without a TrainJob, with the capacity settings of ``trainjob`` (the
    chart's manifest; :func:`~trainium_eks.manifests.jobs.job_release_program.capacity_settings`): every attempt of
    the capacity step and the pauses between them, for the first start and for each restart the release may make
    (:class:`~trainium_eks.manifests.jobs.job_release_program.GangWatch`). The workflow's ``max_runtime`` counts only
    while the TrainJob exists, as its ``activeDeadlineSeconds`` does."""
    settings = capacity_settings(trainjob)
    phase = settings["attempts"] * settings["timeout"] + (settings["attempts"] - 1) * settings["pause"]
    return phase * (1 + settings["restarts"])


def release_timeout(deadline_seconds: int, waiting: int) -> int:
    """The release Job's ``activeDeadlineSeconds``: the run's deadline, the time it may wait for nodes (``waiting``)
    and the program's margin, so that it gives up holding nodes for a gang (and stops watching it) only after the
    TrainJob's own deadline."""
    return deadline_seconds + waiting + DEADLINE_MARGIN_SECONDS


def release_template(namespace: str, deadline_seconds: int, waiting: int) -> Dict[str, Any]:
    """The release Job of the run's TrainJob (:data:`TRAINJOB_VARIABLE`) in ``namespace``: named
    :data:`RELEASE_NAME`, labelled with the job's name, annotated with the execution's ARN
    (:data:`~trainium_eks.constructs.private.trainjob_template.EXECUTION_ANNOTATION`, which the cleanup checks before
    it deletes a release), waiting for nothing, ending after :func:`release_timeout`."""
    job = release_job(
        namespace,
        held_name="run",
        held_text="{}",
        wait_for=[],
        timeout_seconds=release_timeout(deadline_seconds, waiting),
    )
    metadata = job["metadata"]
    metadata["name"] = jsonata(RELEASE_NAME)
    metadata["annotations"] = {**metadata.get("annotations", {}), EXECUTION_ANNOTATION: jsonata(EXECUTION_ARN)}
    template = job["spec"]["template"]
    for labels in (metadata["labels"], template["metadata"]["labels"]):
        labels[HELD_JOB_LABEL] = jsonata("$job_name")
    (container,) = template["spec"]["containers"]
    command = container["command"]
    command[command.index("run-release")] = jsonata(RELEASE_NAME)
    container["env"] = [{"name": "HELD_JOB", "value": jsonata(HELD_JOB_TEXT)}]
    return job

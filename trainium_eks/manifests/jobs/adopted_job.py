"""AdoptedJobChart: the one job of your own cdk8s chart, named and held the way the library's jobs are."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence, Tuple, Union

import cdk8s

from trainium_eks.core.validation import Problems, check_dns_label
from trainium_eks.manifests.addons.training_runtime import TRAINER_API_VERSION
from trainium_eks.manifests.jobs import job_naming
from trainium_eks.manifests.jobs.job_chart import JobChart, check_wait_for, wait_references
from trainium_eks.manifests.jobs.job_release import is_held
from trainium_eks.manifests.jobs.job_release_program import unlabelled_pods
from trainium_eks.manifests.jobs.pytorch_job import PYTORCH_JOB_API_VERSION
from trainium_eks.manifests.jobs.volcano_job import VOLCANO_JOB_API_VERSION

JOB_KINDS: Mapping[Tuple[str, str], str] = {
    ("batch/v1", "Job"): "job",
    (VOLCANO_JOB_API_VERSION, "Job"): "vcjob",
    (TRAINER_API_VERSION, "TrainJob"): "trainjob",
    (PYTORCH_JOB_API_VERSION, "PyTorchJob"): "pytorchjob",
}
"""(apiVersion, kind) of the jobs a job sequence can hold -> the kind of their references (``vcjob/<name>``): the
kinds the release program creates and reads."""


class AdoptedJobChart(JobChart):
    """The one job of a user's ``cdk8s.Chart`` as a :class:`~trainium_eks.manifests.jobs.job_chart.JobChart`: named
    ``<its name>-<hash of its spec>``, so that a changed job is a new one (a pod template cannot be updated in place),
    with the library's labels, and held until the jobs of ``wait_for`` have completed when it is added to a
    :class:`~trainium_eks.constructs.job_sequence.JobSequence` (which adopts a plain cdk8s chart by itself).

    :param chart: A ``cdk8s.Chart`` of exactly one object, a job of :data:`JOB_KINDS`, with a namespace and a name of
        at most 28 characters (:data:`~trainium_eks.manifests.jobs.job_naming.BASE_NAME`); a held TrainJob of more
        than one node (or of its runtime's count) carries the pod template of its ``node`` replicated job in
        ``spec.runtimePatches`` (:func:`~trainium_eks.manifests.jobs.job_release_program.unlabelled_pods`). Required.
    :param wait_for: The jobs this one waits for: job charts or references (``job/<name>``, ``vcjob/<name>``, ...).
        Default: none.
    :param resolve: Turns CDK tokens into CloudFormation before hashing (``JobSequence.resolve``). Default: none.
    """

    def __init__(
        self,
        chart: cdk8s.Chart,
        *,
        wait_for: Sequence[Union[str, JobChart]] = (),
        resolve: Optional[Callable[[Any], Any]] = None,
    ) -> None:
        problems = Problems("AdoptedJobChart")
        objects = list(chart.to_json()) if isinstance(chart, cdk8s.Chart) else None
        if objects is None:
            problems.add("chart", chart, "a cdk8s.Chart")
            problems.raise_if_any()
        kinds = [(o.get("apiVersion"), o.get("kind")) for o in objects]
        if len(objects) != 1 or kinds[0] not in JOB_KINDS:
            allowed = ", ".join(f"{kind} ({api_version})" for api_version, kind in JOB_KINDS)
            problems.add("chart", [f"{kind} ({api_version})" for api_version, kind in kinds], f"one job: {allowed}")
            problems.raise_if_any()
        (manifest,) = objects
        metadata = manifest.get("metadata") or {}
        job_naming.check_base_name(problems, metadata.get("name"))
        check_dns_label(problems, "namespace", metadata.get("namespace"))
        check_wait_for(problems, wait_for)
        if unlabelled_pods(manifest) and is_held(manifest, wait_references(wait_for)):
            problems.add(
                "chart",
                "a TrainJob of more than one node (or of its runtime's count) without the pod template of its 'node' "
                "replicated job in spec.runtimePatches",
                "a job whose pod template its release can label: add a runtimePatches entry with that pod template "
                "(its labels reach the pods, which the job's peers policy selects; without it they admit no "
                "connection, each other's neither; its nodeSelector and tolerations place the capacity pods)",
            )
        problems.raise_if_any()
        super().__init__(metadata["name"], namespace=metadata["namespace"], wait_for=wait_for)
        self.ref_kind = JOB_KINDS[kinds[0]]
        self.add_job({**manifest, "metadata": {**metadata, "name": job_naming.PLACEHOLDER}}, resolve)

"""JobChart: a chart holding one job whose name carries a hash of its spec."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence, Tuple, Union

from trainium_eks.manifests import job_naming
from trainium_eks.manifests.chart import LibraryChart
from trainium_eks.manifests.job_priorities import MAX_STAGES, stage_priority_class
from trainium_eks.validation import Problems


def wait_references(wait_for: Any) -> Any:
    """``wait_for`` with job charts replaced by their start-gate references (anything else is left as it is, for the
    checks to judge)."""
    if isinstance(wait_for, (list, tuple)):
        return [item.ref if isinstance(item, JobChart) else item for item in wait_for]
    return wait_for


def wait_stage(wait_for: Any) -> int:
    """0 without prerequisites, else one more than the latest job of ``wait_for`` (a reference string counts as a
    job of stage 0)."""
    if not isinstance(wait_for, (list, tuple)):
        return 0
    return max((item.stage + 1 if isinstance(item, JobChart) else 1 for item in wait_for), default=0)


def check_wait_stage(problems: Problems, wait_for: Any) -> None:
    """Record a problem when the chain of jobs waiting for one another is longer than the priority classes."""
    if wait_stage(wait_for) >= MAX_STAGES:
        problems.add(
            "wait_for", wait_references(wait_for), f"chains of at most {MAX_STAGES} jobs waiting for each other"
        )


class JobChart(LibraryChart):
    """A chart of exactly one job (batch/v1 Job, Volcano Job, TrainJob, PyTorchJob), named ``<name>-<hash>``.

    Subclasses render the job's manifest with :data:`~trainium_eks.manifests.job_naming.PLACEHOLDER` wherever the
    name goes and hand it to :meth:`add_job`, which hashes it, names the job and adds it to the chart. A job applied
    by :class:`~trainium_eks.constructs.job_sequence.JobSequence` is then its own CloudFormation resource keyed by
    that name, so any change to the spec replaces the job.

    A job's :attr:`stage` is 0 when it waits for nothing, else one more than the latest job it waits for
    (:func:`wait_stage`); gang-scheduled jobs run at their stage's :attr:`priority_class`
    (:class:`~trainium_eks.manifests.job_priorities.JobPrioritiesChart`), so a job is never scheduled before a job it
    waits for.

    :param name: Base name of the job (``job_naming.BASE_NAME``). Required.
    :param namespace: The job's namespace. Required.
    :param wait_for: The jobs this one waits for, checked by the subclass: their charts, or start-gate references
        (``job/<name>``, ``vcjob/<name>``, ...). Default: none.
    """

    ref_kind: str = "job"
    """Kind prefix of :attr:`ref` (``job`` for batch/v1, ``vcjob`` for Volcano), as the start gate reads it."""

    scheduled_by_priority: bool = True
    """Whether the job's pods carry its stage's priority class. A job that cannot (a TrainJob: its runtime patch has
    no priority class) is created after the jobs it waits for instead, and Volcano schedules the older of two
    pending gangs first."""

    def __init__(self, name: str, *, namespace: str, wait_for: Sequence[Union[str, "JobChart"]] = ()) -> None:
        super().__init__(name, namespace=namespace)
        self.wait_for: Tuple[str, ...] = tuple(wait_references(wait_for))
        self.stage = wait_stage(wait_for)
        self.job_name = ""
        """The job's name in the cluster: ``<name>-<hash>``."""
        self.ref = ""
        """How a start gate refers to this job (``wait_for=[chart]`` or ``wait_for=[chart.ref]``)."""

    @property
    def priority_class(self) -> str:
        """The priority class of this job's stage."""
        return stage_priority_class(self.stage)

    def add_job(self, manifest: Mapping[str, Any], resolve: Optional[Callable[[Any], Any]]) -> None:
        """Name the job after the hash of ``manifest`` (with tokens resolved by ``resolve``) and add it."""
        self.job_name = job_naming.hashed_name(self.component, manifest, resolve)
        self.ref = f"{self.ref_kind}/{self.job_name}"
        self.add_object(job_naming.with_name(manifest, self.job_name))

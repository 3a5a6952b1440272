"""JobChart: a chart holding one job whose name carries a hash of its spec."""

from __future__ import annotations

import copy
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple, Union

from trainium_eks.core.validation import Problems
from trainium_eks.manifests.chart import LibraryChart
from trainium_eks.manifests.jobs import job_naming
from trainium_eks.manifests.jobs.gang_capacity import GangCapacity
from trainium_eks.manifests.jobs.job_release import check_references, held_annotations, is_held
from trainium_eks.manifests.jobs.job_release_program import NODE_POOL_ANNOTATION, gang_pods


def wait_references(wait_for: Any) -> Any:
    """``wait_for`` with job charts replaced by their references (anything else is left as it is, for
    :func:`check_wait_for` to judge)."""
    if isinstance(wait_for, (list, tuple)):
        return [item.ref if isinstance(item, JobChart) else item for item in wait_for]
    return wait_for


def check_wait_for(problems: Problems, wait_for: Any) -> bool:
    """``wait_for`` is a list of job charts or references
    (:data:`~trainium_eks.manifests.jobs.job_release.JOB_REFERENCE`)."""
    return check_references(problems, "wait_for", wait_references(wait_for))


class JobChart(LibraryChart):
    """A chart of exactly one job (batch/v1 Job, Volcano Job, TrainJob, PyTorchJob), named ``<name>-<hash>``.

    Subclasses render the job's manifest with :data:`~trainium_eks.manifests.jobs.job_naming.PLACEHOLDER` wherever the
    name goes and hand it to :meth:`add_job`, which hashes it, names the job and adds it to the chart. A job applied
    by :class:`~trainium_eks.constructs.job_sequence.JobSequence` is then its own CloudFormation resource keyed by
    that name, so any change to the spec replaces the job; a job that waits for others (:attr:`wait_for`) is held
    until they have completed, and a gang until its nodes are held
    (:class:`~trainium_eks.manifests.jobs.job_release.JobReleaseChart`).

    :param name: Base name of the job (``job_naming.BASE_NAME``). Required.
    :param namespace: The job's namespace. Required.
    :param wait_for: The jobs this one waits for, checked by the subclass (:func:`check_wait_for`): their charts, or
        references (``job/<name>``, ``vcjob/<name>``, ...). Default: none.
    """

    ref_kind: str = "job"
    """Kind prefix of :attr:`ref` (``job`` for batch/v1, ``vcjob`` for Volcano, ``trainjob``, ``pytorchjob``)."""

    def __init__(self, name: str, *, namespace: str, wait_for: Sequence[Union[str, "JobChart"]] = ()) -> None:
        super().__init__(name, namespace=namespace)
        self.wait_for: Tuple[str, ...] = tuple(wait_references(wait_for))
        self.job_name = ""
        """The job's name in the cluster: ``<name>-<hash>``."""
        self.ref = ""
        """How other jobs refer to this one (``wait_for=[chart]`` or ``wait_for=[chart.ref]``)."""
        self.capacity = GangCapacity()
        """How the release of a gang holds its nodes (set by the subclass before :meth:`add_job`)."""
        self.node_pool: Optional[str] = None
        """The Karpenter NodePool of a gang's nodes, whose limit its release may wait for (set by the subclass)."""

    @property
    def manifest(self) -> Mapping[str, Any]:
        """The job's manifest (a copy)."""
        return self.manifests()[0]

    def add_job(self, manifest: Mapping[str, Any], resolve: Optional[Callable[[Any], Any]]) -> None:
        """Name the job after the hash of ``manifest`` (with tokens resolved by ``resolve``) and add it. A job that
        waits for others carries :func:`~trainium_eks.manifests.jobs.job_release.held_annotations` (the jobs it waits
        for, the release program's digest), which its hash covers; so does a gang, which a release creates too
        (:func:`~trainium_eks.manifests.jobs.job_release.is_held`), with the settings of :attr:`capacity` that are
        not the defaults and its :attr:`node_pool`."""
        if is_held(manifest, self.wait_for):
            manifest = copy.deepcopy(dict(manifest))
            metadata = manifest.setdefault("metadata", {})
            metadata["annotations"] = {
                **(metadata.get("annotations") or {}),
                **held_annotations(self.wait_for),
                **(self._gang_annotations() if gang_pods(manifest) else {}),
            }
        self.job_name = job_naming.hashed_name(self.component, manifest, resolve)
        self.ref = f"{self.ref_kind}/{self.job_name}"
        self.add_object(job_naming.with_name(manifest, self.job_name))

    def _gang_annotations(self) -> Dict[str, str]:
        """What a gang's release reads besides its waits: :attr:`capacity` and :attr:`node_pool`."""
        pool = {NODE_POOL_ANNOTATION: self.node_pool} if self.node_pool else {}
        return {**self.capacity.annotations(), **pool}

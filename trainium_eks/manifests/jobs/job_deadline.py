"""Job deadlines: every job the library renders ends by a bound of its own, whatever happens to it (design principle
9: nothing bills forever). Which field bounds a job, and what its controller does once it passes, depends on the kind;
each was read at the version the stacks pin:

- **batch/v1 Job** (:class:`~trainium_eks.manifests.jobs.dataset_staging.DatasetStagingChart`):
  ``spec.activeDeadlineSeconds`` bounds the whole Job, every retry of ``backoffLimit`` included. It counts from the
  Job's ``status.startTime``, which the Job controller sets when it first syncs the Job (not suspended); once past, the
  controller deletes the Job's active pods and the Job fails with the condition ``Failed``, reason
  ``DeadlineExceeded`` (kubernetes v1.36.3 ``pkg/controller/job/job_controller.go``: ``syncJob``,
  ``pastActiveDeadline``).
- **Kubeflow Trainer v2 TrainJob** (:class:`~trainium_eks.manifests.jobs.train_job.TrainJobChart`):
  ``spec.activeDeadlineSeconds`` bounds the whole TrainJob, every restart of its JobSet included. It counts from the
  TrainJob's ``creationTimestamp`` (from its resume, after a suspension); once past, the Trainer sets the condition
  ``Failed``, reason ``DeadlineExceeded``, and deletes the TrainJob's JobSet, whose Jobs and pods the garbage collector
  then deletes (kubeflow/trainer v2.3.0 ``pkg/controller/trainjob_controller.go`` ``reconcileDeadline``; the JobSet owns
  its Jobs: kubernetes-sigs/jobset v0.12.0 ``pkg/controllers/jobset_controller.go``, ``SetControllerReference``). The
  Trainer does not copy the field into the JobSet or its Jobs. The field is immutable (the CRD's CEL rule
  ``self == oldSelf``) and at least 1.
- **Volcano Job** (:class:`~trainium_eks.manifests.jobs.volcano_job.VolcanoJobChart`,
  :class:`~trainium_eks.manifests.jobs.fabric_check.FabricCheckChart`): ``batch.volcano.sh/v1alpha1`` has no deadline
  of a whole job (volcano-sh/volcano v1.15.1 ``staging/src/volcano.sh/apis/pkg/apis/batch/v1alpha1/job.go``
  ``JobSpec``; its ``runningEstimate`` is read by no controller or scheduler of that tag). The bound is each pod's
  ``spec.activeDeadlineSeconds``: the kubelet fails a pod that has been active on its node longer, phase ``Failed``,
  reason ``DeadlineExceeded``, counting from the pod's ``status.startTime``, which the kubelet sets when it first
  handles the pod on its node (kubernetes v1.36.3 ``pkg/kubelet/active_deadline.go``, ``pkg/kubelet/kubelet_pods.go``
  ``generateAPIPodStatus``, ``pkg/kubelet/status/status_manager.go``): a pod still waiting for a node has no deadline
  running yet. Volcano's job controller sees the event ``PodFailed`` (``pkg/controllers/job/job_controller_handler.go``
  ``updatePod``), the task's policy ``PodFailed -> RestartJob`` kills every pod of the job and counts a retry, and the
  job ends ``Failed`` once its retries reach ``maxRetry`` (``pkg/controllers/job/job_controller_util.go``
  ``applyPolicies``; ``pkg/controllers/job/state/running.go``, ``restarting.go`` ``restartingUpdateStatus``). So a
  Volcano job runs at most :func:`volcano_attempts` attempts, each bounded by the deadline: the whole job by
  deadline x attempts (:func:`volcano_bound_seconds`), plus the time its pods wait for nodes between attempts.
- **Kubeflow training operator v1 PyTorchJob** (:class:`~trainium_eks.manifests.jobs.pytorch_job.PyTorchJobChart`):
  ``spec.runPolicy.activeDeadlineSeconds`` bounds the whole job, every restart included. It counts from the job's
  ``status.startTime``, set when the operator first updates the job's status (kubeflow/trainer v1.9.4
  ``pkg/controller.v1/pytorch/pytorchjob_controller.go`` ``UpdateJobStatus``); once past, the operator sets the
  condition ``Failed`` first, then deletes pods as ``cleanPodPolicy`` says (``pkg/controller.v1/common/job.go``
  ``ReconcileJobs``, ``DeletePodsAndServices``): with ``None`` it deletes none and the pods run on, so the chart uses
  ``Running``.

A deadline is part of the job's hashed spec (:mod:`~trainium_eks.manifests.jobs.job_naming`): another deadline is
another job, never an update of the field in place (which a TrainJob's CRD refuses, by the rule above).
"""

from __future__ import annotations

from typing import Any

from trainium_eks.core.validation import Problems, check_integer

HOUR = 3600

MIN_DEADLINE_SECONDS = 60
"""The shortest deadline a job chart takes: a minute (image pulls alone may take longer)."""

MAX_DEADLINE_SECONDS = 90 * 24 * HOUR
"""The longest deadline a job chart takes, and the longest a release Job may wait
(:data:`~trainium_eks.manifests.jobs.job_release.MAX_TIMEOUT_SECONDS` is this): 90 days, far below what the APIs
admit (a pod's
``activeDeadlineSeconds`` is at most 2^31 - 1: kubernetes v1.36.3 ``pkg/apis/core/validation/validation.go``
``ValidatePodSpec``)."""

DEFAULT_DEADLINE_SECONDS = 24 * HOUR
"""The deadline of a distributed job chart built without one (``VolcanoJobChart``, ``TrainJobChart``,
``PyTorchJobChart``): 24 hours, the hybrid workflow's default ``max_runtime``
(:data:`~trainium_eks.constructs.hybrid_workflow.DEFAULT_MAX_RUNTIME`). The seed workloads set their own
(:mod:`trainium_eks.workloads`)."""


def check_deadline(problems: Problems, setting: str, value: Any) -> bool:
    """``value`` is a deadline in seconds: an integer from :data:`MIN_DEADLINE_SECONDS` to
    :data:`MAX_DEADLINE_SECONDS`."""
    return check_integer(problems, setting, value, minimum=MIN_DEADLINE_SECONDS, maximum=MAX_DEADLINE_SECONDS)


def volcano_attempts(max_retry: int) -> int:
    """How many times a Volcano job with ``maxRetry`` = ``max_retry`` and ``PodFailed -> RestartJob`` may run: each
    failure counts a retry, and the job fails once the count reaches ``maxRetry`` (volcano-sh/volcano v1.15.1
    ``pkg/controllers/job/state/restarting.go``), so ``max_retry`` attempts, and one with ``max_retry`` 0."""
    return max(1, max_retry)


def volcano_bound_seconds(deadline_seconds: int, max_retry: int) -> int:
    """The longest a Volcano job whose pods carry ``activeDeadlineSeconds`` = ``deadline_seconds`` may run on its nodes:
    the deadline times :func:`volcano_attempts` (time spent waiting for nodes between attempts aside)."""
    return deadline_seconds * volcano_attempts(max_retry)

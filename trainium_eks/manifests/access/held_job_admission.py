"""Who may create a held job: only its release, enforced by the API server."""

from __future__ import annotations

from typing import Any, Dict, List

from trainium_eks.core.validation import Problems, check_dns_label
from trainium_eks.manifests.access.admission_policy import add_admission_policy
from trainium_eks.manifests.chart import LibraryChart
from trainium_eks.manifests.jobs.job_release import RELEASE_ANNOTATION, RELEASE_COMPONENT, RELEASE_SERVICE_ACCOUNT
from trainium_eks.manifests.jobs.job_release_program import API


def admission_name(namespace: str) -> str:
    """The name of the policy and its binding for ``namespace``."""
    return f"trainium-eks-held-jobs-{namespace}"


def _resource_rules() -> List[Dict[str, Any]]:
    """One rule per job kind a release creates (:data:`API`), on ``CREATE`` only."""
    rules = []
    for api_version, _, collection in API.values():
        group, _, version = api_version.rpartition("/")
        rules.append(
            {
                "apiGroups": [group],
                "apiVersions": [version],
                "resources": [collection.rsplit("/", 1)[1]],
                "operations": ["CREATE"],
            }
        )
    return rules


class HeldJobAdmissionChart(LibraryChart):
    """A ValidatingAdmissionPolicy and its binding that let only the release service account of a namespace
    (``job-release``) create a held job there: a job whose manifest carries the
    :data:`~trainium_eks.manifests.jobs.job_release.RELEASE_ANNOTATION` (every gang of the library's job charts, and
    every job that waits for others: :func:`~trainium_eks.manifests.jobs.job_release.held_annotations`).

    Why: a held job's manifest is only safe to create through its release Job
    (:class:`~trainium_eks.manifests.jobs.job_release.JobReleaseChart`), which waits for the jobs it waits for and, for
    a gang, holds every node first. The same chart applied any other way (``cluster.add_cdk8s_chart``, ``kubectl
    apply`` of its YAML) starts at once, before what it waits for has completed, and a gang of it that fits in part on
    nodes already up waits for ever for the rest while billing them (Volcano marks the placed pods ``Schedulable``,
    Karpenter launches only for ``Unschedulable`` ones). The API server refuses it instead, with a message that names
    the way to apply it (``JobSequence.add``). Jobs without the annotation (users' own manifests, capacity Jobs, release
    Jobs) and every update or delete are not looked at.

    The policy (Kubernetes ``ValidatingAdmissionPolicy``, GA since 1.30, evaluated in the API server itself: no webhook
    to run or reach) matches ``CREATE`` of batch/v1 Jobs, Volcano Jobs, TrainJobs and PyTorchJobs, selects the held ones
    with a match condition on the annotation and denies unless ``request.userInfo.username`` is
    ``system:serviceaccount:<namespace>:job-release``; ``failurePolicy: Fail``. The binding (``validationActions:
    [Deny]``) selects the namespace by its ``kubernetes.io/metadata.name`` label, which the API server sets on every
    namespace. Both are cluster-scoped and named :func:`admission_name`.

    :param namespace: The namespace whose held jobs the policy guards. Required.
    """

    def __init__(self, *, namespace: str) -> None:
        problems = Problems("held job admission chart")
        check_dns_label(problems, "namespace", namespace)
        problems.raise_if_any()
        super().__init__(RELEASE_COMPONENT, namespace=namespace)
        name = admission_name(namespace)
        release_user = f"system:serviceaccount:{namespace}:{RELEASE_SERVICE_ACCOUNT}"
        add_admission_policy(
            self,
            name,
            rules=_resource_rules(),
            conditions=[
                {
                    "name": "held-job",
                    "expression": (
                        f"has(object.metadata.annotations) && '{RELEASE_ANNOTATION}' in object.metadata.annotations"
                    ),
                }
            ],
            validations=[
                {
                    "expression": f"request.userInfo.username == '{release_user}'",
                    "reason": "Forbidden",
                    "messageExpression": (
                        f"'this job carries the {RELEASE_ANNOTATION} annotation: it is held, and only its "
                        f"release Job (service account {RELEASE_SERVICE_ACCOUNT} of {namespace}) creates it, "
                        "once what it waits for has completed and, for a gang, once every node is held; "
                        "apply its chart with JobSequence.add (trainium-eks), not as it is, which ' + "
                        "request.userInfo.username + ' did'"
                    ),
                }
            ],
            namespace=namespace,
        )

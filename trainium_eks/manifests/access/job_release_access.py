"""What release Jobs may do in a namespace: read the jobs they wait for, create the kinds they hold; and, for a fabric
check, taint the nodes it found slow."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from trainium_eks.core.validation import Problems, check_dns_label
from trainium_eks.manifests.chart import LibraryChart
from trainium_eks.manifests.jobs.job_release import RELEASE_SERVICE_ACCOUNT
from trainium_eks.manifests.jobs.job_release_program import API

READER_ROLE = "job-release-read"
CAPACITY_ROLE = "job-release-capacity"
FABRIC_SUSPECT_ROLE = "trainium-eks-fabric-suspect"
"""The ClusterRole that lets release Jobs taint a fabric check's suspect nodes (:func:`fabric_suspect_rules`), applied
once per cluster with the admission policy that limits it to that taint
(:class:`~trainium_eks.manifests.access.fabric_suspect_admission.FabricSuspectAdmissionChart`)."""


def fabric_suspect_rules() -> List[Dict[str, Any]]:
    """The rules of :data:`FABRIC_SUSPECT_ROLE`: ``get`` and ``patch`` on nodes (a release reads a suspect node, then
    patches its taints with the ``resourceVersion`` it read:
    :class:`~trainium_eks.manifests.jobs.job_release_program.FabricSuspects`)."""
    return [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]


def fabric_suspect_binding(namespace: str) -> str:
    """The name of the ClusterRoleBinding of :data:`FABRIC_SUSPECT_ROLE` to the release account of ``namespace``."""
    return f"{FABRIC_SUSPECT_ROLE}-{namespace}"


def creator_role(kind: str) -> str:
    """Name of the Role that lets release Jobs create jobs of ``kind`` (``vcjob``, ``trainjob``, ...)."""
    return f"job-release-create-{kind}"


def _group_and_resource(kind: str) -> Tuple[str, str]:
    api_version, _, collection = API[kind]
    return api_version.rpartition("/")[0], collection.rsplit("/", 1)[1]


class _RoleChart(LibraryChart):
    """A chart of Roles bound to the release service account of its namespace."""

    def __init__(self, namespace: str) -> None:
        problems = Problems("job release access chart")
        check_dns_label(problems, "namespace", namespace)
        problems.raise_if_any()
        super().__init__("job-release", namespace=namespace)

    def add_bound_role(self, name: str, rules: List[Dict[str, Any]]) -> None:
        self.add_object(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": self.metadata(name),
                "rules": rules,
            }
        )
        self.add_object(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": self.metadata(name),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": [
                    {"kind": "ServiceAccount", "name": RELEASE_SERVICE_ACCOUNT, "namespace": self.namespace_name}
                ],
            }
        )


class JobReleaseAccessChart(_RoleChart):
    """The service account ``job-release`` of a namespace, a Role to read the job kinds a release may wait for
    (``get`` on batch/v1 Jobs, Volcano Jobs, TrainJobs and PyTorchJobs: the program reads them one by one, and its own
    Job for its uid), and a Role to hold a gang's nodes before creating it
    (:class:`~trainium_eks.manifests.jobs.job_release_program.Capacity`): ``create``, ``list`` and ``delete`` on
    batch/v1 Jobs (its capacity Jobs, found by label), ``list`` on pods (are they bound?), ``create`` on events
    (CapacityHeld, CapacityNotHeld, CapacityQueued) and ``list`` on them (Karpenter's ``FailedScheduling`` events of
    its capacity pods: is a NodePool's limit reached?), ``create`` and ``get`` on NetworkPolicies (the job's peers
    policy, :func:`~trainium_eks.manifests.jobs.job_release_program.peers_policy`, and no other shape:
    :class:`~trainium_eks.manifests.access.peers_policy_admission.PeersPolicyAdmissionChart`). Nothing else: no
    update, no pod creation, no secrets; the Roles that let releases create the kinds they hold are
    :class:`JobReleaseCreatorChart`, and the binding that lets them taint a fabric check's suspect nodes is
    :class:`FabricSuspectAccessChart`. Training pods run as their own service
    account, which needs no Kubernetes permission.

    :param namespace: Required.
    """

    def __init__(self, *, namespace: str) -> None:
        super().__init__(namespace)
        self.add_object(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": self.metadata(RELEASE_SERVICE_ACCOUNT)}
        )
        rules = []
        for kind in API:
            group, resource = _group_and_resource(kind)
            rules.append({"apiGroups": [group], "resources": [resource], "verbs": ["get"]})
        self.add_bound_role(READER_ROLE, rules)
        self.add_bound_role(
            CAPACITY_ROLE,
            [
                {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "list", "delete"]},
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
                {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "list"]},
                {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": ["create", "get"]},
            ],
        )


class JobReleaseCreatorChart(_RoleChart):
    """A Role, bound to the service account ``job-release`` of a namespace, that lets release Jobs create jobs of one
    kind, and delete them: a release deletes the gang it created when a restart of it stalls, to hold all its nodes
    again and create it anew (:class:`~trainium_eks.manifests.jobs.job_release_program.GangWatch`).

    :param namespace: Required.
    :param kind: ``job`` (batch/v1), ``vcjob``, ``trainjob`` or ``pytorchjob``. Required.
    """

    def __init__(self, *, namespace: str, kind: str) -> None:
        if not isinstance(kind, str) or kind not in API:
            problems = Problems("job release creator chart")
            problems.add("kind", kind, f"one of {', '.join(API)}")
            problems.raise_if_any()
        super().__init__(namespace)
        group, resource = _group_and_resource(kind)
        self.add_bound_role(
            creator_role(kind), [{"apiGroups": [group], "resources": [resource], "verbs": ["create", "delete"]}]
        )


class FabricSuspectAccessChart(_RoleChart):
    """A ClusterRoleBinding (:func:`fabric_suspect_binding`) of the ClusterRole :data:`FABRIC_SUSPECT_ROLE` (``get``
    and ``patch`` on nodes) to the service account ``job-release`` of a namespace: the release of a fabric check taints
    the nodes its check found slow, so that Karpenter replaces them
    (:class:`~trainium_eks.manifests.jobs.job_release_program.FabricSuspects`). Nodes are cluster-scoped, so the
    permission is too; :class:`~trainium_eks.manifests.access.fabric_suspect_admission.FabricSuspectAdmissionChart`
    holds the ClusterRole, applied once per cluster with the admission policy that lets a release add that taint and
    nothing else (without it this binding grants nothing, and a release names the suspect nodes without tainting them).
    Applied only to namespaces that hold fabric checks
    (:class:`~trainium_eks.constructs.job_sequence.JobSequence`).

    :param namespace: Required.
    """

    def __init__(self, *, namespace: str) -> None:
        super().__init__(namespace)
        self.add_object(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": self.metadata(fabric_suspect_binding(namespace), cluster_scoped=True),
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": FABRIC_SUSPECT_ROLE,
                },
                "subjects": [{"kind": "ServiceAccount", "name": RELEASE_SERVICE_ACCOUNT, "namespace": namespace}],
            }
        )

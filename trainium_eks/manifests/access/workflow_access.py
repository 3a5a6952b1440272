"""WorkflowAccessChart: what a Step Functions state machine may do in the cluster (TrainJobs of one namespace)."""

from __future__ import annotations

from trainium_eks.core.conventions import DEFAULT_NAMESPACE
from trainium_eks.core.validation import Problems, check_bool, check_dns_label, check_dns_subdomain, check_text
from trainium_eks.manifests.addons.training_runtime import TRAINER_API_VERSION
from trainium_eks.manifests.chart import LibraryChart

WORKFLOW_GROUP = "trainium-eks:workflow"
"""Kubernetes group of the state machine's IAM role, named by its EKS access entry (``kubernetesGroups``)."""

WORKFLOW_VERBS = ("create", "get", "delete")
"""What the workflow does with a TrainJob: create it, read its status conditions while it runs, delete it when it
outlives its maximum run time. Nothing lists or watches (the workflow knows the job's name), nothing updates."""


class WorkflowAccessChart(LibraryChart):
    """A Role and a RoleBinding in the training namespace that let one Kubernetes group create, read and delete
    TrainJobs (``trainer.kubeflow.org``) there, and nothing else.

    Why a Role and not an EKS access policy: ``AmazonEKSEditPolicy`` maps to Kubernetes' aggregated ``edit`` role,
    which covers custom resources only when their ClusterRoles carry the aggregation labels, and it grants far more
    (pods, secrets, services...). Source: EKS user guide, "Associate access policies with access entries"
    (access-policy-permissions.html); Kubernetes documentation, "Using RBAC Authorization" (aggregated ClusterRoles).
    The access entry of the state machine's role names the group and has no access policy, so this Role is all the
    role may do in the cluster.

    :param group: The Kubernetes group of the access entry. Default: :data:`WORKFLOW_GROUP`.
    :param namespace: The namespace of the TrainJobs. Default: ``training``.
    :param name: Name of the Role and the RoleBinding. Default: ``hybrid-workflow``.
    :param read_jobs: Also let the group read (``get``) batch/v1 Jobs of the namespace: the workflow checks that the
        Job staging its data has completed. Default: false.
    """

    def __init__(
        self,
        *,
        group: str = WORKFLOW_GROUP,
        namespace: str = DEFAULT_NAMESPACE,
        name: str = "hybrid-workflow",
        read_jobs: bool = False,
    ) -> None:
        problems = Problems("workflow access chart")
        check_workflow_group(problems, "group", group)
        check_dns_label(problems, "namespace", namespace)
        check_dns_subdomain(problems, "name", name)
        check_bool(problems, "read_jobs", read_jobs)
        problems.raise_if_any()
        super().__init__("hybrid-workflow", namespace=namespace)
        self.group = group
        self.role_name = name
        self.add_object(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": self.metadata(name),
                "rules": [
                    {
                        "apiGroups": [TRAINER_API_VERSION.split("/")[0]],
                        "resources": ["trainjobs"],
                        "verbs": list(WORKFLOW_VERBS),
                    },
                    *([{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get"]}] if read_jobs else []),
                ],
            }
        )
        self.add_object(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": self.metadata(name),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}],
            }
        )


def check_workflow_group(problems: Problems, setting: str, group: object) -> bool:
    """``group`` can be named by an EKS access entry: a non-empty string of at most 63 characters without whitespace,
    not ``system:...`` (Kubernetes reserves the prefix for its own groups: Kubernetes documentation, "Using RBAC
    Authorization", referring to subjects)."""
    allowed = "a Kubernetes group name of at most 63 characters that does not start with 'system:'"
    if not check_text(problems, setting, group, allowed=allowed):
        return False
    if len(group) > 63 or group.startswith("system:") or any(c.isspace() for c in group):
        problems.add(setting, group, allowed)
        return False
    return True

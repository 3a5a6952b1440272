"""WorkflowAccessChart: what a Step Functions state machine may do in the cluster (release Jobs and TrainJobs of one
namespace)."""

from __future__ import annotations

from trainium_eks.core.conventions import DEFAULT_NAMESPACE
from trainium_eks.core.validation import Problems, check_dns_label, check_dns_subdomain, check_text
from trainium_eks.manifests.addons.training_runtime import TRAINER_API_VERSION
from trainium_eks.manifests.chart import LibraryChart
from trainium_eks.moved import removed_props

WORKFLOW_GROUP = "trainium-eks:workflow"
"""Kubernetes group of the state machine's IAM role, named by its EKS access entry (``kubernetesGroups``)."""

WORKFLOW_VERBS = ("list",)
"""What the workflow does with a TrainJob: list the run's by name (a field selector), which answers an empty list
before the release has created it, where a get would answer an error. Nothing reads one by name, creates, updates or
deletes one: the run's release creates it, and it goes with the release (owner reference)."""

RELEASE_VERBS = ("create", "get", "delete")
"""What the workflow does with batch/v1 Jobs: create a run's release, read its status (and the data staging Job's),
delete the release when the run outlives its maximum run time."""


class WorkflowAccessChart(LibraryChart):
    """A Role and a RoleBinding in the training namespace that let one Kubernetes group create, read and delete
    batch/v1 Jobs (the runs' releases) and list TrainJobs (``trainer.kubeflow.org``) there, and nothing else.

    Why a Role and not an EKS access policy: ``AmazonEKSEditPolicy`` maps to Kubernetes' aggregated ``edit`` role,
    which covers custom resources only when their ClusterRoles carry the aggregation labels, and it grants far more
    (pods, secrets, services...). Source: EKS user guide, "Associate access policies with access entries"
    (access-policy-permissions.html); Kubernetes documentation, "Using RBAC Authorization" (aggregated ClusterRoles).
    The access entry of the state machine's role names the group and has no access policy, so this Role is all the
    role may do in the cluster. Creating Jobs lets the group run pods in the namespace under its Pod Security level
    and with any of its service accounts, as creating a TrainJob (whose runtime names the image and command) already
    did; the state machine's definition fixes the release Job it creates, and the role is assumable only by the
    workflow's two state machines.

    :param group: The Kubernetes group of the access entry. Default: :data:`WORKFLOW_GROUP`.
    :param namespace: The namespace of the TrainJobs. Default: ``training``.
    :param name: Name of the Role and the RoleBinding. Default: ``hybrid-workflow``.
    """

    @removed_props(
        "WorkflowAccessChart",
        {"read_jobs": "the group always reads Jobs now: it creates and reads each run's release Job"},
    )
    def __init__(
        self,
        *,
        group: str = WORKFLOW_GROUP,
        namespace: str = DEFAULT_NAMESPACE,
        name: str = "hybrid-workflow",
    ) -> None:
        problems = Problems("workflow access chart")
        check_workflow_group(problems, "group", group)
        check_dns_label(problems, "namespace", namespace)
        check_dns_subdomain(problems, "name", name)
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
                    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": list(RELEASE_VERBS)},
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

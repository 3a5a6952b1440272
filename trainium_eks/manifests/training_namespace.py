"""TrainingNamespaceChart: the namespace of training jobs, their service account and what it may read."""

from __future__ import annotations

from trainium_eks.conventions import DEFAULT_NAMESPACE, DEFAULT_SERVICE_ACCOUNT
from trainium_eks.manifests.chart import LibraryChart
from trainium_eks.validation import Problems, check_dns_label, check_dns_subdomain

READ = ["get", "list", "watch"]
JOB_READER_ROLE = "training-job-reader"
"""Role that lets training pods read the status of jobs in their namespace (the start gates of dependent jobs)."""


class TrainingNamespaceChart(LibraryChart):
    """The training namespace with Pod Security admission ``baseline`` enforced (``restricted`` warned), the
    service account of training pods (bound to its IAM role by the EKS Pod Identity association of
    :class:`~trainium_eks.constructs.training_pod_identity.TrainingPodIdentity`), and a Role that lets it read
    batch, Volcano and Kubeflow jobs of the namespace, which the start gates of dependent jobs need.

    :param namespace: Default: ``training``.
    :param service_account: Default: ``training``.
    """

    def __init__(self, *, namespace: str = DEFAULT_NAMESPACE, service_account: str = DEFAULT_SERVICE_ACCOUNT) -> None:
        problems = Problems("training namespace chart")
        check_dns_label(problems, "namespace", namespace)
        check_dns_subdomain(problems, "service_account", service_account)
        problems.raise_if_any()
        super().__init__("training-namespace", namespace=namespace)
        self.service_account = service_account
        self.add_object(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": self.metadata(
                    namespace,
                    cluster_scoped=True,
                    labels={
                        "pod-security.kubernetes.io/enforce": "baseline",
                        "pod-security.kubernetes.io/warn": "restricted",
                    },
                ),
            }
        )
        self.add_object({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": self.metadata(service_account)})
        self.add_object(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": self.metadata(JOB_READER_ROLE),
                "rules": [
                    {"apiGroups": ["batch", "batch.volcano.sh"], "resources": ["jobs"], "verbs": READ},
                    {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs"], "verbs": READ},
                    {"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs"], "verbs": READ},
                ],
            }
        )
        self.add_object(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": self.metadata(JOB_READER_ROLE),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": JOB_READER_ROLE},
                "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}],
            }
        )

"""TrainingNamespaceChart: the namespace of training jobs and their service account."""

from __future__ import annotations

from trainium_eks.core.conventions import DEFAULT_NAMESPACE, DEFAULT_SERVICE_ACCOUNT
from trainium_eks.core.validation import Problems, check_dns_label, check_dns_subdomain
from trainium_eks.manifests.chart import LibraryChart


class TrainingNamespaceChart(LibraryChart):
    """The training namespace with Pod Security admission ``baseline`` enforced (``restricted`` warned), the
    service account of training pods (bound to its IAM role by the EKS Pod Identity association of
    :class:`~trainium_eks.constructs.training_pod_identity.TrainingPodIdentity`), with no Kubernetes permission and no
    token mounted by default: training pods never call the Kubernetes API (jobs that wait for others are created by
    their release Jobs, which have their own service account). Pod Identity still gives them AWS credentials: EKS
    mounts its own projected token (audience ``pods.eks.amazonaws.com``) whatever ``automountServiceAccountToken``
    says (EKS user guide, pod-id-how-it-works: the volume ``eks-pod-identity-token``).

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
        self.add_object(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": self.metadata(service_account),
                "automountServiceAccountToken": False,
            }
        )

"""SystemNetworkPolicyChart: a namespace of the cluster's own components admits all traffic to and from its pods, as
the VPC CNI's strict mode needs."""

from __future__ import annotations

from trainium_eks.core.conventions import INGRESS_POLICY_LABEL
from trainium_eks.core.validation import Problems, check_bool, check_dns_label
from trainium_eks.manifests.chart import LibraryChart

ALLOW_ALL_POLICY = "allow-all"
"""The name of the NetworkPolicy of :class:`SystemNetworkPolicyChart`."""


class SystemNetworkPolicyChart(LibraryChart):
    """A NetworkPolicy ``allow-all`` that admits every flow to and from every pod of ``namespace`` whose ingress no
    policy of its own governs (pods without :data:`~trainium_eks.core.conventions.INGRESS_POLICY_LABEL`, such as the
    device plugins, keep theirs), and, with ``create_namespace``, the namespace itself (applied before the policy).

    Applied by :class:`~trainium_eks.constructs.TrainingCluster` in both of its network policy modes (in standard
    mode it changes nothing). Why: in the VPC CNI's strict mode a pod starts with a default deny policy, "then
    policies are configured", and "you must have a network policy for every endpoint that your pods need to access
    in your cluster. Note that this requirement applies to the CoreDNS pods" (EKS user guide,
    cni-network-policy-configure.html, Step 1). A pod that no policy selects stays denied: the agent sets its
    ``pod_state`` to ``DEFAULT_DENY`` when it starts and again when its last policy goes
    (aws/aws-network-policy-agent v1.4.1 ``pkg/rpc/rpc_handler.go``, ``controllers/policyendpoints_controller.go``).
    A pod that a policy selects for one direction only is open in the other (the same controller adds a catch-all
    entry), so this policy opens both. Pods on the host network are not affected. Policies add up (Kubernetes,
    "Network Policies"), so in a namespace where you restrict pods with policies of your own, label those pods with
    the label above, or this policy admits what yours leave out.

    :param namespace: The namespace. Required.
    :param create_namespace: Create the namespace (retained on delete, like every namespace the library applies), for
        one that a Helm release installed after this chart will use. Default: false.
    """

    def __init__(self, *, namespace: str, create_namespace: bool = False) -> None:
        problems = Problems("system network policy chart")
        check_dns_label(problems, "namespace", namespace)
        check_bool(problems, "create_namespace", create_namespace)
        problems.raise_if_any()
        super().__init__("system-network-policy", namespace=namespace)
        if create_namespace:
            self.add_object(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": self.metadata(namespace, cluster_scoped=True)}
            )
        self.add_object(
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": self.metadata(ALLOW_ALL_POLICY),
                "spec": {
                    "podSelector": {"matchExpressions": [{"key": INGRESS_POLICY_LABEL, "operator": "DoesNotExist"}]},
                    "policyTypes": ["Ingress", "Egress"],
                    "ingress": [{}],
                    "egress": [{}],
                },
            }
        )

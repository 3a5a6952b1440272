"""What NetworkPolicy a release may create: a held job's peers policy, and no other."""

from __future__ import annotations

from trainium_eks.core.conventions import INGRESS_POLICY_LABEL
from trainium_eks.core.validation import Problems, check_dns_label
from trainium_eks.manifests.access.admission_policy import add_admission_policy
from trainium_eks.manifests.chart import LibraryChart
from trainium_eks.manifests.jobs.job_release import RELEASE_COMPONENT, RELEASE_SERVICE_ACCOUNT
from trainium_eks.manifests.jobs.job_release_program import PEERS_SUFFIX

PEER = "object.spec.ingress[0].from[0]"

PEERS_SHAPE = [
    (f"object.metadata.name.endsWith('{PEERS_SUFFIX}')", f"its name ends with {PEERS_SUFFIX}"),
    (
        "has(object.spec.podSelector.matchLabels) && !has(object.spec.podSelector.matchExpressions) && "
        f"object.spec.podSelector.matchLabels == {{'{INGRESS_POLICY_LABEL}': object.metadata.name}}",
        f"it selects the pods labelled {INGRESS_POLICY_LABEL}=<its name>, by that label alone",
    ),
    (
        "has(object.spec.policyTypes) && object.spec.policyTypes == ['Ingress'] && !has(object.spec.egress)",
        "it governs ingress only",
    ),
    (
        "has(object.spec.ingress) && size(object.spec.ingress) == 1 && !has(object.spec.ingress[0].ports) && "
        "has(object.spec.ingress[0].from) && size(object.spec.ingress[0].from) == 1 && "
        f"!has({PEER}.namespaceSelector) && !has({PEER}.ipBlock) && has({PEER}.podSelector) && "
        f"has({PEER}.podSelector.matchLabels) && !has({PEER}.podSelector.matchExpressions) && "
        f"{PEER}.podSelector.matchLabels == object.spec.podSelector.matchLabels",
        "it admits the pods it selects and no other",
    ),
]
"""(CEL expression, what it says) of a held job's peers policy
(:func:`~trainium_eks.manifests.jobs.job_release_program.peers_policy`)."""


def admission_name(namespace: str) -> str:
    """The name of the policy and its binding for ``namespace``."""
    return f"trainium-eks-release-network-policies-{namespace}"


class PeersPolicyAdmissionChart(LibraryChart):
    """A ValidatingAdmissionPolicy and its binding that let the release service account of a namespace
    (``job-release``) create or change a NetworkPolicy there only when it is a held job's peers policy
    (:func:`~trainium_eks.manifests.jobs.job_release_program.peers_policy`): named ``<job>-peers``, selecting the pods
    labelled ``trainium-eks/ingress-policy: <its name>`` and admitting ingress from those pods only, on every port;
    no egress rule, no other peer, no other pod.

    Why: the release creates each held job's peers policy before the job (the job's pods reach each other and no
    other pod of the namespace: :class:`~trainium_eks.manifests.access.training_network_policy.
    TrainingNetworkPolicyChart`), so its service account may create NetworkPolicies; any other policy from it (one
    that admits every pod, or opens egress) would undo the namespace's isolation, so the API server refuses it.
    Requests of everyone else are not looked at (match condition on ``request.userInfo.username``).

    The policy (Kubernetes ``ValidatingAdmissionPolicy``, evaluated in the API server itself) matches ``CREATE`` and
    ``UPDATE`` of ``networking.k8s.io/v1`` NetworkPolicies, ``failurePolicy: Fail``; the binding (``validationActions:
    [Deny]``) selects the namespace by its ``kubernetes.io/metadata.name`` label. Both are cluster-scoped and named
    :func:`admission_name`.

    :param namespace: The namespace whose release account the policy limits. Required.
    """

    def __init__(self, *, namespace: str) -> None:
        problems = Problems("peers policy admission chart")
        check_dns_label(problems, "namespace", namespace)
        problems.raise_if_any()
        super().__init__(RELEASE_COMPONENT, namespace=namespace)
        name = admission_name(namespace)
        release_user = f"system:serviceaccount:{namespace}:{RELEASE_SERVICE_ACCOUNT}"
        rule = {
            "apiGroups": ["networking.k8s.io"],
            "apiVersions": ["v1"],
            "resources": ["networkpolicies"],
            "operations": ["CREATE", "UPDATE"],
        }
        validations = [
            {
                "expression": expression,
                "reason": "Forbidden",
                "message": f"a release Job creates no NetworkPolicy but a held job's peers policy, where {says}",
            }
            for expression, says in PEERS_SHAPE
        ]
        add_admission_policy(
            self,
            name,
            rules=[rule],
            conditions=[{"name": "release-account", "expression": f"request.userInfo.username == '{release_user}'"}],
            validations=validations,
            namespace=namespace,
        )

"""What a release may do to a node: add the fabric suspect taint, nothing else, enforced by the API server."""

from __future__ import annotations

from typing import List

from trainium_eks.core.conventions import FABRIC_SUSPECT_TAINT
from trainium_eks.manifests.access.admission_policy import add_admission_policy
from trainium_eks.manifests.access.job_release_access import FABRIC_SUSPECT_ROLE, fabric_suspect_rules
from trainium_eks.manifests.chart import LibraryChart
from trainium_eks.manifests.jobs.job_release import RELEASE_COMPONENT, RELEASE_SERVICE_ACCOUNT

FABRIC_SUSPECT_ADMISSION = "trainium-eks-fabric-suspect"
"""The name of the policy and of its binding (cluster-scoped, one per cluster)."""

RELEASE_USER_CONDITION = (
    "request.userInfo.username.startsWith('system:serviceaccount:') && "
    f"request.userInfo.username.endsWith(':{RELEASE_SERVICE_ACCOUNT}')"
)
"""CEL: the request comes from the release service account of any namespace (``system:serviceaccount:<namespace>:
job-release``; a namespace's name has no colon)."""

UNCHANGED_FIELDS = ("labels", "annotations", "finalizers", "ownerReferences")
"""Metadata fields of a node that a release's update leaves as they were (present or absent, and equal), besides
``spec.unschedulable``. The API server itself keeps a node's status on an update of the node, and its
``podCIDR(s)`` and ``providerID`` once set (EKS nodes register with both)."""


def _same(field: str) -> str:
    """CEL: ``field`` (a path below the object) is absent from both objects, or present in both and equal."""
    new, old = f"object.{field}", f"oldObject.{field}"
    return f"has({new}) == has({old}) && (!has({new}) || {new} == {old})"


def unchanged_expression() -> str:
    """CEL: the node's labels, annotations, finalizers, owners and ``unschedulable`` are as they were
    (``unschedulable`` absent counts as false)."""
    unschedulable = (
        "(has(object.spec.unschedulable) && object.spec.unschedulable) == "
        "(has(oldObject.spec.unschedulable) && oldObject.spec.unschedulable)"
    )
    return " && ".join([*(f"({_same('metadata.' + field)})" for field in UNCHANGED_FIELDS), f"({unschedulable})"])


def taints_expression() -> str:
    """CEL: the new taints without the suspect taint's key are the old taints (in order; none when the node had
    none), so that the update adds taints of that key only, removes or changes no other, and the node had none of
    that key before."""
    key = FABRIC_SUSPECT_TAINT
    return (
        "has(object.spec.taints) && (has(oldObject.spec.taints) ? "
        f"object.spec.taints.filter(t, t.key != '{key}') == oldObject.spec.taints : "
        f"object.spec.taints.all(t, t.key == '{key}'))"
    )


def suspect_taint_expression() -> str:
    """CEL: the new taints have exactly one taint of the suspect taint's key, and it is ``NoSchedule`` (one that
    evicts, ``NoExecute``, would stop the node's running pods)."""
    key = FABRIC_SUSPECT_TAINT
    return (
        f"has(object.spec.taints) && object.spec.taints.exists_one(t, t.key == '{key}') && "
        f"object.spec.taints.all(t, t.key != '{key}' || t.effect == 'NoSchedule')"
    )


KARPENTER_NODE_EXPRESSION = "has(oldObject.metadata.labels) && 'karpenter.sh/nodepool' in oldObject.metadata.labels"
"""CEL: the node is one a Karpenter NodePool launched (Karpenter labels its nodes ``karpenter.sh/nodepool``): only
those are replaced when tainted; a system node or a node group's node is not the release's to taint."""

DENIAL = f"a job release may only add one taint {FABRIC_SUSPECT_TAINT}:NoSchedule to a node"
"""The start of each denial's message."""


class FabricSuspectAdmissionChart(LibraryChart):
    """The ClusterRole that lets release Jobs taint nodes, and a ValidatingAdmissionPolicy and its binding that let
    them do nothing to a node but add the fabric suspect taint.

    Why: a fabric check's release taints the nodes its check found slow
    (:class:`~trainium_eks.manifests.jobs.job_release_program.FabricSuspects`:
    :data:`~trainium_eks.core.conventions.FABRIC_SUSPECT_TAINT`, ``NoSchedule``), so that Karpenter replaces them.
    That needs ``get`` and ``patch`` on nodes, cluster-scoped, which RBAC cannot narrow to one taint: a release
    account could otherwise relabel any node (and so steer pods), cordon it, remove its taints (and so let any pod
    onto accelerated or system nodes), give it an owner for the garbage collector to delete it by, or taint it
    ``NoExecute``. The policy refuses every update of a node by a release account (``system:serviceaccount:<namespace>:
    job-release``, any namespace: a match condition on ``request.userInfo.username``) except one that adds one taint
    of that key, ``NoSchedule``, to a Karpenter node (:data:`KARPENTER_NODE_EXPRESSION`) that had none, and changes
    nothing else: its other taints (in order), labels,
    annotations, finalizers, owners and ``unschedulable`` stay as they were (:data:`UNCHANGED_FIELDS`). Other users
    (kubelets, Karpenter, administrators) are not looked at.

    The ClusterRole ``trainium-eks-fabric-suspect``
    (:func:`~trainium_eks.manifests.access.job_release_access.fabric_suspect_rules`) is here, not in the namespace's
    :class:`~trainium_eks.manifests.access.job_release_access.FabricSuspectAccessChart` (which binds it to the
    namespace's release account): the permission comes and goes with the policy that limits it, and a cluster-scoped
    object is applied once per cluster, not once per namespace (two namespaces' charts applying one object would
    delete it for both when either goes). Without this chart a release's binding grants nothing: the release cannot
    read the node, and says so in its ``FabricSuspectsRemain`` event.

    The policy (Kubernetes ``ValidatingAdmissionPolicy``, GA since 1.30, evaluated in the API server itself) matches
    ``UPDATE`` of nodes (a patch is an update; ``nodes/status`` is another resource, which the ClusterRole does not
    grant); ``failurePolicy: Fail``. The binding (``validationActions: [Deny]``) selects every node. All three objects
    are cluster-scoped and named ``trainium-eks-fabric-suspect``; apply the chart once per cluster
    (:class:`~trainium_eks.constructs.job_sequence.JobSequence` does, with its first fabric check).
    """

    def __init__(self) -> None:
        super().__init__(RELEASE_COMPONENT)
        name = FABRIC_SUSPECT_ADMISSION
        self.add_object(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": self.metadata(FABRIC_SUSPECT_ROLE, cluster_scoped=True),
                "rules": fabric_suspect_rules(),
            }
        )
        add_admission_policy(
            self,
            name,
            rules=[{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["nodes"], "operations": ["UPDATE"]}],
            conditions=[{"name": "release-account", "expression": RELEASE_USER_CONDITION}],
            validations=self.validations(),
        )

    @staticmethod
    def validations() -> List[dict]:
        """The policy's validations: a Karpenter node, the taints, the suspect taint, everything else."""
        return [
            {
                "expression": KARPENTER_NODE_EXPRESSION,
                "reason": "Forbidden",
                "message": f"{DENIAL} of a Karpenter NodePool (label karpenter.sh/nodepool)",
            },
            {"expression": taints_expression(), "reason": "Forbidden", "message": f"{DENIAL}: other taints changed"},
            {
                "expression": suspect_taint_expression(),
                "reason": "Forbidden",
                "message": f"{DENIAL}: not one NoSchedule {FABRIC_SUSPECT_TAINT}",
            },
            {
                "expression": unchanged_expression(),
                "reason": "Forbidden",
                "message": f"{DENIAL}: labels, annotations, finalizers, owners or unschedulable changed",
            },
        ]

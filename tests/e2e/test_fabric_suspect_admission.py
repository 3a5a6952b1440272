"""The fabric suspect taint on the real API server: a namespace's release account, with its real token, taints a
Karpenter node ``trainium-eks/fabric-suspect`` through the release program's own code (and finds it tainted already,
or gone); every other change it tries to a node is refused, by the ValidatingAdmissionPolicy (labels, annotations,
other taints, the effect, cordoning, a node no Karpenter pool launched) or by RBAC (delete, status); the cluster's
admin is not looked at."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from e2e.api import Api, ApiError
from e2e.processes import wait_for
from trainium_eks.core.conventions import FABRIC_SUSPECT_TAINT
from trainium_eks.manifests.access.fabric_suspect_admission import FABRIC_SUSPECT_ADMISSION, FabricSuspectAdmissionChart
from trainium_eks.manifests.access.job_release_access import FabricSuspectAccessChart, JobReleaseAccessChart
from trainium_eks.manifests.jobs import job_release_program as program
from trainium_eks.manifests.jobs.job_release import RELEASE_SERVICE_ACCOUNT

NAMESPACE = "training"
NEURON = {"key": "aws.amazon.com/neuron", "value": "true", "effect": "NoSchedule"}
SUSPECT = {"key": FABRIC_SUSPECT_TAINT, "value": "train-fabric-abc", "effect": "NoSchedule"}
CAPACITY = {"cpu": "128", "memory": "512Gi", "pods": "110"}


def _refused(client: Api, name: str, patch, subresource: str = ""):
    """The API server's error for ``patch`` of node ``name`` by ``client``; None when it was applied."""
    try:
        client.patch("v1", "Node", name, patch, subresource=subresource)
    except ApiError as error:
        return error
    return None


def test_a_release_may_add_the_suspect_taint_to_a_node_and_nothing_else(cluster, monkeypatch):
    api = cluster.api
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    charts = (
        JobReleaseAccessChart(namespace=NAMESPACE),
        FabricSuspectAccessChart(namespace=NAMESPACE),
        FabricSuspectAdmissionChart(),
    )
    for chart in charts:
        for manifest in chart.manifests():
            api.create(manifest)
    labels = {"node.kubernetes.io/instance-type": "trn1.32xlarge", "karpenter.sh/nodepool": "accelerated"}
    for name, node_labels in (("slow", labels), ("other", labels), ("system", {"eks.amazonaws.com/nodegroup": "s"})):
        cluster.add_node(name, labels=node_labels, capacity=CAPACITY, taints=[NEURON])
        # The node lifecycle controller takes its not-ready taint off a second or so after the node is Ready.
        wait_for(
            f"node {name} to have its own taint only",
            lambda name=name: api.get("v1", "Node", name)["spec"].get("taints") == [NEURON],
            timeout=60,
        )
    token = api.token(NAMESPACE, RELEASE_SERVICE_ACCOUNT)
    release = Api(api.server, token, str(cluster.pki.pair.cert))
    # The API server enforces a new policy once its informers have it (a second or so): a bounded wait.
    wait_for(
        "the policy to refuse a release's label change",
        lambda: _refused(release, "other", {"metadata": {"labels": {"steer": "here"}}}) is not None,
        timeout=60,
    )
    policy = api.get("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", FABRIC_SUSPECT_ADMISSION)
    assert not ((policy.get("status") or {}).get("typeChecking") or {}).get("expressionWarnings"), policy["status"]

    account = Path(tempfile.mkdtemp())
    (account / "ca.crt").write_bytes(Path(cluster.pki.pair.cert).read_bytes())
    (account / "token").write_text(token)
    monkeypatch.setattr(program, "ACCOUNT", str(account))
    suspects = program.FabricSuspects(api.server, NAMESPACE, "r", "uid", {"metadata": {"name": SUSPECT["value"]}})
    assert suspects.taint("slow") == "tainted"
    node = api.get("v1", "Node", "slow")
    assert NEURON in node["spec"]["taints"] and SUSPECT in node["spec"]["taints"]
    assert node["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "trn1.32xlarge", "nothing else changed"
    assert suspects.taint("slow") == "tainted already" and suspects.taint("gone") == "gone"

    tainted = {"taints": [NEURON, SUSPECT]}  # what the release may do, with each change it may not
    for what, patch, denial in (
        ("no suspect taint", {"metadata": {"labels": {"steer": "here"}}}, "not one NoSchedule"),
        ("a label", {"metadata": {"labels": {"steer": "here"}}, "spec": tainted}, "labels, annotations"),
        ("an annotation", {"metadata": {"annotations": {"note": "x"}}, "spec": tainted}, "labels, annotations"),
        ("a cordon", {"spec": {**tainted, "unschedulable": True}}, "unschedulable changed"),
        ("another taint removed", {"spec": {"taints": [SUSPECT]}}, "other taints changed"),
        ("another key", {"spec": {"taints": [NEURON, SUSPECT, dict(SUSPECT, key="x.io/y")]}}, "other taints"),
        ("the effect", {"spec": {"taints": [NEURON, dict(SUSPECT, effect="NoExecute")]}}, "not one NoSchedule"),
    ):
        refused = _refused(release, "other", patch)
        assert refused is not None and refused.status == 403, (what, refused)
        assert "a job release may only add one taint" in str(refused) and denial in str(refused), (what, refused)
    refused = _refused(release, "system", {"spec": {"taints": [NEURON, SUSPECT]}})
    assert refused is not None and "of a Karpenter NodePool" in str(refused), "a system node is not the release's"
    with pytest.raises(ApiError) as deleting:
        release.delete("v1", "Node", "other")
    assert deleting.value.status == 403, "RBAC: get and patch only"
    refused = _refused(release, "other", {"status": {"capacity": {"cpu": "1"}}}, subresource="status")
    assert refused is not None and refused.status == 403, "RBAC: not nodes/status"
    assert _refused(api, "other", {"metadata": {"labels": {"admin": "yes"}}}) is None, "others are not looked at"

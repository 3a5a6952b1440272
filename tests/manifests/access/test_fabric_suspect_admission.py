"""FabricSuspectAdmissionChart and FabricSuspectAccessChart: release accounts may get and patch nodes, and the API
server lets them add the fabric suspect taint and nothing else. The policy's CEL is evaluated here with cel-python
(which does not type-check as the API server does); the objects are validated strictly against the built-in schemas."""

import copy

import celpy
import pytest

from tests.support.charts import objects
from tests.support.k8s_validation import validate_objects
from trainium_eks.core.conventions import FABRIC_SUSPECT_TAINT
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.manifests.access.fabric_suspect_admission import FabricSuspectAdmissionChart
from trainium_eks.manifests.access.job_release_access import FabricSuspectAccessChart

NAME = "trainium-eks-fabric-suspect"
RELEASE_USER = "system:serviceaccount:training:job-release"
SUSPECT = {"key": FABRIC_SUSPECT_TAINT, "value": "check-1", "effect": "NoSchedule"}
NEURON = {"key": "aws.amazon.com/neuron", "value": "true", "effect": "NoSchedule"}
NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "ip-10-0-1-5", "labels": {"karpenter.sh/nodepool": "trn1"}, "annotations": {"a": "b"}},
    "spec": {"providerID": "aws:///us-east-1a/i-0123", "taints": [NEURON]},
}


def policy_and_binding():
    found = objects(FabricSuspectAdmissionChart())
    return found["ValidatingAdmissionPolicy", NAME], found["ValidatingAdmissionPolicyBinding", NAME]


def test_the_cluster_role_lets_get_and_patch_nodes_only():
    role = objects(FabricSuspectAdmissionChart())["ClusterRole", NAME]
    assert "namespace" not in role["metadata"]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]


def test_the_policy_matches_updates_of_nodes_by_any_namespaces_release_account_and_denies():
    policy, binding = policy_and_binding()
    assert "namespace" not in policy["metadata"] and "namespace" not in binding["metadata"]
    assert policy["spec"]["matchConstraints"] == {
        "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["nodes"], "operations": ["UPDATE"]}]
    }
    (condition,) = policy["spec"]["matchConditions"]
    assert condition["name"] == "release-account"
    assert "request.userInfo.username.startsWith('system:serviceaccount:')" in condition["expression"]
    assert "request.userInfo.username.endsWith(':job-release')" in condition["expression"]
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert len(policy["spec"]["validations"]) == 4
    for validation in policy["spec"]["validations"]:
        assert validation["reason"] == "Forbidden"
        assert validation["message"].startswith(
            "a job release may only add one taint trainium-eks/fabric-suspect:NoSchedule to a node"
        )
    assert binding["spec"] == {"policyName": NAME, "validationActions": ["Deny"]}


def test_the_objects_validate_strictly(tmp_path):
    validate_objects(
        [*FabricSuspectAdmissionChart().manifests(), *FabricSuspectAccessChart(namespace="a").manifests()], tmp_path
    )


def test_a_namespace_that_is_no_label_is_refused():
    with pytest.raises(ConfigurationError, match="namespace='Training'"):
        FabricSuspectAccessChart(namespace="Training")


def test_the_release_account_of_each_namespace_is_bound_to_the_cluster_role():
    for namespace in ("training", "research"):
        (binding,) = FabricSuspectAccessChart(namespace=namespace).manifests()
        assert (binding["kind"], binding["metadata"]["name"]) == (
            "ClusterRoleBinding",
            f"trainium-eks-fabric-suspect-{namespace}",
        )
        assert "namespace" not in binding["metadata"]
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "job-release", "namespace": namespace}]


# --- the CEL, evaluated -----------------------------------------------------------------------------------------


def evaluate(expression, new, old, user=RELEASE_USER):
    """The value of ``expression`` for an update of ``old`` to ``new`` by ``user``."""
    environment = celpy.Environment()
    program = environment.program(environment.compile(expression))
    activation = {
        "object": celpy.json_to_cel(new),
        "oldObject": celpy.json_to_cel(old),
        "request": celpy.json_to_cel({"userInfo": {"username": user}, "operation": "UPDATE"}),
    }
    result = program.evaluate(activation)
    assert not isinstance(result, celpy.CELEvalError), result
    return bool(result)


def admitted(new, old=NODE, user=RELEASE_USER):
    """Whether the policy lets ``user`` update ``old`` to ``new``: not matched, or every validation true."""
    policy, _ = policy_and_binding()
    if not all(evaluate(c["expression"], new, old, user) for c in policy["spec"]["matchConditions"]):
        return True
    return all(evaluate(v["expression"], new, old, user) for v in policy["spec"]["validations"])


def changed(change, old=NODE):
    new = copy.deepcopy(old)
    change(new)
    return new


@pytest.mark.parametrize(
    "user, matched",
    [
        (RELEASE_USER, True),
        ("system:serviceaccount:research:job-release", True),
        ("system:serviceaccount:training:job-release-other", False),
        ("system:serviceaccount:training:training", False),
        ("system:node:ip-10-0-1-5", False),
        ("kubernetes-admin", False),
        ("job-release", False),
    ],
)
def test_the_match_condition_selects_the_release_accounts(user, matched):
    denied = changed(lambda node: node["metadata"]["labels"].update(x="y"))
    assert admitted(denied, user=user) is not matched


def test_a_release_may_add_the_suspect_taint_after_the_others_or_to_a_node_without_taints():
    assert admitted(changed(lambda node: node["spec"]["taints"].append(SUSPECT)))
    labels = {"karpenter.sh/nodepool": "trn1"}
    bare = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "labels": labels}, "spec": {}}
    assert admitted(changed(lambda node: node["spec"].update(taints=[SUSPECT]), bare), old=bare)


def test_a_node_no_karpenter_pool_launched_is_not_the_releases_to_taint():
    for labels in ({}, {"eks.amazonaws.com/nodegroup": "system"}):
        other = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "labels": labels}, "spec": {}}
        assert not admitted(changed(lambda node: node["spec"].update(taints=[SUSPECT]), other), old=other)
    unlabelled = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}, "spec": {}}
    assert not admitted(changed(lambda node: node["spec"].update(taints=[SUSPECT]), unlabelled), old=unlabelled)


@pytest.mark.parametrize(
    "change",
    [
        lambda node: None,  # no suspect taint added
        lambda node: node["spec"]["taints"].append({**SUSPECT, "effect": "NoExecute"}),
        lambda node: node["spec"]["taints"].append({**SUSPECT, "key": "other/taint"}),
        lambda node: node["spec"]["taints"].extend([SUSPECT, {**SUSPECT, "effect": "PreferNoSchedule"}]),
        lambda node: node["spec"].update(taints=[SUSPECT]),  # the other taint removed
        lambda node: node["spec"].update(taints=[{**NEURON, "value": "x"}, SUSPECT]),
        lambda node: node["spec"].pop("taints"),
        lambda node: (node["spec"]["taints"].append(SUSPECT), node["metadata"]["labels"].update(x="y")),
        lambda node: (node["spec"]["taints"].append(SUSPECT), node["metadata"].pop("labels")),
        lambda node: (node["spec"]["taints"].append(SUSPECT), node["metadata"]["annotations"].update(a="c")),
        lambda node: (node["spec"]["taints"].append(SUSPECT), node["metadata"].update(finalizers=["x.io/y"])),
        lambda node: (
            node["spec"]["taints"].append(SUSPECT),
            node["metadata"].update(ownerReferences=[{"apiVersion": "v1", "kind": "ConfigMap", "name": "c"}]),
        ),
        lambda node: (node["spec"]["taints"].append(SUSPECT), node["spec"].update(unschedulable=True)),
    ],
    ids=[
        "nothing-added",
        "no-execute",
        "another-key",
        "two-suspect-taints",
        "other-taint-removed",
        "other-taint-changed",
        "all-taints-removed",
        "label-changed",
        "labels-removed",
        "annotation-changed",
        "finalizer-added",
        "owner-added",
        "cordoned",
    ],
)
def test_a_release_may_change_nothing_else(change):
    assert not admitted(changed(change))


def test_a_node_tainted_already_is_not_tainted_again():
    tainted = changed(lambda node: node["spec"]["taints"].append({**SUSPECT, "value": "check-0"}))
    assert not admitted(changed(lambda node: node["spec"]["taints"].append(SUSPECT), tainted), old=tainted)
    assert not admitted(tainted, old=tainted), "an update that changes nothing adds no taint either"


def test_unschedulable_false_counts_as_absent():
    assert admitted(
        changed(lambda node: (node["spec"]["taints"].append(SUSPECT), node["spec"].update(unschedulable=False)))
    )

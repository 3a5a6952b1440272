"""The release account's NetworkPolicies on the real API server: it may create a held job's peers policy (its Role) and
no other shape of policy (the ValidatingAdmissionPolicy); nobody else's policies are looked at."""

from __future__ import annotations

import copy

from e2e.api import Api, ApiError
from e2e.processes import wait_for
from trainium_eks.manifests.access.job_release_access import JobReleaseAccessChart
from trainium_eks.manifests.access.peers_policy_admission import PeersPolicyAdmissionChart
from trainium_eks.manifests.jobs.job_release import RELEASE_SERVICE_ACCOUNT
from trainium_eks.manifests.jobs.job_release_program import peers_policy

NAMESPACE = "training"
GANG = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "Job",
    "metadata": {"name": "train-1", "namespace": NAMESPACE},
}


def _refusal(api: Api, manifest):
    """The API server's answer to creating ``manifest`` (a dry run): None when it would be created, else the error."""
    path = api.path("networking.k8s.io/v1", "NetworkPolicy", manifest["metadata"]["namespace"]) + "?dryRun=All"
    try:
        api.request("POST", path, manifest)
    except ApiError as error:
        return error
    return None


def _wider(policy):
    """Policies that differ from the peers policy ``policy`` in one way that would open the namespace."""
    variants = {}

    def variant(name, change):
        changed = copy.deepcopy(policy)
        change(changed["spec"])
        variants[name] = changed

    variant("every pod of the namespace admitted", lambda s: s["ingress"][0]["from"][0].update(podSelector={}))
    variant("another namespace admitted", lambda s: s["ingress"][0]["from"][0].update(namespaceSelector={}))
    variant("an address admitted", lambda s: s["ingress"].append({"from": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}))
    variant("every peer admitted", lambda s: s["ingress"][0].pop("from"))
    variant("egress opened", lambda s: s.update(policyTypes=["Ingress", "Egress"], egress=[{}]))
    variant("other pods selected", lambda s: s.update(podSelector={"matchLabels": {"app": "x"}}))
    variant(
        "pods selected by expression",
        lambda s: s["podSelector"].update(matchExpressions=[{"key": "a", "operator": "Exists"}]),
    )
    renamed = copy.deepcopy(policy)
    renamed["metadata"]["name"] = "allow-all"
    renamed["spec"]["podSelector"]["matchLabels"] = {"trainium-eks/ingress-policy": "allow-all"}
    renamed["spec"]["ingress"][0]["from"][0]["podSelector"] = copy.deepcopy(renamed["spec"]["podSelector"])
    variants["a name that is no gang's peers policy"] = renamed
    return variants


def test_the_release_account_creates_a_gangs_peers_policy_and_no_wider_one(cluster):
    api = cluster.api
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    for chart in (JobReleaseAccessChart(namespace=NAMESPACE), PeersPolicyAdmissionChart(namespace=NAMESPACE)):
        for manifest in chart.manifests():
            api.create(manifest)
    release = Api(api.server, api.token(NAMESPACE, RELEASE_SERVICE_ACCOUNT), str(cluster.pki.pair.cert))
    policy = peers_policy(GANG, NAMESPACE, "train-1-release", "0d6b7c1e-0000-4000-8000-000000000001")
    policy["metadata"].pop("ownerReferences")  # the owner does not exist here; the garbage collector would delete it
    allow_all = _wider(policy)["every pod of the namespace admitted"]
    # The API server enforces a new policy once its informers have it (a second or so): a bounded wait.
    wait_for("the policy to refuse a wider policy", lambda: _refusal(release, allow_all) is not None, timeout=60)

    for name, wider in _wider(policy).items():
        refused = _refusal(release, wider)
        assert refused is not None and refused.status == 403, name
        assert "a release Job creates no NetworkPolicy but a held job's peers policy" in str(refused), (name, refused)
        assert _refusal(api, wider) is None, f"{name}: the cluster's admin is not looked at"
    assert release.create(policy)["metadata"]["name"] == "train-1-peers"
    elsewhere = copy.deepcopy(allow_all)
    elsewhere["metadata"]["namespace"] = "default"
    refused = _refusal(release, elsewhere)
    assert refused is not None and refused.status == 403 and "forbidden" in str(refused).lower(), "no Role there"
    try:
        release.request("DELETE", api.path("networking.k8s.io/v1", "NetworkPolicy", NAMESPACE) + "/train-1-peers")
    except ApiError as error:
        assert error.status == 403, error
    else:
        raise AssertionError("the release account may not delete a policy")

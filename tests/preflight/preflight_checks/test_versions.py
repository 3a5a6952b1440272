"""The Kubernetes version, as EKS offers it."""

from __future__ import annotations

from tests.support.preflight_aws import aws_context as _context
from tests.support.preflight_aws import cluster_versions


def test_the_kubernetes_version_in_standard_or_extended_support_passes(checks, mixed):
    eks = mixed.stub("eks")
    eks.add_response("describe_cluster_versions", cluster_versions("STANDARD_SUPPORT"), {"clusterVersions": ["1.36"]})
    eks.add_response("describe_cluster_versions", cluster_versions("EXTENDED_SUPPORT"), {"clusterVersions": ["1.36"]})
    context = _context(checks, mixed)
    standard = checks.check_kubernetes_version(context, "1.36")
    assert (standard.status, standard.message) == (
        "pass",
        "Kubernetes 1.36: standard support until 2030-01-06 11:30 UTC",
    )
    extended = checks.check_kubernetes_version(context, "1.36")
    assert extended.status == "pass" and "costs more per hour" in extended.message


def test_a_kubernetes_version_eks_does_not_offer_fails_naming_those_it_does(checks, mixed):
    eks = mixed.stub("eks")
    eks.add_response("describe_cluster_versions", {"clusterVersions": []}, {"clusterVersions": ["1.99"]})
    versions = [{"clusterVersion": v, "versionStatus": "STANDARD_SUPPORT"} for v in ("1.9", "1.35")]
    offered = {"clusterVersions": versions}
    eks.add_response("describe_cluster_versions", offered, {})
    eks.add_response(
        "describe_cluster_versions", cluster_versions("UNSUPPORTED", "1.20"), {"clusterVersions": ["1.20"]}
    )
    context = _context(checks, mixed)
    missing = checks.check_kubernetes_version(context, "1.99")
    assert (missing.status, missing.message, missing.advice) == (
        "fail",
        "EKS does not offer Kubernetes 1.99 in us-west-2",
        "use one of 1.9, 1.35",
    )
    assert checks.check_kubernetes_version(context, "1.20").status == "fail"
    mixed.assert_no_pending_responses()

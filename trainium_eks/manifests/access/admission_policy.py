"""A ValidatingAdmissionPolicy and its binding: a rule the API server itself enforces, with no webhook to run."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from trainium_eks.manifests.chart import LibraryChart

ADMISSION_API = "admissionregistration.k8s.io/v1"


def add_admission_policy(
    chart: LibraryChart,
    name: str,
    *,
    rules: List[Dict[str, Any]],
    conditions: List[Dict[str, str]],
    validations: List[Dict[str, str]],
    namespace: Optional[str] = None,
) -> None:
    """Add to ``chart`` a ValidatingAdmissionPolicy ``name`` (Kubernetes, GA since 1.30) of the resource ``rules``,
    the match ``conditions`` and the ``validations``, with ``failurePolicy: Fail``, and its binding of the same name
    (``validationActions: [Deny]``) for ``namespace``, selected by its ``kubernetes.io/metadata.name`` label (which the
    API server sets on every namespace), or for every object without one. Both are cluster-scoped."""
    chart.add_object(
        {
            "apiVersion": ADMISSION_API,
            "kind": "ValidatingAdmissionPolicy",
            "metadata": chart.metadata(name, cluster_scoped=True),
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": rules},
                "matchConditions": conditions,
                "validations": validations,
            },
        }
    )
    binding: Dict[str, Any] = {"policyName": name, "validationActions": ["Deny"]}
    if namespace is not None:
        binding["matchResources"] = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}
    chart.add_object(
        {
            "apiVersion": ADMISSION_API,
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": chart.metadata(name, cluster_scoped=True),
            "spec": binding,
        }
    )

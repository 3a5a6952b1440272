"""TrainingNamespaceChart: the namespace and a service account without Kubernetes permissions."""

from tests.support.charts import objects
from trainium_eks.manifests.access.training_namespace import TrainingNamespaceChart


def test_training_namespace_and_a_service_account_without_kubernetes_permissions():
    found = objects(TrainingNamespaceChart())
    namespace = found["Namespace", "training"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    assert found["ServiceAccount", "training"]["metadata"]["namespace"] == "training"
    assert set(found) == {("Namespace", "training"), ("ServiceAccount", "training")}, (
        "training pods never call the Kubernetes API: no Role, no RoleBinding"
    )

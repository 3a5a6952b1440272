"""PyTorchJobChart: the Kubeflow training-operator PyTorchJob as the workshop wrote it."""

import pytest

from tests.support.k8s_validation import validate_objects
from tests.support.kubeflow_jobs import pytorchjob
from trainium_eks.core.validation import ConfigurationError


def test_pytorchjob_as_the_workshop_wrote_it():
    chart, manifest = pytorchjob(nodes=3)
    assert manifest["apiVersion"] == "kubeflow.org/v1" and manifest["kind"] == "PyTorchJob"
    spec = manifest["spec"]
    assert spec["nprocPerNode"] == "1"
    replicas = spec["pytorchReplicaSpecs"]
    assert replicas["Master"]["replicas"] == 1 and replicas["Worker"]["replicas"] == 2
    for replica in replicas.values():
        (container,) = replica["template"]["spec"]["containers"]
        assert container["name"] == "pytorch"
        assert replica["template"]["spec"]["nodeSelector"] == {"node.kubernetes.io/instance-type": "m5.xlarge"}
    assert spec["runPolicy"]["schedulingPolicy"] == {"minAvailable": 3, "queue": "training"}
    assert "elasticPolicy" not in spec and chart.ref.startswith("pytorchjob/")


def test_pytorchjob_on_one_node_has_no_workers_and_an_elastic_job_has_its_policy():
    assert "Worker" not in pytorchjob(nodes=1)[1]["spec"]["pytorchReplicaSpecs"]
    elastic = pytorchjob(nodes=4, min_nodes=2)[1]["spec"]["elasticPolicy"]
    assert elastic == {"minReplicas": 2, "maxReplicas": 4, "rdzvBackend": "c10d", "nProcPerNode": 1}


def test_pytorchjob_pods_reach_the_internet_only_when_asked():
    _, manifest = pytorchjob(internet_egress=True)
    for replica in manifest["spec"]["pytorchReplicaSpecs"].values():
        assert replica["template"]["metadata"]["labels"]["trainium-eks/egress-internet"] == "true"
        assert replica["template"]["spec"]["automountServiceAccountToken"] is False


def test_pytorchjob_ends_by_its_deadline_and_its_running_pods_with_it(tmp_path):
    chart, manifest = pytorchjob()
    run_policy = manifest["spec"]["runPolicy"]
    assert run_policy["activeDeadlineSeconds"] == 24 * 3600 == chart.deadline_seconds, "the default: 24 hours"
    assert run_policy["cleanPodPolicy"] == "Running", "with None the operator deletes no pod past the deadline"
    assert pytorchjob(deadline_seconds=600)[1]["spec"]["runPolicy"]["activeDeadlineSeconds"] == 600
    validate_objects([manifest], tmp_path)
    with pytest.raises(ConfigurationError, match="deadline_seconds=-1: an integer from 60 to 7776000"):
        pytorchjob(deadline_seconds=-1)

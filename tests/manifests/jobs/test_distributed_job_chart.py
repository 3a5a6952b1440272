"""What every distributed job kind shares: the pod contract, and validation against the pinned CRD schemas."""

from tests.support.k8s_validation import validate_objects
from tests.support.kubeflow_jobs import BASE, CPU, TRN1, pytorchjob, trainjob
from trainium_eks.manifests.addons.training_runtime import TrainingRuntimeChart


def test_the_three_job_kinds_share_the_pod_contract():
    from trainium_eks.manifests.jobs.volcano_job import VolcanoJobChart

    def pod_env(manifest):
        return manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["env"]

    args = dict(node_group=TRN1, script="/opt/bert/pretrain_bert.py")
    volcano = VolcanoJobChart(**{**BASE, **args}).manifests()[0]
    _, train = trainjob(**args)
    _, pytorch = pytorchjob(**args)
    volcano_env = volcano["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["env"]
    assert volcano_env == train["spec"]["trainer"]["env"] == pod_env(pytorch)


def test_runtime_and_jobs_validate_against_the_crd_schemas(tmp_path):
    objects = [
        TrainingRuntimeChart().manifests()[0],
        TrainingRuntimeChart(name="plain", volcano=False).manifests()[0],
        trainjob()[1],
        trainjob(node_group=TRN1, script="/t.py", wait_for=["job/data-1"])[1],
        trainjob(queue=None)[1],
        pytorchjob(nodes=3)[1],
        pytorchjob(nodes=4, min_nodes=2, node_group=CPU)[1],
    ]
    for version in ("1.34", "1.36"):
        validate_objects(objects, tmp_path, k8s_version=version)

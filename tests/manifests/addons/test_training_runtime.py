"""The Kubeflow Trainer runtime: gangs through Volcano and restarts whole jobs."""

from trainium_eks.manifests.addons.training_runtime import TrainingRuntimeChart


def test_runtime_gangs_through_volcano_and_restarts_whole_jobs():
    (runtime,) = TrainingRuntimeChart().manifests()
    template = runtime["spec"]["template"]
    assert template["metadata"] == {"annotations": {"scheduling.volcano.sh/queue-name": "training"}}
    assert template["spec"]["failurePolicy"] == {"maxRestarts": 2}, "three attempts, as a Volcano job's maxRetry 3"
    (node,) = template["spec"]["replicatedJobs"]
    assert node["template"]["spec"]["backoffLimit"] == 0, "a failed pod fails the JobSet, which restarts whole"
    pod = node["template"]["spec"]["template"]["spec"]
    assert pod["schedulerName"] == "volcano", "the Trainer never sets it; without it Volcano never sees the pods"
    assert pod["restartPolicy"] == "Never" and "initContainers" not in pod
    assert runtime["spec"]["podGroupPolicy"] == {"volcano": {}}
    (plain,) = TrainingRuntimeChart(name="plain", volcano=False).manifests()
    plain_pod = plain["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert "schedulerName" not in plain_pod and "podGroupPolicy" not in plain["spec"]

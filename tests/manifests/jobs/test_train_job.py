"""TrainJobChart: a Kubeflow Trainer v2 TrainJob of each accelerator, its launch and what its nodes cannot do."""

import pytest

from tests.support.k8s_validation import validate_objects
from tests.support.kubeflow_jobs import CPU, P4D, TRN1, patched_pod, trainjob
from tests.support.launches import flag, launch
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.manifests.jobs.dataset_staging import DatasetStagingChart


def test_trainjob_shape_refers_to_the_runtime_and_always_sets_processes_per_node():
    chart, manifest = trainjob()
    assert manifest["apiVersion"] == "trainer.kubeflow.org/v1alpha1" and manifest["kind"] == "TrainJob"
    assert manifest["metadata"]["name"] == chart.job_name and chart.ref == f"trainjob/{chart.job_name}"
    spec = manifest["spec"]
    assert spec["runtimeRef"] == {
        "name": "trainium-eks-torch",
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
    }
    trainer = spec["trainer"]
    assert trainer["numNodes"] == 6 and trainer["numProcPerNode"] == 1
    assert trainer["resourcesPerNode"] == {"requests": {"cpu": "2", "memory": "8Gi"}}
    assert set(manifest["metadata"]["annotations"]) == {"trainium-eks/wait-for", "trainium-eks/release"}, (
        "the Trainer never reads a TrainJob's own annotations: only its release's (a gang of 6 is created by one)"
    )
    (patch,) = spec["runtimePatches"]
    assert patch["manager"] == "trainium-eks/train-job-chart", "the Trainer's webhook wants a domain-prefixed path"
    assert patch["trainingRuntimeSpec"]["template"]["metadata"] == {
        "annotations": {"scheduling.volcano.sh/queue-name": "training"}
    }, "the Trainer's Volcano plugin reads the queue from the runtime's or the patch's template metadata"
    assert "metadata" not in trainjob(queue=None)[1]["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]


def test_neuron_trainjob_sets_one_process_per_neuroncore_never_auto():
    _, manifest = trainjob(node_group=TRN1, script="/opt/bert/pretrain_bert.py")
    trainer = manifest["spec"]["trainer"]
    assert trainer["numProcPerNode"] == 32, "auto would count vCPUs: no resource name of Neuron contains 'gpu'"
    assert trainer["resourcesPerNode"]["limits"] == {"aws.amazon.com/neuron": 16, "vpc.amazonaws.com/efa": 8}
    env = {e["name"]: e["value"] for e in trainer["env"]}
    assert env["FI_PROVIDER"] == "efa" and env["CCOM_SOCKET_IFNAME"] == "eth0"


def test_trainjob_launch_uses_the_trainers_variables(tmp_path):
    _, manifest = trainjob(node_group=TRN1, script="/opt/bert/pretrain_bert.py", cache_set="bert")
    command = manifest["spec"]["trainer"]["command"]
    assert command[:2] == ["bash", "-c"]
    started = launch(
        command[2], tmp_path, PET_NODE_RANK="1", PET_MASTER_ADDR="cifar-abc-node-0-0.cifar-abc", PET_MASTER_PORT="29500"
    )
    words = started["argv"]
    assert words[0] == "torchrun" and flag(words, "--nnodes") == "2" and flag(words, "--nproc_per_node") == "32"
    assert flag(words, "--node_rank") == "1" and flag(words, "--master_addr") == "cifar-abc-node-0-0.cifar-abc"
    assert started["env"]["NEURON_CC_FLAGS"] == "--cache_dir=/data/neuron_cache/bert_1", "per-node cache from the rank"


def test_trainjob_runtime_patch_places_mounts_and_names_only_the_runtimes_containers():
    staging = DatasetStagingChart(
        name="cifar10-data", source="s3://bucket/cifar.tar", directory="cifar10", image="i:1", node_group=CPU
    )
    chart, manifest = trainjob(wait_for=[staging])
    pod = patched_pod(manifest)
    assert pod["serviceAccountName"] == "training"
    assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": "m5.xlarge"} and pod["tolerations"] == []
    assert pod["volumes"] == [{"name": "claim-0", "persistentVolumeClaim": {"claimName": "efs-sc-claim"}}]
    assert pod["containers"] == [
        {
            "name": "node",
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            "volumeMounts": [{"name": "claim-0", "mountPath": "/data"}],
        }
    ]
    assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert "initContainers" not in pod, "nothing waits inside the job's pods"
    assert chart.wait_for == (staging.ref,)
    assert manifest["metadata"]["annotations"]["trainium-eks/wait-for"] == staging.ref


def test_trainjob_with_the_images_own_launcher():
    _, manifest = trainjob(
        launcher="direct", script="/opt/cifar10/launch.py", args=["--", "--data-dir", "/data/cifar10"]
    )
    script = manifest["spec"]["trainer"]["command"][2]
    assert script == "exec python3 /opt/cifar10/launch.py -- --data-dir /data/cifar10", "it starts torchrun itself"


def test_composer_launcher_on_gpu_nodes_sets_the_node_rank(tmp_path):
    _, manifest = trainjob(node_group=P4D, script="/opt/composer/train_composer.py", launcher="composer")
    started = launch(manifest["spec"]["trainer"]["command"][2], tmp_path, PET_NODE_RANK="1", PET_MASTER_ADDR="m")
    words = started["argv"]
    assert words[0] == "composer" and flag(words, "-n") == "8" and flag(words, "--world_size") == "16"
    assert flag(words, "--node_rank") == "1" and flag(words, "--master_addr") == "m"
    assert started["env"]["NODE_RANK"] == "1"


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"neuron_devices": 1}, "neuron_devices=1: an integer from 0 to 0"),
        ({"precompile": True}, "precompile=True: only on Neuron nodes"),
        ({"processes_per_node": 5}, "processes_per_node=5: an integer from 1 to 4, the vCPUs"),
        ({"nodes": 7}, "nodes=7: an integer from 1 to 6"),
        ({"launcher": "composer", "node_group": TRN1}, "Composer on Neuron nodes"),
        ({"runtime": "Bad_Runtime"}, "runtime='Bad_Runtime'"),
        ({"nodez": 2}, "nodez=2: unknown setting (did you mean 'nodes'?); known: "),
        ({"max_retries": 5}, "max_retries=5: 3 or unset: a TrainJob runs as often as its runtime says"),
    ],
)
def test_trainjob_refuses_what_its_nodes_cannot_do(overrides, message):
    with pytest.raises(ConfigurationError) as raised:
        trainjob(**overrides)
    assert any(message in problem for problem in raised.value.problems), raised.value.problems


def test_trainjob_pods_reach_the_internet_only_when_asked_through_the_patch_labels(tmp_path):
    _, manifest = trainjob()
    (patch,) = manifest["spec"]["runtimePatches"]
    (replicated,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert "metadata" not in replicated["template"]["spec"]["template"]
    _, online = trainjob(internet_egress=True)
    (patch,) = online["spec"]["runtimePatches"]
    (replicated,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    labels = replicated["template"]["spec"]["template"]["metadata"]["labels"]
    assert labels == {"trainium-eks/egress-internet": "true"}
    validate_objects([online], tmp_path)


def test_the_whole_trainjob_ends_by_its_deadline(tmp_path):
    chart, manifest = trainjob()
    assert manifest["spec"]["activeDeadlineSeconds"] == 24 * 3600 == chart.deadline_seconds, "the default: 24 hours"
    assert "activeDeadlineSeconds" not in patched_pod(manifest), "the Trainer bounds the TrainJob, not its pods"
    shorter, manifest = trainjob(deadline_seconds=7200)
    assert manifest["spec"]["activeDeadlineSeconds"] == 7200 and shorter.job_name != chart.job_name
    validate_objects([manifest], tmp_path)
    with pytest.raises(ConfigurationError, match="deadline_seconds=0: an integer from 60 to 7776000"):
        trainjob(deadline_seconds=0)

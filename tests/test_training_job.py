"""TrainingJobChart: the Volcano Job, its pods, the environment contract, topology checks, hash naming."""

import shlex

import pytest

from tests.k8s_validation import validate_objects
from trainium_eks.manifests.job_naming import hashed_name
from trainium_eks.manifests.topology import NodeGroupTopology, Taint
from trainium_eks.manifests.training_job import START_GATE_SOURCE, Rendezvous, TrainingJobChart
from trainium_eks.validation import ConfigurationError

NEURON_TAINT = Taint("aws.amazon.com/neuron", "true", "NoSchedule")
TRN1 = NodeGroupTopology("trn1.32xlarge", 2, 4, 8, (NEURON_TAINT,), frozenset({"fsx-claim"}))
TRN1N = NodeGroupTopology("trn1n.32xlarge", 2, 2, 16, (NEURON_TAINT,), frozenset({"fsx-claim"}))
NO_VOLUME = NodeGroupTopology("trn1.32xlarge", 2, 2, 8, (NEURON_TAINT,))
P5 = NodeGroupTopology(
    "p5.48xlarge", 2, 2, 32, (Taint("nvidia.com/gpu", "true", "NoSchedule"),), frozenset({"fsx-claim"})
)
BASE = dict(
    name="bert-train",
    image="example.com/bert:1",
    node_group=TRN1,
    script="/opt/bert/pretrain_bert.py",
    args=["--data_dir", "/data/set", "--bf16"],
    cache_set="bert-large",
)


def job(**overrides):
    chart = TrainingJobChart(**{**BASE, **overrides})
    (manifest,) = chart.manifests()
    return chart, manifest


def pod(manifest, index=0):
    return manifest["spec"]["tasks"][index]["template"]["spec"]


def container(manifest, index=0):
    (worker,) = pod(manifest, index)["containers"]
    return worker


def env(manifest, index=0):
    return {e["name"]: e["value"] for e in container(manifest, index)["env"]}


def command(manifest, index=0):
    shell, script = container(manifest, index)["command"][:2], container(manifest, index)["command"][2]
    assert shell == ["bash", "-c"] and script.startswith("exec ")
    return shlex.split(script[len("exec ") :])


def flag(words, name):
    return words[words.index(name) + 1]


def test_volcano_job_shape():
    chart, manifest = job()
    assert manifest["apiVersion"] == "batch.volcano.sh/v1alpha1" and manifest["kind"] == "Job"
    assert manifest["metadata"]["name"] == chart.job_name and manifest["metadata"]["namespace"] == "training"
    spec = manifest["spec"]
    assert spec["schedulerName"] == "volcano"
    assert spec["queue"] == "training"
    assert spec["minAvailable"] == 2, "gang: every node or none"
    assert spec["maxRetry"] == 3
    assert spec["plugins"] == {"svc": ["--publish-not-ready-addresses"], "env": []}
    assert [t["name"] for t in spec["tasks"]] == ["node-0", "node-1"]
    for task in spec["tasks"]:
        assert task["replicas"] == 1 and task["maxRetry"] == 3
        assert task["policies"] == [
            {"event": "PodEvicted", "action": "RestartJob"},
            {"event": "PodFailed", "action": "RestartJob"},
        ]


def test_torchrun_command():
    chart, manifest = job()
    words = command(manifest)
    assert words[0] == "torchrun"
    assert flag(words, "--nnodes") == "2" and flag(words, "--nproc_per_node") == "32"
    assert flag(words, "--rdzv_backend") == "etcd" and flag(words, "--rdzv_endpoint") == "etcd-server:2379"
    assert flag(words, "--rdzv_id") == chart.job_name
    assert words[-4:] == ["/opt/bert/pretrain_bert.py", "--data_dir", "/data/set", "--bf16"]


def test_environment_contract_per_node():
    _, manifest = job(bf16=True)
    for index in (0, 1):
        assert env(manifest, index) == {
            "FI_PROVIDER": "efa",
            "FI_EFA_USE_DEVICE_RDMA": "1",
            "FI_EFA_FORK_SAFE": "1",
            "CCOM_SOCKET_IFNAME": "eth0",
            "NEURON_RT_RESET_CORES": "1",
            "XLA_TRANSFER_SEED_ASYNC": "1",
            "NEURON_CC_FLAGS": f"--cache_dir=/data/neuron_cache/bert-large_{index}",
            "XLA_DOWNCAST_BF16": "1",
        }
    assert "XLA_DOWNCAST_BF16" not in env(job(bf16=False)[1])
    assert env(job(env={"NEURON_RT_LOG_LEVEL": "INFO"})[1])["NEURON_RT_LOG_LEVEL"] == "INFO"


def test_devices_resources_shm_claim_tolerations_and_node_selector():
    _, manifest = job()
    resources = container(manifest)["resources"]
    assert resources["limits"] == {"aws.amazon.com/neuron": 16, "vpc.amazonaws.com/efa": 8}
    assert {k: resources["requests"][k] for k in resources["limits"]} == resources["limits"]
    assert resources["requests"]["cpu"] == "64" and resources["requests"]["memory"] == "256Gi"
    spec = pod(manifest)
    assert {"name": "dshm", "emptyDir": {"medium": "Memory"}} in spec["volumes"]
    assert {"name": "claim-0", "persistentVolumeClaim": {"claimName": "fsx-claim"}} in spec["volumes"]
    assert {"name": "claim-0", "mountPath": "/data"} in container(manifest)["volumeMounts"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in container(manifest)["volumeMounts"]
    assert spec["tolerations"] == [
        {"key": "aws.amazon.com/neuron", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    ]
    assert spec["nodeSelector"] == {"node.kubernetes.io/instance-type": "trn1.32xlarge"}
    assert spec["restartPolicy"] == "Never" and spec["serviceAccountName"] == "training"


def test_trn1n_pods_request_sixteen_efa_interfaces():
    _, manifest = job(node_group=TRN1N)
    assert container(manifest)["resources"]["limits"]["vpc.amazonaws.com/efa"] == 16


def test_precompile_wraps_the_same_command_with_the_same_cache_set():
    train_chart, train = job()
    compile_chart, compile_ = job(precompile=True)

    def without_id(words, chart):
        return ["ID" if word == chart.job_name else word for word in words]

    assert command(compile_)[0] == "neuron_parallel_compile"
    assert without_id(command(compile_)[1:], compile_chart) == without_id(command(train), train_chart)
    assert env(compile_)["NEURON_CC_FLAGS"] == env(train)["NEURON_CC_FLAGS"]


def test_c10d_rendezvous_uses_node_zero_through_volcano_service_names():
    _, manifest = job(rendezvous=Rendezvous.C10D)
    assert flag(command(manifest, 0), "--rdzv_endpoint") == "localhost:29500"
    script = container(manifest, 1)["command"][2]
    assert '--rdzv_endpoint "$VC_NODE_0_HOSTS:29500"' in script, "expanded by the shell, not quoted away"


def test_module_and_command_entrypoints():
    words = command(job(script=None, module="mypkg.train")[1])
    assert words[-5:-3] == ["-m", "mypkg.train"]
    words = command(job(script=None, command="/opt/run.sh")[1])
    assert words[-5:-3] == ["--no-python", "/opt/run.sh"]


def test_gpu_nodes_request_gpus_and_no_neuron_environment():
    _, manifest = job(node_group=P5, cache_set="default")
    assert container(manifest)["resources"]["limits"] == {"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 32}
    assert flag(command(manifest), "--nproc_per_node") == "8"
    assert "NEURON_CC_FLAGS" not in env(manifest) and env(manifest)["FI_PROVIDER"] == "efa"


def test_start_gate_init_container_waits_for_the_named_jobs():
    _, manifest = job(wait_for=["vcjob/bert-compile-0123456789"])
    (gate,) = pod(manifest)["initContainers"]
    assert gate["image"] == BASE["image"]
    assert gate["command"] == ["python3", "-c", START_GATE_SOURCE, "training", "vcjob/bert-compile-0123456789"]
    assert "initContainers" not in pod(job()[1])


def test_jobs_validate_against_the_volcano_job_schema(tmp_path):
    objects = [
        job()[1],
        job(precompile=True, wait_for=["job/data-1"])[1],
        job(rendezvous=Rendezvous.C10D)[1],
        job(node_group=P5, cache_set="x")[1],
        job(node_group=TRN1N, nodes=1)[1],
    ]
    validate_objects(objects, tmp_path)


def test_same_spec_same_name_and_any_change_a_new_name():
    assert job()[0].job_name == job()[0].job_name
    names = {
        job()[0].job_name,
        job(args=["--data_dir", "/data/set", "--lr", "1e-4"])[0].job_name,
        job(image="example.com/bert:2")[0].job_name,
        job(nodes=1)[0].job_name,
        job(cache_set="other")[0].job_name,
        job(wait_for=["vcjob/x"])[0].job_name,
    }
    assert len(names) == 6
    name = job()[0].job_name
    assert name.startswith("bert-train-") and len(name) == len("bert-train-") + 10


def test_hash_uses_the_resolved_form_of_tokens():
    spec = {"image": "${Token[TOKEN.123]}"}
    renumbered = {"image": "${Token[TOKEN.456]}"}
    resolve = lambda value: {"image": {"Ref": "Image"}}  # noqa: E731 - what Stack.resolve does with either token
    assert hashed_name("a", spec, resolve) == hashed_name("a", renumbered, resolve)
    assert hashed_name("a", spec) != hashed_name("a", renumbered)


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"processes_per_node": 33}, "processes_per_node=33: 1 to 32, the NeuronCores of a trn1.32xlarge node"),
        ({"neuron_devices": 17}, "neuron_devices=17: 0 to 16, the Neuron devices of a trn1.32xlarge node"),
        ({"efa_interfaces": 16}, "efa_interfaces=16: 0 to 8, the EFA interfaces attached to each node of the group"),
        ({"nodes": 5}, "nodes=5: 1 to 4, the maximum size of the node group"),
        (
            {"node_group": NO_VOLUME, "volumes": {"fsx-claim": "/data"}},
            "volumes=['fsx-claim']: claims the node group can reach (shared volumes: none)",
        ),
        ({"cache_set": "bert large!"}, "cache_set='bert large!': letters, digits, '_' and '-' only"),
        ({"name": "Bert_Train"}, "name='Bert_Train': a lowercase DNS label"),
        ({"module": "x"}, "exactly one of script, module or command"),
        ({"node_group": P5, "precompile": True}, "precompile=True: only on Neuron nodes"),
    ],
)
def test_inconsistent_topology_is_refused(overrides, message):
    with pytest.raises(ConfigurationError) as raised:
        job(**overrides)
    assert message in str(raised.value)


def test_all_topology_problems_are_reported_together():
    with pytest.raises(ConfigurationError) as raised:
        job(processes_per_node=64, efa_interfaces=9, cache_set="a b")
    assert len(raised.value.problems) == 3


def test_no_shared_volume_keeps_the_compile_cache_on_the_node():
    _, manifest = job(node_group=NO_VOLUME)
    assert env(manifest)["NEURON_CC_FLAGS"] == "--cache_dir=/var/cache/neuron-compile-cache/bert-large_0"
    assert [v["name"] for v in pod(manifest)["volumes"]] == ["dshm"]

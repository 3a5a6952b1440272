"""VolcanoJobChart: the Volcano Job, its pods, the environment contract, topology checks, hash naming."""

import json

import pytest

from tests.support.k8s_validation import validate_objects
from tests.support.launches import flag, volcano_launch
from trainium_eks.core.conventions import Taint
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.manifests.jobs.job_naming import hashed_name
from trainium_eks.manifests.jobs.topology import NodeGroupTopology
from trainium_eks.manifests.jobs.volcano_job import Rendezvous, VolcanoJobChart

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
    chart = VolcanoJobChart(**{**BASE, **overrides})
    (manifest,) = chart.manifests()
    return chart, manifest


def pod(manifest):
    (task,) = manifest["spec"]["tasks"]
    return task["template"]["spec"]


def container(manifest):
    (worker,) = pod(manifest)["containers"]
    return worker


def env(manifest):
    return {e["name"]: e["value"] for e in container(manifest)["env"]}


def launch(manifest, tmp_path, node_index=0):
    return volcano_launch(manifest, tmp_path, node_index)


def test_volcano_job_shape_is_one_task_with_a_replica_per_node():
    chart, manifest = job()
    assert manifest["apiVersion"] == "batch.volcano.sh/v1alpha1" and manifest["kind"] == "Job"
    assert manifest["metadata"]["name"] == chart.job_name and manifest["metadata"]["namespace"] == "training"
    spec = manifest["spec"]
    assert spec["schedulerName"] == "volcano"
    assert spec["queue"] == "training"
    assert spec["minAvailable"] == 2, "gang: every node or none"
    assert spec["maxRetry"] == 3
    assert spec["plugins"] == {"svc": ["--publish-not-ready-addresses"], "env": []}
    (task,) = spec["tasks"]
    assert task["name"] == "node" and task["replicas"] == 2 and task["minAvailable"] == 2
    assert task["policies"] == [
        {"event": "PodEvicted", "action": "RestartJob"},
        {"event": "PodFailed", "action": "RestartJob"},
    ]


def test_the_manifest_does_not_grow_with_the_node_count():
    big = NodeGroupTopology("trn1.32xlarge", 450, 450, 8, (NEURON_TAINT,), frozenset({"fsx-claim"}))
    small, large = job(nodes=2, node_group=big)[1], job(nodes=450, node_group=big)[1]
    assert abs(len(json.dumps(large)) - len(json.dumps(small))) < 10
    assert large["spec"]["tasks"][0]["replicas"] == 450


def test_torchrun_command_rendezvouses_through_c10d_by_default(tmp_path):
    chart, manifest = job()
    words = launch(manifest, tmp_path)["argv"]
    assert words[0] == "torchrun"
    assert flag(words, "--nnodes") == "2" and flag(words, "--nproc_per_node") == "32"
    assert flag(words, "--rdzv_backend") == "c10d" and flag(words, "--rdzv_endpoint") == "localhost:29500"
    assert flag(words, "--rdzv_id") == chart.job_name
    assert not chart.needs_etcd


def test_etcd_rendezvous_is_an_option(tmp_path):
    chart, manifest = job(rendezvous="etcd")
    words = launch(manifest, tmp_path)["argv"]
    assert flag(words, "--rdzv_backend") == "etcd" and flag(words, "--rdzv_endpoint") == "etcd-server:2379"
    assert chart.needs_etcd
    assert words[-4:] == ["/opt/bert/pretrain_bert.py", "--data_dir", "/data/set", "--bf16"]


def test_environment_contract_per_node(tmp_path):
    _, manifest = job()
    assert env(manifest) == {
        "FI_PROVIDER": "efa",
        "FI_EFA_USE_DEVICE_RDMA": "1",
        "FI_EFA_FORK_SAFE": "1",
        "CCOM_SOCKET_IFNAME": "eth0",
        "NEURON_RT_RESET_CORES": "1",
        "XLA_TRANSFER_SEED_ASYNC": "1",
    }, "no XLA_DOWNCAST_BF16: the script's autocast chooses bf16, and Neuron says not to combine the two"
    for index in (0, 1, 449):
        seen = launch(manifest, tmp_path, node_index=index)["env"]
        assert seen["NEURON_CC_FLAGS"] == f"--cache_dir=/data/neuron_cache/bert-large_{index}", "per-node cache"
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


def test_precompile_wraps_the_same_command_with_the_same_cache_set(tmp_path):
    train_chart, train = job()
    compile_chart, compile_ = job(precompile=True)

    def without_id(words, chart):
        return [word.replace(chart.job_name, "ID") for word in words]

    compiled, trained = launch(compile_, tmp_path, 1), launch(train, tmp_path, 1)
    assert compiled["argv"][0] == "neuron_parallel_compile"
    assert without_id(compiled["argv"][1:], compile_chart) == without_id(trained["argv"], train_chart)
    assert compiled["env"]["NEURON_CC_FLAGS"] == trained["env"]["NEURON_CC_FLAGS"]


def test_c10d_rendezvous_uses_node_zero_through_volcano_host_names(tmp_path):
    chart, manifest = job()
    assert flag(launch(manifest, tmp_path, 0)["argv"], "--rdzv_endpoint") == "localhost:29500"
    node_zero = f"{chart.job_name}-node-0.{chart.job_name}:29500"
    assert flag(launch(manifest, tmp_path, 3)["argv"], "--rdzv_endpoint") == node_zero


def test_module_and_command_entrypoints(tmp_path):
    words = launch(job(script=None, module="mypkg.train")[1], tmp_path)["argv"]
    assert words[-5:-3] == ["-m", "mypkg.train"]
    words = launch(job(script=None, command="/opt/run.sh")[1], tmp_path)["argv"]
    assert words[-5:-3] == ["--no-python", "/opt/run.sh"]


def test_gpu_nodes_request_gpus_and_no_neuron_environment(tmp_path):
    _, manifest = job(node_group=P5, cache_set="default")
    assert container(manifest)["resources"]["limits"] == {"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 32}
    seen = launch(manifest, tmp_path)
    assert flag(seen["argv"], "--nproc_per_node") == "8"
    assert "NEURON_CC_FLAGS" not in seen["env"] and env(manifest)["FI_PROVIDER"] == "efa"


def test_a_job_that_waits_holds_nothing_in_its_own_pods():
    """No init container waits inside the job (it would hold the pod's devices); no priority class pretends to order
    the jobs: the job sequence holds the job until the jobs it waits for have completed."""
    chart, manifest = job(wait_for=["vcjob/bert-compile-0123456789"])
    assert chart.wait_for == ("vcjob/bert-compile-0123456789", chart.fabric_check.ref), "and its fabric check"
    assert "initContainers" not in pod(manifest) and "priorityClassName" not in pod(manifest)
    assert "priorityClassName" not in manifest["spec"]


def test_jobs_validate_against_the_volcano_job_schema(tmp_path):
    objects = [
        job()[1],
        job(precompile=True, wait_for=["job/data-1"])[1],
        job(rendezvous=Rendezvous.ETCD, nodes=4)[1],
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
        (
            {"processes_per_node": 33},
            "processes_per_node=33: an integer from 1 to 32, the NeuronCores of a trn1.32xlarge node",
        ),
        (
            {"neuron_devices": 17},
            "neuron_devices=17: an integer from 0 to 16, the Neuron devices of a trn1.32xlarge node",
        ),
        (
            {"efa_interfaces": 16},
            "efa_interfaces=16: an integer from 0 to 8, the EFA interfaces attached to each node of the group",
        ),
        ({"nodes": 5}, "nodes=5: an integer from 1 to 4"),
        (
            {"node_group": NO_VOLUME, "volumes": {"fsx-claim": "/data"}},
            "volumes=['fsx-claim']: claims the node group can reach (shared volumes: none)",
        ),
        ({"cache_set": "bert large!"}, "cache_set='bert large!': letters, digits, '_' and '-' only"),
        ({"name": "Bert_Train"}, "name='Bert_Train': a lowercase DNS label"),
        ({"module": "x"}, "exactly one of script, module or command"),
        ({"wait_for": ["deployment/x"]}, "wait_for=['deployment/x']: job charts, or references like job/<name>"),
        ({"bf16": True}, "bf16=True: removed: the training script chooses bf16 by its own argument (args=[..., "),
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


def test_no_shared_volume_keeps_the_compile_cache_on_the_node(tmp_path):
    _, manifest = job(node_group=NO_VOLUME)
    seen = launch(manifest, tmp_path)["env"]
    assert seen["NEURON_CC_FLAGS"] == "--cache_dir=/var/cache/neuron-compile-cache/bert-large_0"
    assert [v["name"] for v in pod(manifest)["volumes"]] == ["dshm"]


def test_workers_hold_no_token_no_capability_and_reach_the_internet_only_when_asked():
    _, manifest = job()
    (task,) = manifest["spec"]["tasks"]
    spec = task["template"]["spec"]
    assert spec["automountServiceAccountToken"] is False
    assert spec["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    (worker,) = spec["containers"]
    assert worker["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    assert "trainium-eks/egress-internet" not in task["template"]["metadata"]["labels"]
    _, online = job(internet_egress=True)
    (task,) = online["spec"]["tasks"]
    assert task["template"]["metadata"]["labels"]["trainium-eks/egress-internet"] == "true"
    assert online["metadata"]["name"] != manifest["metadata"]["name"], "a different job"
    with pytest.raises(ConfigurationError, match="internet_egress"):
        job(internet_egress="yes")


def test_every_pod_ends_by_its_deadline_and_the_job_by_deadline_times_attempts():
    chart, manifest = job()
    assert pod(manifest)["activeDeadlineSeconds"] == 24 * 3600 == chart.deadline_seconds, "the default: 24 hours"
    assert "activeDeadlineSeconds" not in manifest["spec"], "a Volcano Job has no deadline of its own"
    assert chart.bound_seconds == 3 * 24 * 3600, "maxRetry 3: three attempts of 24 hours"
    shorter, manifest = job(deadline_seconds=3600, max_retries=0)
    assert pod(manifest)["activeDeadlineSeconds"] == 3600 and shorter.bound_seconds == 3600, "one attempt at least"
    assert shorter.job_name != chart.job_name, "another deadline is another job, never an update in place"


@pytest.mark.parametrize("deadline", [0, 59, 90 * 24 * 3600 + 1, "24h", True, None, 3600.0])
def test_a_deadline_out_of_range_is_refused_with_the_other_problems(deadline):
    with pytest.raises(ConfigurationError) as raised:
        job(deadline_seconds=deadline, nodes=99)
    problems = raised.value.problems
    assert any(p.startswith(f"deadline_seconds={deadline!r}: an integer from 60 to 7776000") for p in problems)
    assert any(p.startswith("nodes=99") for p in problems), "reported with every other problem, at once"

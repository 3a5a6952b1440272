"""DistributedWorkload: the per-node defaults, resources, volumes, environment, launch script and refusals."""

import subprocess

import pytest

from tests.support.kubeflow_jobs import CPU, P4D, TRN1
from tests.support.launches import FAKE_FI_INFO, fake_efa
from trainium_eks.core.conventions import Taint
from trainium_eks.core.validation import ConfigurationError, Problems
from trainium_eks.manifests.jobs.distributed_workload import (
    EFA_SELF_CHECK_EXIT,
    FI_INFO,
    LOCAL_CACHE_ROOT,
    UVERBS_DIR,
    DistributedWorkload,
    NodeContract,
    efa_self_check,
)
from trainium_eks.manifests.jobs.topology import NodeGroupTopology

TWO_CLAIMS = NodeGroupTopology("m5.xlarge", 2, 2, 0, (), frozenset({"b-claim", "a-claim"}))
TRN1_SMALL = NodeGroupTopology("trn1.2xlarge", 2, 2, 0, (Taint("aws.amazon.com/neuron", "true", "NoSchedule"),))
CONTRACT = NodeContract(
    node_index="${IDX}",
    master_addr="${ADDR}",
    torchrun_args=("--rdzv_endpoint", "${ADDR}:29500", "--tag", "two words"),
    setup=("ADDR=node-0",),
)


def workload(**props):
    props = {"name": "train", "image": "example.com/train:1", "namespace": "training", "script": "/t.py", **props}
    return DistributedWorkload.from_props(Problems("workload"), **props)


def refusals(**props):
    with pytest.raises(ConfigurationError) as raised:
        workload(**props)
    return raised.value.problems


@pytest.mark.parametrize(
    "group,nodes,processes,neuron,efa,volumes,devices",
    [
        (CPU, 6, 1, 0, 0, {"efs-sc-claim": "/data"}, {}),
        (TRN1, 2, 32, 16, 8, {"fsx-claim": "/data"}, {"aws.amazon.com/neuron": 16, "vpc.amazonaws.com/efa": 8}),
        (P4D, 2, 8, 0, 4, {"c": "/data"}, {"vpc.amazonaws.com/efa": 4, "nvidia.com/gpu": 8}),
    ],
    ids=["cpu", "neuron", "gpu"],
)
def test_every_default_comes_from_the_node_group(group, nodes, processes, neuron, efa, volumes, devices):
    job = workload(node_group=group)
    assert (job.nodes, job.processes_per_node, job.neuron_devices, job.efa_interfaces) == (
        nodes,
        processes,
        neuron,
        efa,
    )
    assert job.world_size == nodes * processes
    assert job.volumes == volumes and job.cache_root == "/data/neuron_cache"
    assert job.devices() == devices
    assert (job.launcher.value, job.cache_set, job.max_retries, job.service_account) == (
        "torchrun",
        "default",
        3,
        "training",
    )


def test_claims_mount_in_name_order_and_the_compile_cache_follows_the_shared_mount():
    assert workload(node_group=TWO_CLAIMS).volumes == {"a-claim": "/data"}, "the first shared claim by name"
    job = workload(node_group=TWO_CLAIMS, volumes={"b-claim": "/b", "a-claim": "/a"})
    assert job.volume_mounts() == [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "claim-0", "mountPath": "/a"},
        {"name": "claim-1", "mountPath": "/b"},
    ]
    assert job.pod_volumes() == [
        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
        {"name": "claim-0", "persistentVolumeClaim": {"claimName": "a-claim"}},
        {"name": "claim-1", "persistentVolumeClaim": {"claimName": "b-claim"}},
    ]
    assert job.cache_root == LOCAL_CACHE_ROOT, "nothing is mounted at /data"


def test_a_pod_requests_a_share_of_the_node_limits_only_devices_and_gets_the_contract_then_env():
    assert workload(node_group=CPU, resource_fraction=0.1).resources() == {"requests": {"cpu": "1", "memory": "1Gi"}}
    assert workload(node_group=CPU, resource_fraction=0).resources() == {"requests": {}}
    assert workload(node_group=P4D, resource_fraction=0.25).resources() == {
        "requests": {"vpc.amazonaws.com/efa": 4, "nvidia.com/gpu": 8, "cpu": "24", "memory": "288Gi"},
        "limits": {"vpc.amazonaws.com/efa": 4, "nvidia.com/gpu": 8},
    }, "at least one vCPU and 1 GiB; devices are requests and limits"
    env = workload(node_group=TRN1, env={"FI_PROVIDER": "tcp", "EXTRA": "1"}).environment()
    assert [(e["name"], e["value"]) for e in env] == [
        ("FI_PROVIDER", "tcp"),
        ("FI_EFA_USE_DEVICE_RDMA", "1"),
        ("FI_EFA_FORK_SAFE", "1"),
        ("CCOM_SOCKET_IFNAME", "eth0"),
        ("NEURON_RT_RESET_CORES", "1"),
        ("XLA_TRANSFER_SEED_ASYNC", "1"),
        ("EXTRA", "1"),
    ], "env overrides the contract in place"
    assert workload(node_group=CPU, env={"EXTRA": "1"}).environment() == [{"name": "EXTRA", "value": "1"}]


def test_the_launch_script_of_each_launcher_and_entrypoint():
    torchrun = workload(node_group=TRN1, args=["--name", "a b"], cache_set="bert").launch_script(CONTRACT)
    assert torchrun.split("\n") == efa_self_check(8) + [
        "ADDR=node-0",
        'export NEURON_CC_FLAGS="--cache_dir=/data/neuron_cache/bert_${IDX}"',
        "exec torchrun --nnodes 2 --nproc_per_node 32 --rdzv_endpoint \"${ADDR}:29500\" --tag 'two words' --tee 3 "
        "/t.py --name 'a b'",
    ], "a word around one ${VAR} is double-quoted so that the shell expands it; others are quoted as they are"
    direct = workload(node_group=CPU, script=None, module="pkg.train", launcher="direct", args=["--x"])
    assert direct.launch_script(CONTRACT) == "ADDR=node-0\nexec python3 -m pkg.train --x"
    composer = workload(node_group=P4D, script=None, command="/opt/run.sh", launcher="composer", args=["--x"])
    assert composer.launch_script(CONTRACT).split("\n") == efa_self_check(4) + [
        "ADDR=node-0",
        'export NODE_RANK="${IDX}"',
        'exec composer -n 8 --world_size 16 --node_rank "${IDX}" --master_addr "${ADDR}" --master_port 29500 '
        "--command_mode /opt/run.sh --x",
    ]


@pytest.mark.parametrize(
    "props,problem",
    [
        (
            {"node_group": TRN1, "launcher": "direct", "precompile": True},
            "precompile=True: only with the torchrun launcher, not direct",
        ),
        ({"node_group": TRN1_SMALL, "nodes": 2}, "nodes=2: 1: trn1.2xlarge nodes have no EFA interface"),
        ({"env": {"1BAD": "x"}}, "env key='1BAD': an environment variable name ([-._a-zA-Z0-9])"),
        (
            {"volumes": {"efs-sc-claim": "data"}},
            "volumes['efs-sc-claim']='data': an absolute path below the root, such as /data (no '..', no trailing '/')",
        ),
        ({"resource_fraction": 1}, "resource_fraction=1: a number at least 0 and below 1"),
        ({"max_retries": 101}, "max_retries=101: an integer from 0 to 100"),
    ],
    ids=["direct-precompile", "no-efa", "env-name", "relative-mount", "whole-node", "retries"],
)
def test_a_setting_the_nodes_or_the_launcher_cannot_honour_is_refused(props, problem):
    assert refusals(**{"node_group": CPU, **props}) == [problem]


def test_without_a_node_group_the_other_props_are_still_checked_and_an_unknown_one_lists_the_known():
    found = refusals(node_group="trn1.32xlarge", image="", zzz=1)
    assert found[0].startswith(
        "zzz=1: unknown setting; known: args, cache_set, command, efa_interfaces, env, graceful_stop, image"
    )
    assert found[1:] == [
        "node_group='trn1.32xlarge': a NodeGroupTopology (TrainingNodeGroup.topology)",
        "image='': a container image reference such as registry/repository:tag, optionally pinned by digest as "
        "registry/repository:tag@sha256:<64 lowercase hex digits>",
    ], "no check that needs the nodes runs without them"


# --- the EFA self-check (item 3): run with bash against fake devices and a fake fi_info ----------------------------


def self_check(tmp_path, *, expected=8, devices=None, fi_info=FAKE_FI_INFO, remove_fi_info=False):
    """Run the self-check of a pod that requested ``expected`` EFA devices, seeing ``devices`` of them."""
    script = fake_efa("\n".join(efa_self_check(expected)) + "\necho STARTED", tmp_path, devices, fi_info)
    if remove_fi_info:
        (tmp_path / "fi_info").unlink()
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True)


def test_a_pod_that_sees_every_efa_device_it_requested_and_the_efa_provider_starts(tmp_path):
    done = self_check(tmp_path, expected=8)
    assert (done.returncode, done.stdout, done.stderr) == (0, "STARTED\n", "")


@pytest.mark.parametrize("devices", [0, 7, 9])
def test_a_pod_that_sees_another_number_of_efa_devices_exits_at_once_saying_so(tmp_path, devices):
    done = self_check(tmp_path, expected=8, devices=devices)
    assert done.returncode == EFA_SELF_CHECK_EXIT == 78 and "STARTED" not in done.stdout
    assert f"requested 8 EFA devices (vpc.amazonaws.com/efa) and sees {devices}" in done.stderr, done.stderr


def test_a_pod_whose_libfabric_lists_no_efa_provider_exits_at_once_with_what_fi_info_said(tmp_path):
    tcp_only = "#!/bin/sh\nif [ \"$2\" = efa ]; then echo 'fi_getinfo: -61 (No data available)' >&2; exit 195; fi\n"
    done = self_check(tmp_path, fi_info=tcp_only)
    assert done.returncode == EFA_SELF_CHECK_EXIT and "STARTED" not in done.stdout
    assert "-p efa lists no efa provider" in done.stderr and "No data available" in done.stderr, done.stderr
    lists_tcp = "#!/bin/sh\necho 'provider: tcp'\necho '    fabric: 10.0.0.0/16'\n"
    done = self_check(tmp_path, fi_info=lists_tcp)
    assert done.returncode == EFA_SELF_CHECK_EXIT and "lists no efa provider" in done.stderr
    assert "provider: tcp" in done.stderr, "the message shows what fi_info listed"


def test_an_image_without_fi_info_exits_at_once_naming_the_path(tmp_path):
    done = self_check(tmp_path, remove_fi_info=True)
    assert done.returncode == EFA_SELF_CHECK_EXIT and "STARTED" not in done.stdout
    assert "fi_info is missing" in done.stderr


def test_the_self_check_looks_where_the_device_plugin_and_the_efa_installer_put_things():
    lines = efa_self_check(16)
    assert lines[0] == "efa_expected=16" and f"efa_devices=({UVERBS_DIR}/uverbs*)" in lines
    assert UVERBS_DIR == "/dev/infiniband" and FI_INFO == "/opt/amazon/efa/bin/fi_info"
    assert f"if ! {FI_INFO} -p efa 2>&1 | grep -q 'provider: efa'; then" in lines
    assert not any("$(" in line for line in lines), "no $( for the kubelet to read as a variable reference"


def test_only_pods_that_request_efa_run_the_self_check():
    assert workload(node_group=TRN1).launch_script(CONTRACT).startswith("efa_expected=8\n")
    assert workload(node_group=TRN1, efa_interfaces=2).launch_script(CONTRACT).startswith("efa_expected=2\n")
    assert workload(node_group=TRN1, efa_interfaces=0).launch_script(CONTRACT).startswith("ADDR=node-0")
    assert workload(node_group=CPU).launch_script(CONTRACT).startswith("ADDR=node-0")

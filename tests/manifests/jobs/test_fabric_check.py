"""FabricCheckChart: the Volcano Job that benchmarks a multi-node EFA job's nodes before the job runs, its naming, its
settings, and its pods' script run with bash against fake sshd, ssh, getent, EFA devices and benchmarks."""

import hashlib
import json
import os
import re
import subprocess

import pytest

from rehearsal.kubelet_expansion import expand
from tests.support.k8s_validation import validate_objects
from tests.support.launches import fake_efa
from trainium_eks.core.conventions import EFA_RESOURCE, FABRIC_CHECK_LABEL, FABRIC_RESULT_MARKER, Taint
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.facts import versions
from trainium_eks.manifests.jobs import fabric_check
from trainium_eks.manifests.jobs.fabric_check import (
    DONE_FILE,
    ENVIRONMENT_FILE,
    FABRIC_PROGRAM_SOURCE,
    MAX_RETRY,
    NCCOM_REPORT,
    NODE_FILE,
    NODE_NAME_ENV,
    PEER_EXIT_DELAY_SECONDS,
    PROGRAM_CONFIG_MAP,
    PROGRAM_MOUNT,
    PROGRAM_PATH,
    SSHD,
    SSHD_RUN_DIR,
    SUSPECT_ROUNDS_ANNOTATION,
    TERMINATION_LOG,
    WORK_DIR,
    FabricCheckChart,
    FabricProgramChart,
    fabric_base_name,
)
from trainium_eks.manifests.jobs.fabric_program import BELOW_FLOOR, SUSPECT_NODES, result_from_log
from trainium_eks.manifests.jobs.mounted_program import program_source
from trainium_eks.manifests.jobs.progress_watch import PROGRESS_FILE_ENV, ProgressWatch
from trainium_eks.manifests.jobs.pytorch_job import PyTorchJobChart
from trainium_eks.manifests.jobs.topology import NodeGroupTopology
from trainium_eks.manifests.jobs.train_job import TrainJobChart
from trainium_eks.manifests.jobs.volcano_job import VolcanoJobChart

NEURON = (Taint("aws.amazon.com/neuron", "true", "NoSchedule"),)
GPU = (Taint("nvidia.com/gpu", "true", "NoSchedule"),)
TRN1 = NodeGroupTopology("trn1.32xlarge", 2, 4, 8, NEURON, frozenset({"fsx-claim"}))
TRN2 = NodeGroupTopology("trn2.48xlarge", 4, 4, 16, NEURON, frozenset({"fsx-claim"}))
P4D = NodeGroupTopology("p4d.24xlarge", 2, 2, 4, GPU, frozenset({"fsx-claim"}))
CPU = NodeGroupTopology("m5.xlarge", 2, 2, 0, (), frozenset({"fsx-claim"}))
BASE = dict(name="bert-phase1-train", image="example.com/bert:1", node_group=TRN1, script="/opt/bert/train.py")


def job(**overrides):
    return VolcanoJobChart(**{**BASE, **overrides})


def check_of(chart):
    (manifest,) = chart.fabric_check.manifests()
    return manifest


def task(manifest):
    (only,) = manifest["spec"]["tasks"]
    return only


def container(manifest):
    (only,) = task(manifest)["template"]["spec"]["containers"]
    return only


def test_the_check_is_a_gang_of_the_jobs_nodes_with_ssh_svc_and_env_and_a_policy_per_verdict():
    chart = job(queue="research")
    manifest = check_of(chart)
    assert (manifest["apiVersion"], manifest["kind"]) == ("batch.volcano.sh/v1alpha1", "Job")
    spec = manifest["spec"]
    assert spec["schedulerName"] == "volcano" and spec["queue"] == "research", "the job's own queue"
    assert spec["minAvailable"] == 2 and spec["maxRetry"] == MAX_RETRY == 2
    assert spec["plugins"] == {"ssh": [], "svc": ["--publish-not-ready-addresses"], "env": []}
    (only,) = spec["tasks"]
    assert (only["name"], only["replicas"], only["minAvailable"]) == ("node", 2, 2)
    assert only["policies"] == [
        {"exitCode": 3, "action": "TerminateJob"},
        {"exitCode": 4, "action": "TerminateJob"},
        {"exitCode": 6, "action": "TerminateJob"},
        {"exitCode": 78, "action": "TerminateJob"},
        {"event": "PodEvicted", "action": "RestartJob"},
        {"event": "PodFailed", "action": "RestartJob"},
    ], "a verdict ends the check at once, anything else gets the one retry; exit codes before the events"


def test_the_checks_pods_have_the_jobs_devices_environment_and_placement():
    chart = job(env={"EXTRA": "1"})
    gated_pod = chart.manifest["spec"]["tasks"][0]["template"]["spec"]
    (gated,) = gated_pod["containers"]
    manifest = check_of(chart)
    pod = task(manifest)["template"]["spec"]
    fabric = container(manifest)
    assert fabric["image"] == gated["image"], "Trainium: the job's own image (the DLC has nccom-test, MPI, sshd)"
    assert fabric["resources"] == gated["resources"], "every Neuron device and EFA interface the job requests"
    assert fabric["resources"]["limits"] == {"aws.amazon.com/neuron": 16, EFA_RESOURCE: 8}
    node_name = {"name": "TRAINIUM_EKS_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
    assert fabric["env"] == [*gated["env"], node_name], "the job's environment contract and env, and its node's name"
    assert {"FI_PROVIDER": "efa", "EXTRA": "1"}.items() <= {e["name"]: e.get("value") for e in fabric["env"]}.items()
    assert (pod["nodeSelector"], pod["tolerations"]) == (gated_pod["nodeSelector"], gated_pod["tolerations"])
    assert pod["restartPolicy"] == "Never" and pod["automountServiceAccountToken"] is False
    assert pod["activeDeadlineSeconds"] == fabric_check.POD_DEADLINE_SECONDS
    assert {"name": "dshm", "emptyDir": {"medium": "Memory"}} in pod["volumes"]
    assert {"name": "fabric-program", "configMap": {"name": PROGRAM_CONFIG_MAP}} in pod["volumes"]
    assert {"name": "fabric-program", "mountPath": PROGRAM_MOUNT, "readOnly": True} in fabric["volumeMounts"]
    assert "persistentVolumeClaim" not in json.dumps(pod), "the benchmark needs no shared volume"


def test_the_check_and_its_pods_are_labelled_with_the_name_of_the_job_they_check():
    chart = job()
    manifest = check_of(chart)
    for labels in (manifest["metadata"]["labels"], task(manifest)["template"]["metadata"]["labels"]):
        assert labels[FABRIC_CHECK_LABEL] == chart.job_name == chart.manifest["metadata"]["name"]
        assert labels["app.kubernetes.io/instance"] == chart.fabric_check.job_name
    assert chart.fabric_check.gated_job == chart.job_name
    assert FABRIC_CHECK_LABEL not in json.dumps(chart.manifest), "the checked job itself carries no such label"


def test_the_check_is_named_after_its_spec_and_the_jobs_so_a_changed_job_gets_a_fresh_check():
    chart = job()
    name = chart.fabric_check.job_name
    assert re.fullmatch(r"bert-phase1-train-fabric-[0-9a-f]{10}", name), name
    assert job().fabric_check.job_name == name and job().job_name == chart.job_name, "same spec, same names"
    changed = job(args=["--lr", "1e-4"])
    assert changed.fabric_check.job_name != name, "another training job, another check"
    assert job(fabric_floor_fraction=0.5).fabric_check.job_name != name, "another floor, another check"
    assert job(fabric_floor_fraction=0.5).job_name != chart.job_name, "and so another job (it waits for it)"
    assert job(wait_for=["job/data-1"]).fabric_check.job_name != name


def test_the_checks_base_name_fits_28_characters_and_its_pods_fit_63():
    assert fabric_base_name("bert-phase1-compile") == "bert-phase1-compile-fabric"
    assert fabric_base_name("a" * 28) == "a" * 21 + "-fabric"
    assert fabric_base_name("abcdefghijklmnopqrst-vwxyz") == "abcdefghijklmnopqrst-fabric", "no '--'"
    big = NodeGroupTopology("trn1.32xlarge", 450, 450, 8, NEURON, frozenset({"fsx-claim"}))
    chart = job(name="a" * 28, node_group=big, nodes=450)
    name = chart.fabric_check.job_name
    assert len(name) <= 39 and len(f"{name}-node-449") <= 63 and len(f"{name}-ssh") <= 63


def test_the_trainium_benchmark_is_nccom_test_as_aws_k8s_tester_runs_it_on_every_core_of_every_node():
    chart = job()
    check = chart.fabric_check
    assert check.benchmark == "nccom" and check.floor_gbps == 200 and check.link_gbps == 800
    words = check.program_words()
    split = words.index("--")
    assert words[:split] == [
        "--benchmark",
        "nccom",
        "--floor-gbps",
        "200",
        "--link-gbps",
        "800",
        "--efa-devices",
        "8",
        "--marker",
        FABRIC_RESULT_MARKER,
        "--ranks-per-node",
        "32",
        "--timeout-seconds",
        "1800",
        "--pair-timeout-seconds",
        "240",
        "--root-comm-port",
        "63182",
        "--collector-port",
        "60006",
        "--result-file",
        "/dev/termination-log",
    ]
    assert words[split + 1 :] == [
        "timeout",
        "--kill-after=60",
        "{timeout}",
        "nccom-test",
        "-r",
        "{ranks}",
        "-N",
        "{nodes}",
        "-b",
        "8",
        "-e",
        "2G",
        "-f",
        "2",
        "-n",
        "5",
        "-w",
        "5",
        "-d",
        "fp32",
        "--non-interactive",
        "--report-to-json-file",
        NCCOM_REPORT,
        "allr",
        "--hosts",
        "{hosts}",
        "--data-collector-host",
        "{launcher}",
        "--data-collector-port",
        "{collector_port}",
    ]
    half = job(efa_interfaces=4).fabric_check
    assert (half.link_gbps, half.floor_gbps) == (400, 100), "half the interfaces, half the link"
    trn2 = job(node_group=TRN2).fabric_check.program_words()
    assert trn2[trn2.index("--ranks-per-node") + 1] == "64", "64 cores a node (-r: ranks a node x nodes, in the pod)"


def test_the_nvidia_benchmark_is_nccl_tests_all_reduce_over_mpirun_in_the_pinned_image():
    chart = job(name="gpu-train", node_group=P4D)
    check = chart.fabric_check
    assert check.benchmark == "nccl" and check.image == versions.NCCL_TESTS.image
    assert container(check_of(chart))["image"] == versions.NCCL_TESTS.image
    words = check.program_words()
    benchmark = words[words.index("--") + 1 :]
    assert benchmark[benchmark.index("mpirun") :][:5] == [
        "mpirun",
        "--allow-run-as-root",
        "--tag-output",
        "-np",
        "{ranks}",
    ]
    assert words[words.index("--ranks-per-node") + 1] == "8" and "--root-comm-port" not in words, "8 GPUs a node"
    forwarded = [benchmark[i + 1] for i, word in enumerate(benchmark) if word == "-x"]
    assert {"FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "NCCL_DEBUG", "LD_LIBRARY_PATH"} <= set(forwarded)
    host = benchmark.index("--host")
    assert benchmark[host + 1 :] == ["{slots}", *check.nccl_tail()]
    assert check.nccl_tail()[0] == "/opt/nccl-tests/build/all_reduce_perf"
    assert check.floor_gbps == 100 and check.link_gbps == 400


def test_the_program_reaches_the_pods_as_its_source_without_the_docstring_from_one_configmap_per_namespace():
    (config_map,) = FabricProgramChart(namespace="training").manifests()
    assert (config_map["kind"], config_map["metadata"]["namespace"]) == ("ConfigMap", "training")
    assert config_map["metadata"]["name"] == PROGRAM_CONFIG_MAP and PROGRAM_PATH.startswith(PROGRAM_MOUNT + "/")
    source = fabric_check.Path(fabric_check.__file__).parent / "fabric_program.py"
    assert config_map["data"] == {"fabric_program.py": FABRIC_PROGRAM_SOURCE}
    assert FABRIC_PROGRAM_SOURCE == program_source(source)
    compile(FABRIC_PROGRAM_SOURCE, "fabric_program", "exec")
    digest = hashlib.sha256(FABRIC_PROGRAM_SOURCE.encode()).hexdigest()[:10]
    assert PROGRAM_CONFIG_MAP.endswith(digest), "another program, another ConfigMap, and so other check names"
    script = container(check_of(job()))["command"][2]
    assert f'python3 {PROGRAM_PATH} --hosts="${{addresses}}" --node-names="${{nodes}}" --benchmark nccom' in script


def test_train_jobs_and_pytorch_jobs_are_checked_by_the_same_volcano_job():
    common = dict(image="example.com/t:1", node_group=TRN1, script="/t.py")
    train = TrainJobChart(name="kubeflow-train", queue=None, **common)
    pytorch = PyTorchJobChart(name="pytorch-train", **common)
    for chart in (train, pytorch):
        check = chart.fabric_check
        assert check is not None and check.ref in chart.wait_for
        assert check_of(chart)["spec"]["queue"] == "training", "the library's queue when the job leaves it to others"
        assert check_of(chart)["metadata"]["labels"][FABRIC_CHECK_LABEL] == chart.job_name
    single = TrainJobChart(name="single", nodes=1, **common)
    assert single.fabric_check is None and single.wait_for == ()


@pytest.mark.parametrize(
    "props,problem",
    [
        ({"fabric_floor_fraction": 0}, "fabric_floor_fraction=0: a fraction of the EFA link rate above 0"),
        ({"fabric_floor_fraction": 1.5}, "fabric_floor_fraction=1.5: a fraction of the EFA link rate above 0"),
        ({"fabric_floor_fraction": "0.3"}, "fabric_floor_fraction='0.3': a fraction"),
        ({"fabric_floor_fraction": True}, "fabric_floor_fraction=True: a fraction"),
        ({"fabric_check": "yes"}, "fabric_check='yes'"),
    ],
)
def test_a_check_setting_out_of_range_is_one_clear_problem_among_the_others(props, problem):
    with pytest.raises(ConfigurationError) as raised:
        job(**props, nodes=99)
    problems = raised.value.problems
    assert any(p.startswith(problem) for p in problems), problems
    assert any(p.startswith("nodes=99") for p in problems), "reported with every other problem, at once"


def test_no_check_where_it_does_not_apply_and_a_chart_of_ones_own_is_refused_there():
    assert job(nodes=1).fabric_check is None
    assert job(node_group=CPU).fabric_check is None
    assert job(efa_interfaces=0).fabric_check is None
    assert job(fabric_check=False).fabric_check is None
    with pytest.raises(ConfigurationError, match="a job on more than one node of a Neuron or NVIDIA type with EFA"):
        FabricCheckChart(workload=job(nodes=1).workload, gated_job="x")


def test_a_check_of_ones_own_is_labelled_at_once_and_only_once():
    chart = FabricCheckChart(workload=job(fabric_check=False).workload, gated_job="my-job", floor_fraction=0.4)
    (manifest,) = chart.manifests()
    assert manifest["metadata"]["labels"][FABRIC_CHECK_LABEL] == "my-job" and chart.floor_gbps == 320
    with pytest.raises(ValueError, match="already checks the fabric of my-job"):
        chart.label_for("other")


def test_checks_validate_against_the_volcano_job_schema(tmp_path):
    charts = [job(), job(node_group=P4D, name="gpu"), job(node_group=TRN2, wait_for=["job/data-1"])]
    program = FabricProgramChart(namespace="training").manifests()
    validate_objects([check_of(chart) for chart in charts] + [c.manifest for c in charts] + program, tmp_path)


def test_the_script_has_no_kubelet_reference_left_and_no_list_that_grows_with_the_nodes():
    small, large = (check_of(job(node_group=TRN2, nodes=n)) for n in (2, 4))
    command = container(small)["command"]
    assert command[:2] == ["bash", "-c"]
    assert "$(" not in command[2].replace("$$(", ""), "every $( escaped for the kubelet"
    assert abs(len(json.dumps(large)) - len(json.dumps(small))) < 10, "hosts come from VC_NODE_HOSTS at run time"


# --- the pods' script, run with bash: node 0 and a peer on one machine ----------------------------------------------

NCCOM_TABLE = """\
       size(B)    count(elems)    type    time:avg(us)    algbw(GB/s)    busbw(GB/s)
      33554432         8388608    fp32         2405.10          12.99          {small}
    2147483648       536870912    fp32        72600.18          27.55          {large}
Avg bus bandwidth:      26.4414GB/s
"""

PEER_ROOT = "@ROOT@"
"""A placeholder in a command sent over the fake ssh, which replaces it with the reached host's own folder."""

FAKES = {
    "ssh": """#!/bin/bash
# ssh -o ... -o ... <host> <command>: reach the host's fake root (a directory named after it) if its sshd is up
while [ "$1" = -o ]; do shift 2; done
host="$1"; shift
root="$FAKE_HOSTS/$host"
[ -e "$root/up" ] || { echo "ssh: connect to host $host port 22: Connection refused" >&2; exit 255; }
command="${*//@ROOT@/$root}"
bash -c "$command"
""",
    "getent": """#!/bin/bash
# getent hosts <host>: the host's address (the hosts are numbered from 1 in the test)
[ "$1" = hosts ] || exit 2
index="$(cat "$FAKE_HOSTS/$2/index" 2> /dev/null)" || exit 2
echo "10.0.0.$index   $2"
""",
    "ssh-keygen": "#!/bin/sh\nexit 0\n",
    "nccom-test": """#!/bin/bash
# the output of nccom-test.out, or of nccom-test.slow.out when FAKE_SLOW is one of its hosts; each run logged
echo "$*" > "$FAKE_HOSTS/nccom-test.argv"
echo "$*" >> "$FAKE_HOSTS/nccom-test.runs"
env > "$FAKE_HOSTS/nccom-test.env"
if [ -n "$FAKE_SLOW" ] && [[ " $* " == *" $FAKE_SLOW "* ]]; then cat "$FAKE_HOSTS/nccom-test.slow.out"; exit 0; fi
cat "$FAKE_HOSTS/nccom-test.out"
""",
    "mpirun": """#!/bin/bash
echo "$*" > "$FAKE_HOSTS/mpirun.argv"
cat "$FAKE_HOSTS/mpirun.out"
""",
}


def pod_script(manifest, tmp_path, host, hosts):
    """The check's script as pod ``host`` runs it here: its files in a directory of its own, sshd and the EFA
    device plugin faked, peers reached over the fake ssh."""
    root = tmp_path / host
    root.mkdir(exist_ok=True)
    (root / "index").write_text(str(hosts.index(host) + 1))
    script = fake_efa(expand(container(manifest)["command"][2], {}), root)
    program = tmp_path / "fabric_program.py"
    program.write_text(FABRIC_PROGRAM_SOURCE)
    script = script.replace(PROGRAM_PATH, str(program))
    device_dir = str(root / "infiniband")
    script = re.sub(r"--efa-devices (\d+) ", rf"--efa-devices \1 --device-dir {device_dir} ", script)
    script = script.replace(ENVIRONMENT_FILE, str(root / "environment"))
    script = script.replace(f"mkdir -p {SSHD_RUN_DIR} {WORK_DIR}", f"mkdir -p {root}/run-sshd {root}/scratch")
    script = script.replace(SSHD, f"touch {root}/up")
    script = script.replace(f"> {DONE_FILE}", f"> {PEER_ROOT}/done").replace(DONE_FILE, str(root / "done"))
    script = script.replace(f'"${{host}}" cat {NODE_FILE}', f'"${{host}}" cat {PEER_ROOT}/scratch/node')
    script = script.replace(WORK_DIR, str(root / "scratch")).replace(TERMINATION_LOG, str(root / "termination-log"))
    script = script.replace(f"sleep {PEER_EXIT_DELAY_SECONDS}", "sleep 0.5")
    return script.replace("sleep 5", "sleep 0.05")


def run_check(manifest, tmp_path, *, benchmark_output, peer_up=True, slow=None):
    """Node 0 and its peers (the job's nodes) of a check: (node 0's result, the first peer's result). ``slow``: the
    output of the benchmark when node 2 (10.0.0.3) is among its hosts."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in FAKES.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    job_name = manifest["metadata"]["name"]
    nodes = manifest["spec"]["minAvailable"]
    hosts = [f"{job_name}-node-{i}.{job_name}" for i in range(nodes)]
    (tmp_path / "nccom-test.out").write_text(benchmark_output)
    (tmp_path / "nccom-test.slow.out").write_text(slow or benchmark_output)
    (tmp_path / "mpirun.out").write_text(benchmark_output)
    variables = {e["name"]: expand(e["value"], {}) for e in container(manifest)["env"] if "value" in e}
    base = {
        **variables,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "FAKE_HOSTS": str(tmp_path),
        "VC_NODE_HOSTS": ",".join(hosts),
        "VC_NODE_NUM": str(nodes),
        "FAKE_SLOW": "10.0.0.3" if slow else "",
    }
    scripts = [pod_script(manifest, tmp_path, host, hosts) for host in hosts]
    peers = []
    if peer_up:
        peers = [
            subprocess.Popen(
                ["bash", "-c", scripts[index]],
                env={**base, "VC_TASK_INDEX": str(index), NODE_NAME_ENV: f"ip-10-0-1-{index}.ec2.internal"},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for index in range(1, nodes)
        ]
    node_zero = subprocess.run(
        ["bash", "-c", scripts[0]],
        env={**base, "VC_TASK_INDEX": "0", NODE_NAME_ENV: "ip-10-0-1-0.ec2.internal"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    results = []
    for peer in peers:
        out, err = peer.communicate(timeout=60)
        results.append((peer.returncode, out, err))
    return node_zero, results[0] if results else None


def nccom_output(busbw_gibs):
    return NCCOM_TABLE.format(small=f"{busbw_gibs / 2:.2f}", large=f"{busbw_gibs:.2f}")


def test_a_healthy_fabric_passes_on_node_zero_and_the_peer_ends_with_it(tmp_path):
    manifest = check_of(job())
    node_zero, (peer_code, peer_out, _) = run_check(manifest, tmp_path, benchmark_output=nccom_output(47.09))
    assert node_zero.returncode == 0, node_zero.stdout + node_zero.stderr
    result = result_from_log(node_zero.stdout)
    assert result.passed and result.benchmark == "nccom"
    assert result.checked_busbw_gbps == pytest.approx(47.09 * 2**30 * 8 / 1e9), "GiB/s read as such: 404.5 Gbps"
    assert peer_code == 0 and "node 0 finished with exit status 0" in peer_out
    argv = (tmp_path / "nccom-test.argv").read_text().split()
    assert argv[:4] == ["-r", "64", "-N", "2"] and argv[-7:-4] == ["--hosts", "10.0.0.1", "10.0.0.2"]
    assert argv[-4:] == ["--data-collector-host", "10.0.0.1", "--data-collector-port", "60006"], (
        "node 0's address, not a host name the peer cannot resolve (aws-k8s-tester passes the launcher's IP)"
    )
    seen = dict(line.split("=", 1) for line in (tmp_path / "nccom-test.env").read_text().splitlines() if "=" in line)
    assert seen["NEURON_RT_ROOT_COMM_ID"] == "10.0.0.1:63182", "node 0's address, aws-k8s-tester's port"
    assert seen["OMPI_ALLOW_RUN_AS_ROOT"] == seen["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] == "1"
    assert seen["CCOM_SOCKET_IFNAME"] == "eth0" and seen["FI_PROVIDER"] == "efa", "the job's environment"
    name = manifest["metadata"]["name"]
    for host in (f"{name}-node-0.{name}", f"{name}-node-1.{name}"):
        written = (tmp_path / host / "environment").read_text().splitlines()
        assert 'FI_PROVIDER="efa"' in written and any(line.startswith("PATH=") for line in written), "for ssh"


def test_a_fabric_below_the_floor_fails_node_zero_with_3_and_the_peer_with_it(tmp_path):
    manifest = check_of(job())
    node_zero, (peer_code, peer_out, _) = run_check(manifest, tmp_path, benchmark_output=nccom_output(10.0))
    assert node_zero.returncode == BELOW_FLOOR == 3, node_zero.stdout + node_zero.stderr
    result = result_from_log(node_zero.stdout)
    assert result.verdict == "below-floor" and "< floor 200" in result.reason
    assert peer_code == BELOW_FLOOR and "exit status 3" in peer_out, "so Volcano terminates, whichever pod it sees"


def test_below_the_floor_node_zero_measures_pairs_names_the_slow_node_and_tells_its_release(tmp_path):
    manifest = check_of(job(nodes=4))
    node_zero, (peer_code, peer_out, _) = run_check(
        manifest, tmp_path, benchmark_output=nccom_output(47.09), slow=nccom_output(10.0)
    )
    assert node_zero.returncode == SUSPECT_NODES == 6, node_zero.stdout + node_zero.stderr
    assert peer_code == 6 and "exit status 6" in peer_out, "Volcano's policy for 6 terminates, whichever pod it sees"
    runs = [line.split() for line in (tmp_path / "nccom-test.runs").read_text().splitlines()]
    hosts = [run[run.index("--hosts") + 1 : run.index("--data-collector-host")] for run in runs]
    assert hosts == [
        ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"],
        ["10.0.0.1", "10.0.0.2"],
        ["10.0.0.3", "10.0.0.4"],
        ["10.0.0.3", "10.0.0.1"],
        ["10.0.0.4", "10.0.0.1"],
    ]
    assert [run[:4] for run in runs] == [["-r", "128", "-N", "4"]] + [["-r", "64", "-N", "2"]] * 4
    assert {run[run.index("--data-collector-host") + 1] for run in runs} == {"10.0.0.1"}, "node 0 invokes every run"
    ports = [run[run.index("--data-collector-port") + 1] for run in runs]
    assert ports == ["60006", "60007", "60008", "60009", "60010"], "each run on ports of its own"
    name = manifest["metadata"]["name"]
    message = json.loads((tmp_path / f"{name}-node-0.{name}" / "termination-log").read_text())
    assert message["verdict"] == "suspect-nodes" and message["suspects"] == [2], "node 2 is pod <check>-node-2"
    assert message["suspect_nodes"] == ["ip-10-0-1-2.ec2.internal"], "named by node 0: Volcano deletes running peers"
    assert "suspects: node 2 (10.0.0.3, ip-10-0-1-2.ec2.internal)" in node_zero.stdout


def test_node_zero_waits_for_its_peers_sshd_and_gives_up_naming_it(tmp_path, monkeypatch):
    monkeypatch.setattr(fabric_check, "PEER_WAIT_SECONDS", 1)
    chart = job()
    node_zero, peer = run_check(check_of(chart), tmp_path, benchmark_output=nccom_output(47.0), peer_up=False)
    assert peer is None and node_zero.returncode == 1
    assert "cannot ssh to" in node_zero.stderr and "-node-1." in node_zero.stderr and "after 1 s" in node_zero.stderr
    assert not (tmp_path / "nccom-test.argv").exists(), "no benchmark without every peer"


def test_a_pod_whose_efa_is_missing_fails_before_sshd_with_the_self_checks_status(tmp_path):
    manifest = check_of(job())
    script = pod_script(manifest, tmp_path, "h", ["h"])
    for device in (tmp_path / "h" / "infiniband").glob("uverbs*"):
        device.unlink()
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env={"PATH": os.environ["PATH"]})
    assert done.returncode == 78 and "requested 8 EFA devices" in done.stderr
    assert not (tmp_path / "h" / "up").exists(), "nothing else ran"


NCCL_OUTPUT = """\
[1,0]<stdout>:ip-0:42:60 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa (found 4 nics)
[1,0]<stdout>:ip-0:42:60 [0] NCCL INFO Using network Libfabric
[1,0]<stdout>:#                                       out-of-place                 in-place
[1,0]<stdout>:#  size      count  type redop root  time algbw busbw #wrong  time algbw busbw #wrong
[1,0]<stdout>:#   (B) (elements)                   (us) (GB/s) (GB/s)       (us) (GB/s) (GB/s)
[1,0]<stdout>: 2147483648 536870912 float sum -1  97000 22.14 41.51  0  96500 22.25 41.73  0
[1,0]<stdout>:# Out of bounds values : 0 OK
[1,0]<stdout>:# Avg bus bandwidth    : 41.62
"""


def test_the_nvidia_check_runs_mpirun_across_every_gpu_of_every_host(tmp_path):
    manifest = check_of(job(name="gpu-train", node_group=P4D))
    node_zero, (peer_code, _, _) = run_check(manifest, tmp_path, benchmark_output=NCCL_OUTPUT)
    assert node_zero.returncode == 0 and peer_code == 0, node_zero.stdout + node_zero.stderr
    result = result_from_log(node_zero.stdout)
    assert result.benchmark == "nccl" and result.passed and result.transport["how"] == "log"
    argv = (tmp_path / "mpirun.argv").read_text().split()
    name = manifest["metadata"]["name"]
    assert argv[argv.index("--host") + 1] == f"{name}-node-0.{name}:8,{name}-node-1.{name}:8"
    assert argv[argv.index("--host") + 2 :] == FabricCheckChart.nccl_tail()


def test_each_attempt_of_a_check_ends_by_its_pods_deadline_and_the_check_by_two_of_them():
    check = job().fabric_check
    assert check.deadline_seconds == fabric_check.POD_DEADLINE_SECONDS == 2 * 3600, "the default: 2 hours"
    assert check.bound_seconds == MAX_RETRY * 2 * 3600 == 4 * 3600
    assert fabric_check.MIN_POD_DEADLINE_SECONDS >= fabric_check.REPORT_WAIT_SECONDS, "no deadline before a verdict"
    own = FabricCheckChart(workload=job(fabric_check=False).workload, gated_job="my-job", deadline_seconds=3 * 3600)
    (manifest,) = own.manifests()
    assert task(manifest)["template"]["spec"]["activeDeadlineSeconds"] == 3 * 3600 and own.bound_seconds == 6 * 3600
    with pytest.raises(ConfigurationError, match="deadline_seconds=600: an integer from 6660 to 7776000"):
        FabricCheckChart(workload=job(fabric_check=False).workload, gated_job="my-job", deadline_seconds=600)


def test_a_watched_jobs_check_has_no_progress_watch():
    """The check runs a benchmark, not training steps: the job's progress variables are neither set nor forwarded."""
    chart = job(progress=ProgressWatch())
    names = {entry["name"] for entry in container(check_of(chart))["env"]}
    assert PROGRESS_FILE_ENV not in names and PROGRESS_FILE_ENV not in chart.fabric_check.forwarded_variables()
    assert "livenessProbe" not in container(check_of(chart))
    assert PROGRESS_FILE_ENV in {entry["name"] for entry in chart.workload.environment()}


def test_the_rounds_given_to_suspect_nodes_reach_the_release_only_when_not_the_default():
    default = check_of(job())["metadata"]["annotations"]
    assert SUSPECT_ROUNDS_ANNOTATION not in default, "the release's default: 2, no annotation, the same name"
    one = check_of(job(fabric_suspect_rounds=0))["metadata"]["annotations"]
    assert one[SUSPECT_ROUNDS_ANNOTATION] == "0"
    with pytest.raises(ConfigurationError, match="fabric_suspect_rounds=6: an integer from 0 to 5"):
        job(fabric_suspect_rounds=6)
    with pytest.raises(ConfigurationError, match="suspect_rounds=-1: an integer from 0 to 5"):
        FabricCheckChart(workload=job(fabric_check=False).workload, suspect_rounds=-1)

"""``python -m trainium_eks fabric``: the table and the chart of a saved log, and of the cluster through kubectl (a fake
kubectl on PATH), and one line saying what to do when kubectl is missing or cannot reach the cluster."""

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

import trainium_eks.__main__ as cli
from tests.support.fabric_logs import NCCL_HEALTHY, NCCL_SOCKET, NCCOM_HEALTHY, NCCOM_SLOW, verdict
from tests.support.fake_kubectl import fake_kubectl
from trainium_eks.commands import fabric
from trainium_eks.core.conventions import FABRIC_CHECK_LABEL, FABRIC_RESULT_MARKER
from trainium_eks.manifests.jobs.fabric_program import PairRun, render, result_line

PNG = b"\x89PNG\r\n\x1a\n"


def log_of(benchmark_output: str, benchmark="nccom", floor=200.0, link=800.0) -> str:
    """What node 0's pod prints: the benchmark's output, the program's table, the result line."""
    result = verdict(benchmark_output, benchmark=benchmark, floor=floor, link=link)
    return f"{benchmark_output}{render(result)}\n{result_line(result, FABRIC_RESULT_MARKER)}\n"


def test_a_healthy_log_prints_the_table_and_writes_the_chart(tmp_path, capsys):
    log = tmp_path / "train-1.log"
    log.write_text(log_of(NCCOM_HEALTHY))
    chart = tmp_path / "out" / "fabric.png"
    assert fabric.main(["--stack", "TrainiumEks", "--log", str(log), "--chart", str(chart)]) == 0
    out = capsys.readouterr().out
    assert f"train-1 (from {log}) (nccom all-reduce): PASS" in out
    assert "2 GiB       58.24       465.9       58.2        ok" in out
    assert "floor 200 Gbps (25.00 GB/s), link 800 Gbps" in out
    assert f"chart: {chart}" in out
    assert chart.read_bytes().startswith(PNG)


def test_a_failing_log_says_why_and_exits_1(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "train-2.log"
    log.write_text(log_of(NCCOM_SLOW))
    assert fabric.main(["--stack", "TrainiumEks", "--log", str(log)]) == 1
    out = capsys.readouterr().out
    assert "(nccom all-reduce): BELOW-FLOOR" in out
    assert "below-floor: bus bandwidth 86.1 Gbps (11 % of the 800 Gbps link) at 2 GiB < floor 200 Gbps" in out
    assert (tmp_path / "docs" / "fabric-train-2.png").read_bytes().startswith(PNG)


def test_a_log_over_sockets_says_not_efa(tmp_path, capsys):
    log = tmp_path / "gpu.log"
    log.write_text(log_of(NCCL_SOCKET, benchmark="nccl", floor=100, link=400))
    assert fabric.main(["--stack", "ComposerTraining", "--log", str(log), "--chart", str(tmp_path / "c.png")]) == 1
    assert "not-efa: the output says the transport is not EFA: NCCL network Socket" in capsys.readouterr().out


def test_a_log_without_a_result_and_a_missing_log(tmp_path, capsys):
    log = tmp_path / "early.log"
    log.write_text("fabric check: 8 EFA devices; running nccom-test ...\n")
    assert fabric.main(["--stack", "TrainiumEks", "--log", str(log)]) == 1
    assert "early: no result" in capsys.readouterr().out
    assert fabric.main(["--stack", "TrainiumEks", "--log", str(tmp_path / "none.log")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_without_kubectl_one_line_says_what_to_do(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert cli.main(["fabric", "--stack", "TrainiumEks"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("error: kubectl is not installed (or not on PATH): install it, then point kubectl at the")
    assert "cluster of stack TrainiumEks" in err and "UpdateKubeconfigCommand" in err


def fabric_kubectl(tmp_path: Path, pods, logs, fail: str = "") -> Path:
    """A kubectl on PATH that answers current-context, get pods (``pods``) and logs (``logs``: pod -> text), or fails
    with ``fail`` on stderr."""
    data = tmp_path / "kubectl-data"
    data.mkdir()
    (data / "pods.json").write_text(json.dumps({"items": pods}))
    for pod, text in logs.items():
        (data / f"{pod}.log").write_text(text)
    (data / "calls").write_text("")
    return fake_kubectl(
        tmp_path,
        f"""
        if {fail!r}:
            sys.stderr.write({fail!r} + "\\n")
            sys.exit(1)
        if args[:2] == ["config", "current-context"]:
            print("arn:aws:eks:us-west-2:111122223333:cluster/trainium-eks")
        elif "get" in args:
            print((data / "pods.json").read_text())
        elif "logs" in args:
            log = data / (args[args.index("logs") + 1] + ".log")
            if not log.exists():
                sys.stderr.write("Error from server (BadRequest): container is waiting to start\\n")
                sys.exit(1)
            sys.stdout.write(log.read_text())
        """,
    )


def pod(name, job, created, index=None, phase="Succeeded"):
    labels = {FABRIC_CHECK_LABEL: job}
    if index is not None:
        labels["batch.kubernetes.io/job-completion-index"] = str(index)
    return {"metadata": {"name": name, "labels": labels, "creationTimestamp": created}, "status": {"phase": phase}}


def test_the_cluster_results_come_from_the_newest_node_0_pod_of_each_check(tmp_path, capsys, monkeypatch):
    pods = [
        pod("fabric-train-1-0-old", "train-1", "2026-12-01T10:00:00Z", index=0),
        pod("fabric-train-1-0-new", "train-1", "2026-12-01T11:00:00Z", index=0),
        pod("fabric-train-1-1-new", "train-1", "2026-12-01T11:00:00Z", index=1),
        pod("fabric-gpu-1-0", "gpu-1", "2026-12-01T09:00:00Z"),
        pod("fabric-late-0", "late-1", "2026-12-01T12:00:00Z", phase="Pending"),
    ]
    logs = {
        "fabric-train-1-0-old": log_of(NCCOM_SLOW),
        "fabric-train-1-0-new": log_of(NCCOM_HEALTHY),
        "fabric-train-1-1-new": "not node 0\n",
        "fabric-gpu-1-0": log_of(NCCL_HEALTHY, benchmark="nccl", floor=100, link=400),
    }
    bin_dir = fabric_kubectl(tmp_path, pods, logs)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin:/bin")
    monkeypatch.chdir(tmp_path)
    assert fabric.main(["--stack", "TrainiumEks"]) == 1  # late-1 has no result yet
    out = capsys.readouterr().out
    assert "kubectl context arn:aws:eks:us-west-2:111122223333:cluster/trainium-eks" in out
    assert "train-1 (from pod/fabric-train-1-0-new) (nccom all-reduce): PASS" in out
    assert "gpu-1 (from pod/fabric-gpu-1-0) (nccl all-reduce): PASS" in out
    late = "late-1: no result: pod/fabric-late-0 (Pending): kubectl logs failed (Error from server (BadRequest): "
    assert late + "container is waiting to start)\n" in out
    calls = (tmp_path / "kubectl-data" / "calls").read_text().splitlines()
    assert f"-n training get pods -l {FABRIC_CHECK_LABEL} -o json" in calls
    assert not any("fabric-train-1-1-new" in call or "fabric-train-1-0-old" in call for call in calls)
    assert (tmp_path / "docs" / "fabric-train-1.png").read_bytes().startswith(PNG)
    assert (tmp_path / "docs" / "fabric-gpu-1.png").read_bytes().startswith(PNG)


def test_several_checks_with_one_chart_path_get_one_chart_each(tmp_path, capsys, monkeypatch):
    pods = [pod("a-0", "a", "2026-12-01T10:00:00Z"), pod("b-0", "b", "2026-12-01T10:00:00Z")]
    bin_dir = fabric_kubectl(tmp_path, pods, {"a-0": log_of(NCCOM_HEALTHY), "b-0": log_of(NCCOM_HEALTHY)})
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin:/bin")
    assert fabric.main(["--stack", "TrainiumEks", "--chart", str(tmp_path / "fabric.png"), "--namespace", "ml"]) == 0
    assert (tmp_path / "fabric-a.png").exists() and (tmp_path / "fabric-b.png").exists()
    assert "namespace ml" in capsys.readouterr().out


def test_a_cluster_kubectl_cannot_reach_is_one_line(tmp_path, capsys, monkeypatch):
    fail = "Unable to connect to the server: dial tcp: lookup ABC.gr7.us-west-2.eks.amazonaws.com: no such host"
    bin_dir = fabric_kubectl(tmp_path, [], {}, fail=fail)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin:/bin")
    assert fabric.main(["--stack", "TrainiumEks"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"error: kubectl config current-context failed ({fail}): point kubectl at the cluster of stack TrainiumEks"
    )
    assert err.count("\n") == 1


def test_no_fabric_check_in_the_cluster_is_one_line(tmp_path, capsys, monkeypatch):
    bin_dir = fabric_kubectl(tmp_path, [], {})
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin:/bin")
    assert fabric.main(["--stack", "TrainiumEks"]) == 2
    assert "no fabric check pods (label trainium-eks/fabric-check-for) in namespace training" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [[], ["--log", "x.log"]])
def test_the_stack_is_required(argv):
    with pytest.raises(SystemExit) as stopped:
        fabric.main(argv)
    assert stopped.value.code == 2


def test_the_command_is_registered():
    assert cli.COMMANDS["fabric"] == "trainium_eks.commands.fabric"
    assert "\n  fabric " in cli.USAGE


def test_a_check_that_named_suspects_shows_its_pairs_and_the_node_each_suspect_ran_on(tmp_path, capsys, monkeypatch):
    slow = verdict(NCCOM_SLOW)
    pairs = (PairRun((0, 1), "pass", 380.0), PairRun((2, 3), "below-floor", 86.1), PairRun((2, 0), "below-floor", 86.0))
    result = replace(slow, verdict="suspect-nodes", hosts=("10.0.0.1", "10.0.0.2", "10.0.0.3"), pairs=pairs)
    result = replace(result, suspects=(2,))
    log = f"{render(result)}\n{result_line(result, FABRIC_RESULT_MARKER)}\n"
    pods = [pod(f"train-fabric-abc-node-{i}", "train-1", "2026-12-01T10:00:00Z", index=i) for i in range(4)]
    for index, item in enumerate(pods):
        item["metadata"]["labels"]["volcano.sh/task-index"] = str(index)
        item["spec"] = {"nodeName": f"ip-10-0-1-{index}.ec2.internal"}
    bin_dir = fabric_kubectl(tmp_path, pods, {"train-fabric-abc-node-0": log})
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin:/bin")
    monkeypatch.chdir(tmp_path)
    assert fabric.main(["--stack", "TrainiumEks"]) == 1
    out = capsys.readouterr().out
    assert "    2 + 3       86.1 Gbps  BELOW-FLOOR\n" in out and "suspects: node 2 (10.0.0.3)" in out
    assert "  suspect node 2: pod/train-fabric-abc-node-2 on node ip-10-0-1-2.ec2.internal\n" in out
    named = replace(result, node_names=("n0", "n1", "named-by-node-0", "n3"))
    lines = fabric.suspect_lines(named, pods[0], [])
    assert lines == ["  suspect node 2: pod/train-fabric-abc-node-2 on node named-by-node-0"], "its pod is gone"

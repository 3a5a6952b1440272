"""``python -m trainium_eks status``: each job's state, restarts and last step, nodes removed and why, suspects, from a
fake kubectl on PATH that answers as a cluster does, and the stack and its node groups from real boto3 clients under
botocore's Stubber (fake credentials, no network)."""

import json
import os
import time

import boto3
import pytest

import trainium_eks.__main__ as cli
from tests.support.fake_kubectl import fake_kubectl
from tests.support.stubbed_session import StubbedSession
from tests.support.training_pods import training_pod
from trainium_eks.commands import node_events, status
from trainium_eks.core.conventions import FABRIC_SUSPECT_TAINT, HELD_JOB_LABEL
from trainium_eks.manifests.jobs.job_release_program import RECREATED_ANNOTATION
from trainium_eks.manifests.jobs.progress_watch import PROGRESS_FILE

CONTEXT = "arn:aws:eks:us-west-2:111122223333:cluster/trainium-eks"
SERVER = "https://ABCDEF.gr7.us-west-2.eks.amazonaws.com"
NOW = 1_800_000_000
NOT_SERVED = 'error: the server doesn\'t have a resource type "pytorchjobs"'


def event(kind, name, reason, message, namespace="training", when="2026-12-06T10:00:00Z", count=1):
    return {
        "metadata": {"namespace": namespace},
        "involvedObject": {"kind": kind, "name": name},
        "reason": reason,
        "message": message,
        "lastTimestamp": when,
        "count": count,
    }


def karpenter_line(message, **fields):
    entry = {"level": "INFO", "time": "2026-12-06T09:58:00.000Z", "logger": "controller", "message": message}
    return f"[pod/karpenter-7d9c/controller] {json.dumps({**entry, **fields})}"


VOLCANO_JOB = {
    "metadata": {
        "name": "bert-train",
        "labels": {HELD_JOB_LABEL: "true"},
        "annotations": {RECREATED_ANNOTATION: "2"},
    },
    "status": {"state": {"phase": "Running"}, "retryCount": 1},
}
TRAINJOB = {
    "metadata": {"name": "cifar"},
    "status": {"conditions": [{"type": "Complete", "status": "True"}]},
}
TRAINJOB_JOBSET = {
    "metadata": {"name": "cifar", "ownerReferences": [{"kind": "TrainJob", "name": "cifar"}]},
    "status": {"restarts": 2, "conditions": [{"type": "Completed", "status": "True"}]},
}
OWN_JOBSET = {
    "metadata": {"name": "mine"},
    "status": {"restarts": 3, "conditions": [{"type": "Failed", "status": "True", "reason": "ReachedMaxRestarts"}]},
}
STAGING = {
    "metadata": {"name": "stage-data"},
    "status": {"failed": 1, "succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]},
}
JOBSET_CHILD = {"metadata": {"name": "cifar-node-0", "ownerReferences": [{"kind": "JobSet", "name": "cifar"}]}}

PODS = [
    training_pod("bert-train-worker-1", {"volcano.sh/job-name": "bert-train", "volcano.sh/task-index": "1"}),
    training_pod("bert-train-worker-0", {"volcano.sh/job-name": "bert-train", "volcano.sh/task-index": "0"}),
    training_pod("cifar-node-0-0", {"jobset.sigs.k8s.io/jobset-name": "cifar"}, phase="Succeeded"),
    training_pod("stage-data-x", {"batch.kubernetes.io/job-name": "stage-data"}, phase="Succeeded", progress=False),
]
EVENTS = [
    event("Job", "bert-train-release", "CapacityQueued", "waiting for 2 nodes", when="2026-12-06T09:00:00Z"),
    event("Job", "bert-train-release", "CapacityHeld", "held 2 pods' nodes for vcjob/bert-train; creating it"),
    event(
        "Pod", "bert-train-worker-1", "Unhealthy", "Liveness probe failed: no training step after step 40 for 2000 s"
    ),
    event("Pod", "bert-train-worker-1", "Scheduled", "Successfully assigned"),
    event("Pod", "bert-train-worker-1", "Unhealthy", "Readiness probe failed: not ready"),
    event("Pod", "bert-train-worker-0", "Evict", "Pod is evicted, because of reclaim", when="2026-12-06T10:02:00Z"),
    event("Pod", "bert-train-worker-1", "Unhealthy", "elsewhere", namespace="other"),
    event("Node", "ip-10-0-1-5", "SpotInterrupted", "Spot interruption warning was triggered", namespace="default"),
    event("NodeClaim", "trn1-abcde", "DisruptionTerminating", "Disrupting NodeClaim: Empty", namespace="", count=2),
    event("Node", "ip-10-0-1-6", "NodeHasSufficientMemory", "fine", namespace="default"),
]
NODES = [
    {
        "metadata": {"name": "ip-10-0-1-7"},
        "spec": {
            "taints": [
                {"key": "aws.amazon.com/neuron", "effect": "NoSchedule"},
                {"key": FABRIC_SUSPECT_TAINT, "value": "bert-train-fabric", "effect": "NoSchedule"},
            ]
        },
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    },
    {
        "metadata": {"name": "ip-10-0-1-8"},
        "spec": {},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True"},
                {
                    "type": "AcceleratedHardwareReady",
                    "status": "False",
                    "reason": "NeuronHardwareError",
                    "message": "uncorrectable ECC",
                    "lastTransitionTime": "2026-12-06T09:50:00Z",
                },
            ]
        },
    },
]
NODECLAIMS = [
    {"metadata": {"name": "trn1-quiet"}, "status": {"nodeName": "ip-10-0-1-7"}},
    {
        "metadata": {
            "name": "trn1-sick",
            "deletionTimestamp": "2026-12-06T10:01:00Z",
            "annotations": {node_events.TERMINATION_DEADLINE_ANNOTATION: "2026-12-06T10:01:00Z"},
        },
        "status": {"nodeName": "ip-10-0-1-4"},
    },
    {
        "metadata": {"name": "trn1-abcde", "deletionTimestamp": "2026-12-06T10:00:00Z"},
        "status": {
            "nodeName": "ip-10-0-1-9",
            "conditions": [{"type": "DisruptionReason", "status": "True", "reason": "Empty", "message": "Empty"}],
        },
    },
]
KARPENTER_LOG = "\n".join(
    [
        karpenter_line("deleting unhealthy node", Node={"name": "ip-10-0-1-4"}, NodeClaim={"name": "trn1-zzzzz"}),
        karpenter_line("disrupting node(s)", command="Empty/Delete, terminating 1 nodes (0 pods) ip-10-0-1-9/trn1"),
        karpenter_line("found provisionable pod(s)", Pods="training/x"),
        "[pod/karpenter-7d9c/controller] not JSON at all",
    ]
)


def cluster(tmp_path, monkeypatch, *, listed=None, karpenter=True, logs_fail="", fail="", progress="40 1799999940"):
    """A kubectl on PATH that answers for a cluster holding ``listed`` (resource -> items; None: not served)."""
    listed = {
        "jobs.batch.volcano.sh": [VOLCANO_JOB],
        "trainjobs.trainer.kubeflow.org": [TRAINJOB],
        "jobsets.jobset.x-k8s.io": [TRAINJOB_JOBSET, OWN_JOBSET],
        "pytorchjobs.kubeflow.org": None,
        "jobs.batch": [STAGING, JOBSET_CHILD],
        "pods": PODS,
        "events": EVENTS,
        "nodes": NODES,
        "nodeclaims.karpenter.sh": NODECLAIMS if karpenter else None,
        **(listed or {}),
    }
    data = tmp_path / "kubectl-data"
    data.mkdir(exist_ok=True)
    (data / "listed.json").write_text(json.dumps(listed))
    bin_dir = fake_kubectl(
        tmp_path,
        f"""
        import json
        if {fail!r}:
            sys.stderr.write({fail!r} + "\\n")
            sys.exit(1)
        listed = json.loads((data / "listed.json").read_text())
        if args[:2] == ["config", "current-context"]:
            print({CONTEXT!r})
        elif args[:2] == ["config", "view"]:
            print({SERVER!r}, end="")
        elif "get" in args:
            items = listed[args[args.index("get") + 1]]
            if items is None:
                sys.stderr.write({NOT_SERVED!r} + "\\n")
                sys.exit(1)
            print(json.dumps({{"items": items}}))
        elif "exec" in args:
            target = ["bert-train-worker-0", "-c", "train", "--", "cat", {PROGRESS_FILE!r}]
            assert args[args.index("exec") + 1:] == target
            print({progress!r})
        elif "logs" in args:
            if {logs_fail!r}:
                sys.stderr.write({logs_fail!r} + "\\n")
                sys.exit(1)
            print({KARPENTER_LOG!r})
        """,
    )
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin:/bin")
    monkeypatch.setattr(time, "time", lambda: NOW)
    return data


def test_the_report_names_each_jobs_state_restarts_last_step_and_the_nodes_removed_and_why(
    tmp_path, monkeypatch, capsys
):
    data = cluster(tmp_path, monkeypatch)
    assert cli.main(["status", "--stack", "TrainiumEks", "--no-aws"]) == 1  # the JobSet "mine" failed
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert f"kubectl context {CONTEXT}" in lines
    header = lines.index("Jobs in namespace training:") + 1
    assert lines[header].split() == ["KIND", "NAME", "STATE", "RESTARTS", "PODS", "RUNNING", "LAST", "STEP"]
    rows = [line.split(None, 4) for line in lines[header + 1 :] if line.startswith("  ") and line[2] != " "]
    rows = [row for row in rows if row[0] in ("volcano", "trainjob", "jobset", "job")][:4]
    assert [row[:3] for row in rows] == [
        ["volcano", "bert-train", "Running"],
        ["trainjob", "cifar", "Complete"],
        ["jobset", "mine", "Failed"],
        ["job", "stage-data", "Complete"],
    ]
    bert = next(line for line in lines if line.startswith("  volcano"))
    assert "1 (+2 recreated)" in bert and "2/2" in bert
    assert "step 40, 60 s ago (pod/bert-train-worker-0)" in bert
    cifar = next(line for line in lines if line.startswith("  trainjob"))
    assert "  2  " in cifar and "0/1" in cifar  # the JobSet's restarts; the JobSet itself is not listed again
    assert "cifar-node-0" not in out.split("Nodes removed")[0].replace("cifar-node-0-0", "")
    notes = lines[lines.index(bert) + 1 : lines.index(bert) + 4]
    assert notes[0].strip().startswith("release: 2026-12-06T10:00:00Z  Job/bert-train-release  CapacityHeld: held 2")
    assert notes[1].strip() == (
        "2026-12-06T10:00:00Z  Pod/bert-train-worker-1  Unhealthy: Liveness probe failed: no training step after "
        "step 40 for 2000 s"
    )
    assert notes[2].strip() == (
        "2026-12-06T10:02:00Z  Pod/bert-train-worker-0  Evict: Pod is evicted, because of reclaim"
    )  # Volcano's scheduler's reclaim or preemption
    assert "Scheduled" not in out and "elsewhere" not in out and "Readiness" not in out
    assert "(not served by this cluster: pytorchjobs.kubeflow.org)" in out

    removed = out.split("Nodes removed or being removed, and why (events of the last 1 hour):\n")[1]
    assert removed.splitlines()[:2] == [
        "  2026-12-06T10:00:00Z  Node/ip-10-0-1-5  SpotInterrupted: Spot interruption warning was triggered",
        "  2026-12-06T10:00:00Z  NodeClaim/trn1-abcde  DisruptionTerminating (x2): Disrupting NodeClaim: Empty",
    ]
    assert "NodeHasSufficientMemory" not in out
    karpenter = out.split("Nodes Karpenter's log says it removed (a repair's reason is only there):\n")[1]
    assert karpenter.splitlines()[:2] == [
        "  2026-12-06T09:58:00.000Z  node ip-10-0-1-4, nodeclaim trn1-zzzzz  node repair: a condition unhealthy "
        "past the provider's toleration",
        "  2026-12-06T09:58:00.000Z  nodes  disruption: Empty/Delete, terminating 1 nodes (0 pods) ip-10-0-1-9/trn1",
    ]
    claims = out.split("NodeClaims being deleted now:\n")[1].splitlines()
    assert claims[:3] == [
        "  nodeclaim/trn1-sick (node ip-10-0-1-4) deleted at 2026-12-06T10:01:00Z: its pods' termination deadline "
        "2026-12-06T10:01:00Z (node repair, an instance EC2 reports unhealthy, or the pool's terminationGracePeriod)",
        "  nodeclaim/trn1-abcde (node ip-10-0-1-9) deleted at 2026-12-06T10:00:00Z: disrupted: Empty",
        "",
    ]
    unhealthy = out.split("Nodes with a condition Karpenter's node repair acts on:\n")[1].splitlines()
    assert unhealthy[0] == (
        "  ip-10-0-1-8  AcceleratedHardwareReady=False since 2026-12-06T09:50:00Z: NeuronHardwareError "
        "uncorrectable ECC"
    )
    suspects = out.split(f"Fabric suspects (nodes tainted {FABRIC_SUSPECT_TAINT}):\n")[1].splitlines()
    assert suspects == ["  ip-10-0-1-7  named by fabric check bert-train-fabric"]
    calls = (data / "calls").read_text().splitlines()
    assert (
        "-n kube-system logs -l app.kubernetes.io/name=karpenter --tail=-1 --since=24h --prefix --max-log-requests=10"
        in calls
    )
    assert sum("exec" in call for call in calls) == 1  # node 0 of the one job running with a progress file


def test_no_job_failed_exits_0_and_a_cluster_without_karpenter_has_no_karpenter_sections(tmp_path, monkeypatch, capsys):
    cluster(tmp_path, monkeypatch, listed={"jobsets.jobset.x-k8s.io": [TRAINJOB_JOBSET]}, karpenter=False)
    assert status.main(["--stack", "TrainiumEks", "--no-aws"]) == 0
    out = capsys.readouterr().out
    assert "Karpenter's log" not in out and "NodeClaims" not in out
    assert "Nodes with a condition Karpenter's node repair acts on:" in out  # the conditions are the nodes'


def test_a_progress_file_before_the_first_step_and_one_not_read(tmp_path, monkeypatch, capsys):
    cluster(tmp_path, monkeypatch, progress="start 1799999000")
    status.main(["--stack", "TrainiumEks", "--no-aws"])
    assert "no step yet, started 16 min ago (pod/bert-train-worker-0)" in capsys.readouterr().out


def test_karpenters_log_not_read_says_why_and_the_rest_is_shown(tmp_path, monkeypatch, capsys):
    cluster(tmp_path, monkeypatch, logs_fail="Error from server (Forbidden): pods is forbidden")
    status.main(["--stack", "TrainiumEks", "--no-aws", "--since", "90m"])
    out = capsys.readouterr().out
    assert "  (Karpenter's log not read: Error from server (Forbidden): pods is forbidden)" in out
    assert "Fabric suspects" in out


def test_a_saved_karpenter_log_is_read_instead_of_its_pods(tmp_path, monkeypatch, capsys):
    data = cluster(tmp_path, monkeypatch)
    saved = tmp_path / "karpenter.log"
    saved.write_text(karpenter_line("deleted node", Node={"name": "ip-10-0-1-3"}) + "\n")
    status.main(["--stack", "TrainiumEks", "--no-aws", "--karpenter-log", str(saved)])
    assert "  2026-12-06T09:58:00.000Z  node ip-10-0-1-3  node removed" in capsys.readouterr().out
    assert not any(" logs " in call for call in (data / "calls").read_text().splitlines())
    assert status.main(["--stack", "TrainiumEks", "--no-aws", "--karpenter-log", str(tmp_path / "none")]) == 2


def test_a_cluster_that_cannot_be_read_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    cluster(tmp_path, monkeypatch, fail="Unable to connect to the server: dial tcp: i/o timeout")
    assert cli.main(["status", "--stack", "TrainiumEks", "--no-aws"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "Unable to connect to the server" in err and "UpdateKubeconfigCommand" in err


def test_a_listing_that_fails_for_another_reason_than_a_missing_kind_is_exit_2(tmp_path, monkeypatch, capsys):
    data = cluster(tmp_path, monkeypatch)
    (data / "listed.json").write_text("{}")  # every get then fails with a KeyError's traceback on stderr
    assert status.main(["--stack", "TrainiumEks", "--no-aws"]) == 2
    assert capsys.readouterr().err.startswith("error: kubectl get jobs.batch.volcano.sh failed (KeyError:")


@pytest.mark.parametrize("since", ["0h", "24", "1d", "-5m", "2h30m"])
def test_since_is_a_duration_kubectl_takes(since, capsys):
    with pytest.raises(SystemExit):
        status.main(["--stack", "TrainiumEks", f"--since={since}"])
    assert "is not a duration such as 90m or 24h" in capsys.readouterr().err


class StubbedAws(StubbedSession):
    """A session whose CloudFormation and EKS clients answer for stack ``TrainiumEks``: its cluster's ``endpoint``,
    its node ``groups``; without ``outputs``, a stack with no ClusterName output."""

    def __init__(self, *, endpoint=SERVER, groups=(), outputs=True):
        super().__init__(("cloudformation", "eks"), "us-west-2")
        stack = {"StackName": "TrainiumEks", "StackStatus": "UPDATE_COMPLETE", "CreationTime": "2026-12-01T00:00:00Z"}
        if outputs:
            stack["Outputs"] = [{"OutputKey": "ClusterName", "OutputValue": "trainium-eks"}]
        self.stubs["cloudformation"].add_response("describe_stacks", {"Stacks": [stack]}, {"StackName": "TrainiumEks"})
        if outputs:
            self.stubs["eks"].add_response(
                "describe_cluster",
                {"cluster": {"name": "trainium-eks", "endpoint": endpoint}},
                {"name": "trainium-eks"},
            )
        if outputs:
            names = [group["nodegroupName"] for group in groups]
            self.stubs["eks"].add_response("list_nodegroups", {"nodegroups": names}, {"clusterName": "trainium-eks"})
            for group in groups:
                self.stubs["eks"].add_response(
                    "describe_nodegroup",
                    {"nodegroup": group},
                    {"clusterName": "trainium-eks", "nodegroupName": group["nodegroupName"]},
                )


def test_the_stack_and_its_node_groups_health_come_from_aws(tmp_path, monkeypatch, capsys):
    cluster(tmp_path, monkeypatch, karpenter=False)
    group = {
        "nodegroupName": "trn1-a",
        "status": "DEGRADED",
        "scalingConfig": {"desiredSize": 2},
        "health": {
            "issues": [{"code": "NodeCreationFailure", "message": "Instances failed to join", "resourceIds": ["i-1"]}]
        },
    }
    aws = StubbedAws(groups=[group])
    assert status.main(["--stack", "TrainiumEks"], session=aws) == 1
    aws.verify()
    out = capsys.readouterr().out
    assert out.startswith("Stack TrainiumEks: UPDATE_COMPLETE, cluster trainium-eks\n")
    assert "  trn1-a  DEGRADED  2 nodes wanted  NodeCreationFailure: Instances failed to join (i-1)" in out


def test_a_context_that_is_not_the_stacks_cluster_is_refused(tmp_path, monkeypatch, capsys):
    data = cluster(tmp_path, monkeypatch)
    aws = StubbedAws(endpoint="https://OTHER.gr7.us-west-2.eks.amazonaws.com")
    assert status.main(["--stack", "TrainiumEks"], session=aws) == 2
    aws.verify()
    err = capsys.readouterr().err
    assert err.startswith(f"error: kubectl's context {CONTEXT} is not the cluster of stack TrainiumEks ({SERVER}, not ")
    assert not any(" get " in f" {call} " for call in (data / "calls").read_text().splitlines())


def test_a_stack_without_a_cluster_output_reads_the_cluster_anyway(tmp_path, monkeypatch, capsys):
    cluster(tmp_path, monkeypatch)
    aws = StubbedAws(outputs=False)
    status.main(["--stack", "TrainiumEks"], session=aws)
    aws.verify()
    out = capsys.readouterr().out
    assert "cluster (no ClusterName output)" in out and "Jobs in namespace training:" in out


def test_aws_that_cannot_be_reached_is_one_line_and_the_cluster_is_still_read(tmp_path, monkeypatch, capsys):
    cluster(tmp_path, monkeypatch)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    session = boto3.Session(region_name="us-west-2")
    assert status.main(["--stack", "TrainiumEks"], session=session) == 1
    out = capsys.readouterr().out
    assert out.startswith("AWS not read (no AWS credentials: sign in")
    assert "Jobs in namespace training:" in out

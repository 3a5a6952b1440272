"""python -m trainium_eks release: a gang or a waiting job of the user's own manifest, wrapped in a release Job
(printed, or created through a fake kubectl on PATH after checking what the release needs)."""

import io
import json
import sys
from pathlib import Path
from typing import Sequence

import pytest
import yaml

from tests.support.fake_kubectl import fake_kubectl
from tests.support.manifests import held_job
from trainium_eks.commands import release
from trainium_eks.manifests.jobs.job_release import RELEASE_ANNOTATION, RELEASE_PROGRAM_CONFIG_MAP, WAIT_FOR_ANNOTATION
from trainium_eks.manifests.jobs.job_release_program import NODE_POOL_ANNOTATION

GANG = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "Job",
    "metadata": {"name": "my-gang", "annotations": {"trainium-eks/capacity-attempts": "5"}},
    "spec": {
        "minAvailable": 2,
        "tasks": [
            {
                "name": "node",
                "replicas": 2,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "c",
                                "image": "busybox",
                                "command": ["sh", "-c", "echo $(HOME) $$x"],
                                "resources": {"requests": {"cpu": "1"}},
                            }
                        ],
                    }
                },
            }
        ],
    },
}
TRAINJOB = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "metadata": {"name": "cifar"},
    "spec": {"trainer": {}},
}
NODE_PATCH = {
    "manager": "example.com/mine",
    "trainingRuntimeSpec": {
        "template": {"spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": {}}}}}]}}
    },
}
"""A runtime patch with the pod template of the TrainJob's ``node`` replicated job, where its release puts the label of
its peers policy."""
ONE_POD = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "eval"}, "spec": {"template": {"spec": {}}}}


def write(tmp_path, *documents) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump_all(list(documents)))
    return path


def test_the_release_creates_the_manifest_held_as_the_library_holds_its_own(tmp_path, capsys):
    assert (
        release.main(["-f", str(write(tmp_path, GANG)), "--node-pool", "trn-a1b2c3d4", "--wait-for", "job/data"]) == 0
    )
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["metadata"]["name"] == "my-gang-release" and printed["metadata"]["namespace"] == "training"
    assert printed["spec"]["template"]["spec"]["serviceAccountName"] == "job-release"
    assert printed["spec"]["template"]["spec"]["containers"][0]["command"][-1] == "job/data"
    held = held_job(printed)
    annotations = held["metadata"].pop("annotations")
    assert annotations[RELEASE_ANNOTATION] and annotations[WAIT_FOR_ANNOTATION] == "job/data"
    assert annotations[NODE_POOL_ANNOTATION] == "trn-a1b2c3d4" and annotations["trainium-eks/capacity-attempts"] == "5"
    expected = json.loads(json.dumps(GANG))
    expected["metadata"].pop("annotations")
    expected["metadata"]["namespace"] = "training"
    assert held == expected, "the manifest as written, $(HOME) and $$x reaching the program as they are"


@pytest.mark.parametrize(
    "documents, args, problem",
    [
        ((ONE_POD,), [], "needs no release, apply it with kubectl"),
        (({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}},), [], "apps/v1 Deployment"),
        (({**GANG, "metadata": {"name": "g" * 56}},), [], "at most 55 characters"),
        (({**GANG, "metadata": {"name": "g", "namespace": "other"}},), ["--namespace", "training"], "own namespace"),
        ((GANG,), ["--wait-for", "deployment/x"], "wait_for="),
        ((GANG,), ["--timeout-seconds", "60"], "timeout_seconds=60"),
        ((GANG, ONE_POD), [], "2 objects; give one job per release"),
        (({**GANG, "metadata": {"name": "my.gang"}},), [], "a DNS-1035 label"),
        ((GANG,), ["--wait-for", "vcjob/my-gang"], "it would wait for itself"),
        ((TRAINJOB,), [], "spec.trainer.numNodes=None"),
        (({**TRAINJOB, "spec": {"trainer": {"numNodes": 2}}},), [], 'spec.runtimePatches="no pod template of the'),
        (
            ({**TRAINJOB, "spec": {"trainer": {"numNodes": 2}, "runtimePatches": [NODE_PATCH]}},),
            [],
            "spec.trainer.resourcesPerNode='none'",
        ),
        (({**TRAINJOB, "metadata": {"name": "t" * 49}},), [], "at most 48 characters"),
    ],
)
def test_what_cannot_be_released_is_refused_saying_what_to_change(tmp_path, capsys, documents, args, problem):
    assert release.main(["-f", str(write(tmp_path, *documents)), *args]) == 2
    assert problem in capsys.readouterr().err


def release_kubectl(
    tmp_path: Path,
    *,
    missing: str = "",
    can_i: str = "yes",
    can_read: str = "yes",
    can_police: str = "yes",
    create_error: str = "",
    absent: Sequence[str] = (),
    unserved: str = "",
) -> Path:
    """A kubectl on PATH: auth can-i (``can_i`` for create: yes, no, or ``unserved``; ``can_read`` for get;
    ``can_police`` for create networkpolicies), get
    configmap and serviceaccount (``missing`` names one that is NotFound, or ``down``: the server refuses), get of
    objects with ``--ignore-not-found`` (prints those whose name is not in ``absent``; a resource starting with
    ``unserved`` is not served), create (``create_error`` on stderr, else records its input)."""
    return fake_kubectl(
        tmp_path,
        f"""
        if args[:2] == ["auth", "can-i"]:
            answer = {can_i!r} if args[2] == "create" else {can_read!r}
            answer = {can_police!r} if args[3] == "networkpolicies" else answer
            if answer == "unserved":
                sys.stderr.write("Warning: the server doesn't have a resource type 'jobs'\\n")
                print("no")
                sys.exit(1)
            print(answer)
            sys.exit(0 if answer == "yes" else 1)
        elif "--ignore-not-found" in args:
            names = args[args.index("get") + 1 : args.index("--ignore-not-found")]
            if {unserved!r} and any(name.startswith({unserved!r}) for name in names):
                sys.stderr.write('error: the server doesn\\'t have a resource type "' + {unserved!r} + '"\\n')
                sys.exit(1)
            for name in names:
                if name.split("/", 1)[1] not in {list(absent)!r}:
                    print(name)
        elif "get" in args:
            what = args[args.index("get") + 1]
            if {missing!r} == "down":
                sys.stderr.write("The connection to the server 127.0.0.1:6443 was refused\\n")
                sys.exit(1)
            if what == {missing!r}:
                sys.stderr.write('Error from server (NotFound): ' + what + 's "x" not found\\n')
                sys.exit(1)
            print(what + "/" + args[args.index("get") + 2])
        elif args[0] == "create":
            if {create_error!r}:
                sys.stderr.write({create_error!r} + "\\n")
                sys.exit(1)
            (data / "created.json").write_text(sys.stdin.read())
            print("job.batch/my-gang-release")
        """,
    )


def test_apply_checks_the_namespace_then_creates_the_release(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", f"{release_kubectl(tmp_path)}:/usr/bin:/bin")
    assert release.main(["-f", str(write(tmp_path, GANG)), "--apply"]) == 0
    out = capsys.readouterr().out
    assert "created job.batch/my-gang-release in training: it creates vcjob/my-gang" in out
    assert "kubectl -n training logs -f job/my-gang-release" in out
    calls = (tmp_path / "kubectl-data" / "calls").read_text().splitlines()
    assert calls == [
        f"-n training get configmap {RELEASE_PROGRAM_CONFIG_MAP} -o name",
        "-n training get serviceaccount job-release -o name",
        "auth can-i create jobs.batch.volcano.sh -n training --as=system:serviceaccount:training:job-release",
        "auth can-i create networkpolicies -n training --as=system:serviceaccount:training:job-release",
        "create -f - -o name",
    ]
    created = json.loads((tmp_path / "kubectl-data" / "created.json").read_text())
    assert created["metadata"]["name"] == "my-gang-release"


@pytest.mark.parametrize(
    "fake, problem",
    [
        ({"missing": "configmap"}, "has no release program of this library version"),
        ({"missing": "serviceaccount"}, "JobReleaseAccessChart(namespace='training')"),
        ({"missing": "down"}, "kubectl get configmap failed (The connection to the server 127.0.0.1:6443 was refused)"),
        ({"can_i": "no"}, "JobReleaseCreatorChart(namespace='training', kind='vcjob')"),
        ({"can_i": "unserved"}, "the cluster does not serve jobs.batch.volcano.sh: install its controller"),
        (
            {"can_police": "no"},
            "releases in training may not create NetworkPolicies (system:serviceaccount:training:job-release), so "
            "cannot give vcjob/my-gang its peers policy: apply JobReleaseAccessChart(namespace='training') and "
            "PeersPolicyAdmissionChart(namespace='training')",
        ),
        (
            {"create_error": 'Error from server (AlreadyExists): jobs.batch "my-gang-release" already exists'},
            "job/my-gang-release exists in training: delete it",
        ),
    ],
)
def test_apply_says_what_the_namespace_lacks_or_what_failed_and_creates_nothing(
    tmp_path, capsys, monkeypatch, fake, problem
):
    monkeypatch.setenv("PATH", f"{release_kubectl(tmp_path, **fake)}:/usr/bin:/bin")
    assert release.main(["-f", str(write(tmp_path, GANG)), "--apply"]) == 2
    assert problem in capsys.readouterr().err
    assert not (tmp_path / "kubectl-data" / "created.json").exists()


def test_a_manifest_exported_from_a_cluster_is_released_as_a_create_takes_it(tmp_path, capsys):
    exported = json.loads(json.dumps(GANG))
    exported["metadata"].update(
        resourceVersion="123",
        uid="u-1",
        creationTimestamp="2026-12-05T10:00:00Z",
        managedFields=[{"manager": "kubectl"}],
        ownerReferences=[{"kind": "Job", "name": "old"}],
        annotations={**GANG["metadata"]["annotations"], "kubectl.kubernetes.io/last-applied-configuration": "{}"},
    )
    exported["status"] = {"state": {"phase": "Running"}}
    batch = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "stage", "uid": "u-2"},
        "spec": {
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-2"}},
            "template": {
                "metadata": {"labels": {"batch.kubernetes.io/controller-uid": "u-2", "job-name": "stage", "app": "x"}}
            },
        },
    }
    assert release.main(["-f", str(write(tmp_path, exported))]) == 0
    held = held_job(yaml.safe_load(capsys.readouterr().out))
    assert set(held["metadata"]) == {"name", "namespace", "annotations"} and "status" not in held
    assert "kubectl.kubernetes.io/last-applied-configuration" not in held["metadata"]["annotations"]
    assert release.main(["-f", str(write(tmp_path, batch)), "--wait-for", "vcjob/my-gang"]) == 0
    held = held_job(yaml.safe_load(capsys.readouterr().out))
    assert "selector" not in held["spec"] and held["spec"]["template"]["metadata"]["labels"] == {"app": "x"}


def test_dates_stay_strings_and_json_and_standard_input_are_read(tmp_path, capsys, monkeypatch):
    dated = json.loads(json.dumps(GANG))
    dated["metadata"]["annotations"]["since"] = "2024-01-01"
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(dated).replace("'2024-01-01'", "2024-01-01"))
    assert "since: 2024-01-01\n" in path.read_text()
    assert release.main(["-f", str(path)]) == 0
    assert held_job(yaml.safe_load(capsys.readouterr().out))["metadata"]["annotations"]["since"] == "2024-01-01"
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(GANG, indent="\t")))
    assert release.main(["-f", "-"]) == 0
    assert held_job(yaml.safe_load(capsys.readouterr().out))["metadata"]["name"] == "my-gang"


def test_apply_checks_each_job_waited_for_and_the_node_pool(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", f"{release_kubectl(tmp_path, absent=['staging'])}:/usr/bin:/bin")
    args = ["--wait-for", "job/staging", "--wait-for", "vcjob/warmup", "--node-pool", "trainium", "--apply"]
    assert release.main(["-f", str(write(tmp_path, GANG)), *args]) == 0
    calls = (tmp_path / "kubectl-data" / "calls").read_text().splitlines()
    account = "--as=system:serviceaccount:training:job-release"
    assert calls[3:] == [
        f"auth can-i create networkpolicies -n training {account}",
        f"auth can-i get jobs.batch -n training {account}",
        f"auth can-i get jobs.batch.volcano.sh -n training {account}",
        "-n training get jobs.batch/staging jobs.batch/staging-release --ignore-not-found -o name",
        "-n training get jobs.batch.volcano.sh/warmup jobs.batch/warmup-release --ignore-not-found -o name",
        "get nodepools.karpenter.sh/trainium --ignore-not-found -o name",
        "create -f - -o name",
    ]


@pytest.mark.parametrize(
    "fake, args, problem",
    [
        (
            {"absent": ["staging", "staging-release"]},
            ["--wait-for", "job/staging"],
            "job/staging is not in training, and no release there creates it (job/staging-release): the release "
            "would wait for it for 1209600 s",
        ),
        ({"absent": ["trainium"]}, ["--node-pool", "trainium"], "the cluster has no NodePool trainium"),
        (
            {"can_read": "no"},
            ["--wait-for", "job/staging"],
            "releases in training may not read jobs.batch (system:serviceaccount:training:job-release), so cannot "
            "wait for job/staging: apply JobReleaseAccessChart(namespace='training')",
        ),
        (
            {"unserved": "nodepools"},
            ["--node-pool", "trainium"],
            "--node-pool trainium needs a kind the cluster does not serve (error: the server doesn't have a "
            'resource type "nodepools")',
        ),
    ],
)
def test_apply_refuses_a_wait_for_nothing_and_a_pool_that_is_not_there(
    tmp_path, capsys, monkeypatch, fake, args, problem
):
    monkeypatch.setenv("PATH", f"{release_kubectl(tmp_path, **fake)}:/usr/bin:/bin")
    assert release.main(["-f", str(write(tmp_path, GANG)), *args, "--apply"]) == 2
    assert problem in capsys.readouterr().err
    assert not (tmp_path / "kubectl-data" / "created.json").exists()

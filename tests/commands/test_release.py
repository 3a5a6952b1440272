"""python -m trainium_eks release: a gang or a waiting job of the user's own manifest, wrapped in a release Job
(printed, or created through a fake kubectl on PATH after checking what the release needs)."""

import json
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

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
                        "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", "echo $(HOME) $$x"]}],
                    }
                },
            }
        ],
    },
}
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
    ],
)
def test_what_cannot_be_released_is_refused_saying_what_to_change(tmp_path, capsys, documents, args, problem):
    assert release.main(["-f", str(write(tmp_path, *documents)), *args]) == 2
    assert problem in capsys.readouterr().err


def fake_kubectl(tmp_path: Path, *, configmap: bool = True, allowed: str = "yes") -> Path:
    """A kubectl on PATH that answers get configmap (found or not), auth can-i (``allowed``) and create (recording
    its input)."""
    data = tmp_path / "kubectl-data"
    data.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(
        f"#!{sys.executable}\n"
        + textwrap.dedent(
            f"""
            import sys, pathlib
            data = pathlib.Path({str(data)!r})
            args = sys.argv[1:]
            with open(data / "calls", "a") as calls:
                calls.write(" ".join(args) + "\\n")
            if "configmap" in args:
                if not {configmap!r}:
                    sys.stderr.write('Error from server (NotFound): configmaps "x" not found\\n')
                    sys.exit(1)
                print("configmap/" + args[args.index("configmap") + 1])
            elif args[:2] == ["auth", "can-i"]:
                print({allowed!r})
                sys.exit(0 if {allowed!r} == "yes" else 1)
            elif args[0] == "create":
                (data / "created.json").write_text(sys.stdin.read())
                print("job.batch/my-gang-release")
            """
        )
    )
    kubectl.chmod(0o755)
    return bin_dir


def test_apply_checks_the_namespace_then_creates_the_release(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", f"{fake_kubectl(tmp_path)}:/usr/bin:/bin")
    assert release.main(["-f", str(write(tmp_path, GANG)), "--apply"]) == 0
    out = capsys.readouterr().out
    assert "created job.batch/my-gang-release in training: it creates vcjob/my-gang" in out
    assert "kubectl -n training logs -f job/my-gang-release" in out
    calls = (tmp_path / "kubectl-data" / "calls").read_text().splitlines()
    assert calls == [
        f"-n training get configmap {RELEASE_PROGRAM_CONFIG_MAP} -o name",
        "auth can-i create jobs.batch.volcano.sh -n training --as=system:serviceaccount:training:job-release",
        "create -f - -o name",
    ]
    created = json.loads((tmp_path / "kubectl-data" / "created.json").read_text())
    assert created["metadata"]["name"] == "my-gang-release"


@pytest.mark.parametrize(
    "configmap, allowed, problem",
    [
        (False, "yes", "has no release program of this library version"),
        (True, "no", "JobReleaseCreatorChart(namespace='training', kind='vcjob')"),
    ],
)
def test_apply_says_what_the_namespace_lacks_and_creates_nothing(
    tmp_path, capsys, monkeypatch, configmap, allowed, problem
):
    monkeypatch.setenv("PATH", f"{fake_kubectl(tmp_path, configmap=configmap, allowed=allowed)}:/usr/bin:/bin")
    assert release.main(["-f", str(write(tmp_path, GANG)), "--apply"]) == 2
    assert problem in capsys.readouterr().err
    assert not (tmp_path / "kubectl-data" / "created.json").exists()

"""The job release program, run as the release Job runs it (``python3 -c <source> ...``) against a fake API server;
and its capacity step, read from the held gang's manifest: which pods a gang will run, and the capacity Jobs that
hold their nodes (the step itself runs on the real control plane: tests/e2e); the watch of a created gang; and a fabric
check's suspect nodes, tainted and replaced, or named."""

import json
import subprocess
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from trainium_eks.core import conventions
from trainium_eks.core.conventions import Taint
from trainium_eks.manifests.chart import PART_OF, locked_down_container, unprivileged_pod
from trainium_eks.manifests.jobs import job_release_program as program
from trainium_eks.manifests.jobs.job_release import RELEASE_PROGRAM_SOURCE
from trainium_eks.manifests.jobs.job_release_program import (
    CAPACITY_COMPONENT,
    CAPACITY_LABEL,
    DEADLINE_MARGIN_SECONDS,
    DEFAULT_SUSPECT_ROUNDS,
    FABRIC_CHECK_LABEL,
    NEVER,
    NODE_POOL_ANNOTATION,
    SUSPECT_EXIT,
    SUSPECT_ROUNDS_ANNOTATION,
    SUSPECT_TAINT,
    capacity_job,
    capacity_settings,
    decide,
    gang_pods,
    give_up_time,
    owned_manifest,
    pod_requests,
    ref_of,
    state,
    suspect_rounds,
    suspect_verdict,
)
from trainium_eks.manifests.jobs.topology import NodeGroupTopology
from trainium_eks.manifests.jobs.train_job import TrainJobChart
from trainium_eks.manifests.jobs.volcano_job import VolcanoJobChart

NS = "/namespaces/training"
RELEASE = f"/apis/batch/v1{NS}/jobs/train-1-release-abc123"
VCJOB = f"/apis/batch.volcano.sh/v1alpha1{NS}/jobs/compile-1"
JOB = f"/apis/batch/v1{NS}/jobs/data-1"
HELD = f"/apis/batch.volcano.sh/v1alpha1{NS}/jobs/train-1"
HELD_MANIFEST = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "Job",
    "metadata": {"name": "train-1", "namespace": "training"},
    "spec": {"queue": "training"},
}


class FakeApi:
    """Answers GETs from ``objects`` (path -> JSON, an int HTTP status, or a callable of the request count) and
    records POSTs, creating the object (201) unless ``post_status`` says otherwise."""

    def __init__(self):
        self.objects = {RELEASE: {"metadata": {"uid": "release-uid"}}}
        self.requests = []
        self.posts = []
        self.post_status = 201
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, answer):
                if isinstance(answer, int):
                    self.send_response(answer)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.wfile.write(
                        json.dumps({"kind": "Status", "message": f"status {answer} from the fake"}).encode()
                    )
                    return
                self.send_response(200 if self.command == "GET" else 201)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(json.dumps(answer).encode())

            def do_GET(self):  # noqa: N802 - http.server's naming
                api.requests.append(self.path)
                answer = api.objects.get(self.path, 404)
                if callable(answer):
                    answer = answer(api.requests.count(self.path))
                self._answer(answer)

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                api.posts.append((self.path, body))
                if api.post_status != 201:
                    self._answer(api.post_status)
                    return
                api.objects[self.path + "/" + body["metadata"]["name"]] = body
                self._answer(body)

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def release(self, *waits, held=HELD_MANIFEST, timeout=20):
        env = {
            "JOB_RELEASE_API_URL": self.url,
            "JOB_RELEASE_POLL_SECONDS": "0",
            "PATH": "/usr/bin:/bin",
            "HELD_JOB": held if isinstance(held, str) else json.dumps(held),
        }
        args = ["training", "train-1-release-abc123", *waits]
        return subprocess.run(
            [sys.executable, "-c", RELEASE_PROGRAM_SOURCE, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


@pytest.fixture
def api():
    fake = FakeApi()
    yield fake
    fake.server.shutdown()


def vcjob(phase):
    return {"status": {"state": {"phase": phase}}}


def batch_job(condition):
    return {"status": {"conditions": [{"type": condition, "status": "True"}]}}


def test_creates_the_held_job_owned_by_the_release_once_every_job_has_completed(api):
    api.objects[VCJOB] = lambda n: 404 if n == 1 else vcjob("Running") if n < 4 else vcjob("Completed")
    api.objects[JOB] = batch_job("Complete")
    result = api.release("vcjob/compile-1", "job/data-1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "waiting for vcjob/compile-1 in namespace training before creating vcjob/train-1" in result.stdout
    assert "created vcjob/train-1 after vcjob/compile-1, job/data-1 completed" in result.stdout
    assert api.requests.count(VCJOB) == 4
    [(path, body)] = api.posts
    assert path == f"/apis/batch.volcano.sh/v1alpha1{NS}/jobs"
    assert body["spec"] == HELD_MANIFEST["spec"]
    assert body["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train-1-release-abc123", "uid": "release-uid"}
    ]


def test_a_job_that_waits_for_nothing_is_created_at_once(api):
    result = api.release()
    assert result.returncode == 0 and "created vcjob/train-1" in result.stdout
    assert len(api.posts) == 1


@pytest.mark.parametrize(
    "path,answer,ref",
    [
        (VCJOB, vcjob("Failed"), "vcjob/compile-1"),
        (VCJOB, vcjob("Terminated"), "vcjob/compile-1"),
        (JOB, batch_job("Failed"), "job/data-1"),
    ],
)
def test_a_failed_job_ends_the_release_for_good(api, path, answer, ref):
    api.objects[path] = answer
    result = api.release(ref)
    assert result.returncode == NEVER
    assert f"{ref} failed (or its release did); vcjob/train-1 is not created" in result.stdout
    assert not api.posts


def test_a_job_whose_release_failed_will_never_exist_so_the_failure_travels_down_the_chain(api):
    """staging -> precompile -> training: staging failed, so precompile's release failed and precompile never
    exists; training's release ends at once instead of waiting out its deadline."""
    api.objects[f"/apis/batch/v1{NS}/jobs/compile-1-release"] = batch_job("Failed")
    result = api.release("vcjob/compile-1")
    assert result.returncode == NEVER, result.stdout
    assert "vcjob/compile-1 failed (or its release did)" in result.stdout and not api.posts


def test_a_job_not_created_yet_whose_release_still_runs_is_waited_for(api):
    api.objects[f"/apis/batch/v1{NS}/jobs/compile-1-release"] = {"status": {"active": 1}}
    api.objects[VCJOB] = lambda n: 404 if n < 3 else vcjob("Completed")
    result = api.release("vcjob/compile-1")
    assert result.returncode == 0, result.stdout
    assert api.requests.count(f"/apis/batch/v1{NS}/jobs/compile-1-release") == 2


@pytest.mark.parametrize("status", [429, 408, 409])
def test_throttling_and_conflicts_are_retried_not_taken_as_refusals(api, status):
    """429: API priority and fairness throttles the client (Kubernetes docs, flow-control); 409 on create: an earlier
    attempt's POST reached the server (the next loop finds the job it created)."""
    api.objects[JOB] = lambda n: status if n < 3 else batch_job("Complete")
    result = api.release("job/data-1")
    assert result.returncode == 0, result.stdout
    assert f"HTTP {status}" in result.stdout and "API not reachable, retrying" in result.stdout


def test_a_restarting_job_is_waited_for_not_taken_as_failed(api):
    """A Volcano Job restarting after a failed attempt (RestartJob) passes Restarting, Pending and Running; an
    Aborted one may be resumed (volcano v1.15.1 pkg/controllers/job/state/aborted.go)."""
    phases = ["Running", "Restarting", "Pending", "Aborted", "Running", "Completed"]
    api.objects[VCJOB] = lambda n: vcjob(phases[min(n, len(phases)) - 1])
    result = api.release("vcjob/compile-1")
    assert result.returncode == 0, result.stdout
    assert api.requests.count(VCJOB) == len(phases)


def test_a_release_run_again_finds_its_own_job_and_succeeds(api):
    api.objects[HELD] = {**HELD_MANIFEST, **owned_manifest(HELD_MANIFEST, "train-1-release-abc123", "release-uid")}
    result = api.release("vcjob/compile-1")
    assert result.returncode == 0 and "exists (created by this release)" in result.stdout
    assert not api.posts and VCJOB not in api.requests


def test_an_object_of_the_held_name_it_did_not_create_is_left_alone(api):
    api.objects[HELD] = HELD_MANIFEST
    result = api.release()
    assert result.returncode == NEVER and "was not created by job/train-1-release-abc123" in result.stdout
    assert not api.posts


def test_a_webhook_denial_is_reported_with_the_servers_message(api):
    api.post_status = 400
    result = api.release()
    assert result.returncode == NEVER
    assert "refused a request for vcjob/train-1: HTTP 400: status 400 from the fake" in result.stdout


def test_a_missing_permission_ends_the_release_with_the_reason(api):
    api.objects[JOB] = 403
    result = api.release("job/data-1")
    assert result.returncode == NEVER and "HTTP 403" in result.stdout


def test_keeps_waiting_through_server_errors(api):
    api.objects[JOB] = lambda n: 503 if n < 3 else batch_job("Complete")
    result = api.release("job/data-1")
    assert result.returncode == 0, result.stdout
    assert "API not reachable, retrying" in result.stdout


def test_gives_up_before_its_jobs_deadline_naming_the_job_it_waited_for(api):
    """The deadline is the release Job's activeDeadlineSeconds (mutable), counted from its start, less ten minutes."""
    api.objects[RELEASE] = {
        "metadata": {"uid": "release-uid"},
        "spec": {"activeDeadlineSeconds": DEADLINE_MARGIN_SECONDS + 60},
        "status": {"startTime": "2026-01-01T00:00:00Z"},
    }
    api.objects[VCJOB] = vcjob("Running")
    result = api.release("vcjob/compile-1")
    assert result.returncode == NEVER
    assert "gave up at the release Job's deadline, waiting for vcjob/compile-1" in result.stdout and not api.posts


def test_give_up_time_counts_from_the_jobs_start():
    job = {"spec": {"activeDeadlineSeconds": 3600}, "status": {"startTime": "2026-12-01T00:00:00Z"}}
    assert give_up_time(job) == 1796083200 + 3600 - DEADLINE_MARGIN_SECONDS
    assert give_up_time({"spec": {}}) is None


@pytest.mark.parametrize(
    "args,held",
    [
        (["deployment/x"], HELD_MANIFEST),
        (["job-x"], HELD_MANIFEST),
        (["job/a vcjob"], HELD_MANIFEST),
        ([], "not json"),
        ([], {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}}),
    ],
)
def test_usage_errors(api, args, held):
    result = api.release(*args, held=held)
    assert result.returncode == 2 and result.stderr.startswith("usage:")


def test_a_call_without_the_release_jobs_name_is_a_usage_error(api):
    env = {"JOB_RELEASE_API_URL": api.url, "HELD_JOB": json.dumps(HELD_MANIFEST), "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-c", RELEASE_PROGRAM_SOURCE, "training"], env=env, capture_output=True, text=True
    )
    assert result.returncode == 2 and result.stderr.startswith("usage:")


def test_several_jobs_in_one_argument_are_all_waited_for(api):
    api.objects[JOB] = batch_job("Complete")
    api.objects[f"/apis/trainer.kubeflow.org/v1alpha1{NS}/trainjobs/t-1"] = batch_job("Complete")
    result = api.release("job/data-1 trainjob/t-1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert JOB in api.requests and f"/apis/trainer.kubeflow.org/v1alpha1{NS}/trainjobs/t-1" in api.requests
    assert "after job/data-1, trainjob/t-1 completed" in result.stdout


def test_states_and_decisions():
    assert state("pytorchjob", batch_job("Succeeded")) == "done"
    assert state("trainjob", batch_job("Failed")) == "failed"
    assert state("job", None) == "waiting"
    assert decide({}) == ("create", "")
    assert decide({"job/a": "done", "vcjob/b": "waiting"}) == ("wait", "vcjob/b")
    assert decide({"job/a": "failed", "vcjob/b": "waiting"}) == ("fail", "job/a")
    assert ref_of(HELD_MANIFEST) == "vcjob/train-1"


# --- the capacity step --------------------------------------------------------------------------------------

NEURON = (Taint("aws.amazon.com/neuron", "true", "NoSchedule"),)
NEURON_POD = {
    "nodeSelector": {"node.kubernetes.io/instance-type": "trn1.32xlarge"},
    "tolerations": [{"key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule"}],
    "schedulerName": "volcano",
    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "fsx-claim"}}],
    "initContainers": [{"name": "setup", "resources": {"requests": {"cpu": "4"}}}],
    "containers": [
        {
            "name": "train",
            "resources": {
                "requests": {"cpu": "100", "memory": "400Gi"},
                "limits": {"aws.amazon.com/neuron": "16", "vpc.amazonaws.com/efa": "8"},
            },
        },
        {"name": "sidecar", "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}},
    ],
}


def gang(*tasks):
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "train-1", "namespace": "training"},
        "spec": {"tasks": [{"replicas": n, "template": {"spec": pod}} for n, pod in tasks]},
    }


def test_a_gang_is_the_pods_its_manifest_will_run_and_a_single_pod_or_a_batch_job_is_none():
    assert gang_pods(gang((2, NEURON_POD))) == [(2, NEURON_POD)]
    assert gang_pods(gang((1, NEURON_POD), (3, {"containers": []}))) == [(1, NEURON_POD), (3, {"containers": []})]
    assert gang_pods(gang((1, NEURON_POD))) == []
    assert gang_pods(gang((0, NEURON_POD), (1, NEURON_POD))) == []
    batch = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "d"}, "spec": {"parallelism": 4}}
    assert gang_pods(batch) == []
    pytorch = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "p"},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": NEURON_POD}}}},
    }
    assert gang_pods(pytorch) == []
    pytorch["spec"]["pytorchReplicaSpecs"]["Worker"] = {"replicas": 3, "template": {"spec": NEURON_POD}}
    assert gang_pods(pytorch) == [(1, NEURON_POD), (3, NEURON_POD)]


def test_a_trainjobs_gang_is_its_nodes_with_the_placement_of_its_runtime_patch_and_its_resources_per_node():
    group = NodeGroupTopology("m5.xlarge", 6, 6, 0, (), frozenset({"efs-sc-claim"}))
    manifest = TrainJobChart(name="ddp", image="i:1", node_group=group, script="/t.py").manifest
    ((count, pod),) = gang_pods(manifest)
    assert count == 6 == manifest["spec"]["trainer"]["numNodes"]
    assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": "m5.xlarge"}
    assert pod["containers"] == [{"name": "node", "resources": manifest["spec"]["trainer"]["resourcesPerNode"]}]


def test_a_held_jobs_pod_templates_of_each_kind_carry_its_peers_label_and_nothing_else_changes():
    group = NodeGroupTopology("m5.xlarge", 6, 6, 0, (), frozenset({"efs-sc-claim"}))
    trainjob = TrainJobChart(name="ddp", image="i:1", node_group=group, script="/t.py").manifest
    pytorch = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "p", "namespace": "training"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": {"metadata": {"labels": {"a": "b"}}, "spec": NEURON_POD}},
                "Worker": {"replicas": 3, "template": {"spec": NEURON_POD}},
            }
        },
    }
    two_tasks = gang((1, NEURON_POD), (3, {"containers": []}))
    batch = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "b", "namespace": "training"},
        "spec": {"parallelism": 4, "template": {"spec": {"containers": []}}},
    }
    for held, templates in ((trainjob, 1), (pytorch, 2), (two_tasks, 2), (batch, 1)):
        labelled = program.peer_labelled(held)
        found = program.job_pod_templates(labelled)
        name = held["metadata"]["name"]
        assert len(found) == templates, held["kind"]
        assert all(t["metadata"]["labels"][program.INGRESS_POLICY_LABEL] == f"{name}-peers" for t in found)
        assert gang_pods(labelled) == gang_pods(held), "the capacity step sees the same pods"
        for before, after in zip(program.job_pod_templates(held), found, strict=True):
            after["metadata"]["labels"].pop(program.INGRESS_POLICY_LABEL)
            assert after["spec"] == before["spec"], "only the label is added"
            assert after["metadata"]["labels"] == (before.get("metadata") or {}).get("labels", {}), "(to a copy)"
    assert program.peer_labelled(pytorch)["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["metadata"] == {
        "labels": {"a": "b", program.INGRESS_POLICY_LABEL: "p-peers"}
    }
    assert program.INGRESS_POLICY_LABEL == conventions.INGRESS_POLICY_LABEL
    assert program.NO_INGRESS_POLICY == conventions.NO_INGRESS_POLICY


def test_pods_that_admit_nothing_keep_their_label_and_any_other_value_is_replaced():
    staging = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "data-1", "namespace": "training"},
        "spec": {"template": {"metadata": {"labels": {program.INGRESS_POLICY_LABEL: "namespace-baseline"}}}},
    }
    assert program.peer_templates(staging) == [] and program.peer_labelled(staging) == staging
    posing = gang((2, NEURON_POD))
    posing["spec"]["tasks"][0]["template"]["metadata"] = {"labels": {program.INGRESS_POLICY_LABEL: "other-1-peers"}}
    (template,) = program.job_pod_templates(program.peer_labelled(posing))
    assert template["metadata"]["labels"][program.INGRESS_POLICY_LABEL] == "train-1-peers", "not another job's peer"


def test_a_trainjob_whose_pods_a_release_cannot_label_is_told_apart():
    group = NodeGroupTopology("m5.xlarge", 6, 6, 0, (), frozenset({"efs-sc-claim"}))
    chart = TrainJobChart(name="ddp", image="i:1", node_group=group, script="/t.py").manifest
    assert not program.unlabelled_pods(chart)
    bare = {**chart, "spec": {key: value for key, value in chart["spec"].items() if key != "runtimePatches"}}
    assert program.unlabelled_pods(bare)
    one = {**bare, "spec": {**bare["spec"], "trainer": {**bare["spec"]["trainer"], "numNodes": 1}}}
    assert not program.unlabelled_pods(one), "one pod: nothing to admit"
    assert not program.unlabelled_pods(gang((2, NEURON_POD))), "the others' templates are in their manifest"


def test_a_gangs_peers_policy_admits_its_own_pods_only_and_goes_with_its_release():
    policy = program.peers_policy(gang((2, NEURON_POD)), "training", "train-1-release", "release-uid")
    pods = {"matchLabels": {conventions.INGRESS_POLICY_LABEL: "train-1-peers"}}
    assert policy["metadata"]["name"] == "train-1-peers" and policy["metadata"]["namespace"] == "training"
    assert policy["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train-1-release", "uid": "release-uid"}
    ]
    assert policy["spec"] == {
        "podSelector": pods,
        "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": pods}]}],
    }


class PolicyApi:
    """Answers a peers policy's create (``create``: the answer, or an exception to raise) and its read."""

    def __init__(self, create, existing=None):
        self.create, self.existing, self.calls = create, existing, []

    def __call__(self, url, body=None, method=None):
        self.calls.append((url, body is not None))
        if body is None:
            return self.existing
        if isinstance(self.create, Exception):
            raise self.create
        return body


@pytest.mark.parametrize(
    "create, existing, ours",
    [
        (None, None, True),
        (program.Conflict("409"), {"metadata": {"ownerReferences": [{"uid": "release-uid"}]}}, True),
        (program.Conflict("409"), {"metadata": {"ownerReferences": [{"uid": "someone-else"}]}}, False),
        (program.Conflict("409"), {"metadata": {}}, False),
    ],
)
def test_a_peers_policy_is_created_once_and_one_the_release_did_not_create_is_not_taken(
    monkeypatch, create, existing, ours
):
    api = PolicyApi(create, existing)
    monkeypatch.setattr(program, "request", api)
    policy = program.peers_policy(gang((2, NEURON_POD)), "training", "train-1-release", "release-uid")
    assert program.ensure_peers_policy("https://api", "training", policy, "release-uid") is ours
    collection = f"https://api/apis/networking.k8s.io/v1{NS}/networkpolicies"
    assert api.calls[0] == (collection, True)
    assert api.calls[1:] == ([] if create is None else [(collection + "/train-1-peers", False)])


def test_a_peers_policy_deleted_as_it_was_read_is_tried_again(monkeypatch):
    monkeypatch.setattr(program, "request", PolicyApi(program.Conflict("409"), None))
    policy = program.peers_policy(gang((2, NEURON_POD)), "training", "train-1-release", "release-uid")
    with pytest.raises(ConnectionError, match="train-1-peers was deleted"):
        program.ensure_peers_policy("https://api", "training", policy, "release-uid")


def test_a_pod_requests_its_containers_sum_or_its_largest_init_container_and_a_limit_stands_for_a_request():
    assert pod_requests(NEURON_POD) == {
        "cpu": 100.5,
        "memory": 400 * 2**30 + 256 * 2**20,
        "aws.amazon.com/neuron": 16,
        "vpc.amazonaws.com/efa": 8,
    }
    assert pod_requests({"initContainers": [{"resources": {"requests": {"cpu": "8"}}}], "containers": []}) == {"cpu": 8}


def test_a_capacity_job_holds_the_nodes_of_the_gangs_pods_with_their_placement_on_the_default_scheduler():
    job = capacity_job(gang((2, NEURON_POD)), 0, 2, NEURON_POD, "python:3.12", "train-1-release", "uid-1", 1800)
    assert job["metadata"]["name"] == "train-1-capacity-0"
    assert job["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train-1-release", "uid": "uid-1"}
    ]
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert labels["app.kubernetes.io/name"] == CAPACITY_COMPONENT and labels[CAPACITY_LABEL] == "train-1"
    assert (job["spec"]["parallelism"], job["spec"]["completions"], job["spec"]["activeDeadlineSeconds"]) == (
        2,
        2,
        1860,
    )
    pod = job["spec"]["template"]["spec"]
    assert "schedulerName" not in pod and "initContainers" not in pod
    assert pod["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "fsx-claim"}}]
    assert pod["nodeSelector"] == NEURON_POD["nodeSelector"] and pod["tolerations"] == NEURON_POD["tolerations"]
    assert pod["terminationGracePeriodSeconds"] == 0 and pod["automountServiceAccountToken"] is False
    # The program runs on the standard library alone: the library's own security facts, written again, agree.
    assert pod["securityContext"] == unprivileged_pod() and pod["containers"][0]["securityContext"] == (
        locked_down_container()
    )
    assert labels["app.kubernetes.io/part-of"] == PART_OF
    (container,) = pod["containers"]
    assert container["command"] == ["sleep", "1800"] and container["image"] == "python:3.12"
    assert container["resources"] == {
        "requests": {
            "cpu": "100500m",
            "memory": str(400 * 2**30 + 256 * 2**20),
            "aws.amazon.com/neuron": "16",
            "vpc.amazonaws.com/efa": "8",
        },
        "limits": {"aws.amazon.com/neuron": "16", "vpc.amazonaws.com/efa": "8"},
    }
    long_name = gang((2, NEURON_POD))
    long_name["metadata"]["name"] = "x" * 63
    assert len(capacity_job(long_name, 1, 2, NEURON_POD, "i", "r", "u", 60)["metadata"]["name"]) <= 63


def test_a_capacity_pod_declares_the_gangs_claims_and_mounts_none():
    """Placed where the gang's claims can be used (a bound volume's node affinity, the storage class's topology), with
    no other volume of the gang's and nothing mounted: the kubelet sets up only mounted volumes; a read-only claim
    stays read-only (the attach-detach controller attaches it all the same)."""
    pod = {
        **NEURON_POD,
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "fsx-data", "readOnly": True}},
            {"name": "shm", "emptyDir": {"medium": "Memory"}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"storageClassName": "gp3"}}}},
            {"name": "config", "configMap": {"name": "fabric-program"}},
        ],
    }
    spec = capacity_job(gang((2, pod)), 0, 2, pod, "i", "r", "u", 60)["spec"]["template"]["spec"]
    assert spec["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "fsx-data", "readOnly": True}}]
    assert "volumeMounts" not in spec["containers"][0]


def test_capacity_settings_come_from_the_held_jobs_annotations_with_defaults():
    defaults = {"stall": 300, "restarts": 3, "queue": 86400}
    assert capacity_settings(gang()) == {"timeout": 1800, "attempts": 3, "pause": 600, **defaults}
    held = gang()
    held["metadata"]["annotations"] = {
        "trainium-eks/capacity-timeout-seconds": "300",
        "trainium-eks/capacity-attempts": "1",
        "trainium-eks/capacity-pause-seconds": "not a number",
    }
    assert capacity_settings(held) == {"timeout": 300, "attempts": 1, "pause": 600, **defaults}


def test_the_volcano_job_charts_gang_is_one_pod_per_node_of_its_group_with_the_devices():
    group = NodeGroupTopology("trn1.32xlarge", 2, 2, 8, NEURON, frozenset({"fsx-claim"}))
    manifest = VolcanoJobChart(name="train", image="i:1", node_group=group, script="/t.py").manifest
    ((count, pod),) = gang_pods(manifest)
    assert count == 2
    assert pod_requests(pod)["aws.amazon.com/neuron"] == 16 and pod_requests(pod)["vpc.amazonaws.com/efa"] == 8


class CapacityApi:
    """The requests a Capacity makes, answered from lists of capacity Jobs and pods; ``fail_creates`` POSTs of Jobs
    answer as a conflict would (ConnectionError)."""

    def __init__(self, fail_creates=0):
        self.jobs, self.pods, self.events, self.deleted = [], [], [], []
        self.fail_creates = fail_creates
        self.scheduling = []

    def __call__(self, url, body=None, method=None):
        if method == "DELETE":
            name = url.rsplit("/", 1)[1]
            self.deleted.append(name)
            self.jobs = [j for j in self.jobs if j["metadata"]["name"] != name]
            self.pods = []
            return {}
        if body is None and "/events?" in url:
            assert "fieldSelector=reason%3DFailedScheduling%2CinvolvedObject.kind%3DPod" in url, url
            return {"items": self.scheduling}
        if body is None:
            return {"items": self.pods if "/pods?" in url else self.jobs}
        if body.get("kind") == "Event":
            self.events.append(body["reason"])
            return body
        if self.fail_creates:
            self.fail_creates -= 1
            raise ConnectionError("HTTP 409")
        self.jobs.append({"metadata": {"name": body["metadata"]["name"], "creationTimestamp": None}})
        return body

    def bind(self, count, pending=0):
        self.pods = [
            {"metadata": {"name": f"p{i}"}, "spec": {"nodeName": f"n{i}"}, "status": {"phase": "Running"}}
            for i in range(count)
        ] + [{"metadata": {"name": f"w{i}"}, "spec": {}, "status": {"phase": "Pending"}} for i in range(pending)]

    def failed_scheduling(self, pod, message):
        """A FailedScheduling event of ``pod``, as Karpenter (or kube-scheduler) records it."""
        self.scheduling.append({"involvedObject": {"kind": "Pod", "name": pod}, "message": message})


def capacity(monkeypatch, fail_creates=0, **annotations):
    api = CapacityApi(fail_creates)
    monkeypatch.setattr(program, "request", api)
    held = gang((1, NEURON_POD), (1, {"containers": []}))
    held["metadata"]["annotations"] = {f"trainium-eks/capacity-{k}-seconds": str(v) for k, v in annotations.items()}
    held["metadata"]["annotations"]["trainium-eks/capacity-attempts"] = "2"
    shapes = gang_pods(held)
    return api, program.Capacity("https://api", "training", "train-1-release", "uid", "image", held, shapes)


def test_capacity_gives_the_nodes_to_the_gang_once_every_pod_is_bound_and_its_jobs_are_gone(monkeypatch):
    api, held = capacity(monkeypatch)
    assert held.step(0)[0] == "wait" and len(api.jobs) == 2
    api.bind(1)
    assert held.step(10) == ("wait", "1 of 2 nodes of train-1 held (attempt 1)")
    api.bind(2)
    assert held.step(20)[0] == "wait" and api.deleted == ["train-1-capacity-0", "train-1-capacity-1"]
    assert held.step(25) == ("ready", "every node of train-1 held") and api.events == ["CapacityHeld"]


def test_capacity_gives_every_node_back_at_the_timeout_pauses_and_fails_after_the_last_attempt(monkeypatch):
    api, held = capacity(monkeypatch, timeout=60, pause=30)
    held.step(0)
    api.bind(1)
    action, message = held.step(61)
    assert action == "wait" and "held 1 of 2 nodes" in message and api.jobs == [] and api.events == ["CapacityNotHeld"]
    assert held.step(80)[1].startswith("pausing before attempt 2")
    assert held.step(91)[1].startswith("attempt 2") and len(api.jobs) == 2
    action, message = held.step(152)
    assert action == "fail" and "attempt 2 of 2" in message and api.jobs == []


def karpenter_says(*pools):
    """Karpenter's FailedScheduling message for a pod that no NodePool takes: ``pools`` at their limit, and a pool
    the pod does not fit (scheduler.go ``addToNewNodeClaim``: every pool's error, each wrapped with its name)."""
    limits = [f"node limits have been exhausted for nodepool (NodePool={pool})" for pool in pools]
    other = 'incompatible with nodepool "cpu", daemonset overhead={"cpu":"180m"}, did not tolerate taint (NodePool=cpu)'
    return "Failed to schedule pod, " + "; ".join([other, *limits])


def queued_capacity(monkeypatch, **annotations):
    api, held = capacity(monkeypatch, timeout=60, pause=30, **annotations)
    held.node_pool = "trn1-a1b2c3d4"
    monkeypatch.setattr(program.random, "random", lambda: 0.0)
    return api, held


def test_a_pool_at_its_limit_has_the_gang_wait_holding_nothing_without_using_up_its_attempts(monkeypatch):
    """Another gang holds the pool's nodes: Karpenter will launch nothing until it ends, so the attempt gives back
    what it holds at once and waits a pause; the attempts (2 here) are not used up while the limit is the cause."""
    api, held = queued_capacity(monkeypatch)
    held.step(0)
    api.bind(1, pending=1)
    api.failed_scheduling("w0", "0/3 nodes are available: 3 Insufficient aws.amazon.com/neuron.")
    api.failed_scheduling("p9", karpenter_says("trn1-a1b2c3d4"))
    api.failed_scheduling("w0", karpenter_says("another-pool"))
    assert held.step(10)[1] == "1 of 2 nodes of train-1 held (attempt 1)", "kube-scheduler's, another pod, pool: no"
    for round_ in range(3):
        start = 20 + round_ * 40
        api.bind(1, pending=1)
        api.failed_scheduling("w0", karpenter_says("another-pool", "trn1-a1b2c3d4"))
        action, message = held.step(start)
        assert action == "wait" and "its node pool trn1-a1b2c3d4 is at its limit" in message, message
        assert "(NodePool=trn1-a1b2c3d4): other jobs hold its nodes" in message and "not counted" in message
        assert api.jobs == [] and api.events[-1] == "CapacityQueued" and held.attempt == 0
        assert held.step(start + 20)[1].startswith("pausing before attempt 1")
        api.scheduling.clear()
        assert held.step(start + 31)[1].startswith("attempt 1") and len(api.jobs) == 2
    assert "CapacityNotHeld" not in api.events


def test_a_gang_that_waited_for_its_pool_as_long_as_allowed_counts_its_attempts_again(monkeypatch):
    """queue=100: each round adds its time and its pause (10 + 30, 19 + 30, 9 + 30); past 100 s the limit is an
    attempt's failure like any other."""
    api, held = queued_capacity(monkeypatch, queue=100)
    api.failed_scheduling("w0", karpenter_says("trn1-a1b2c3d4"))
    for start, found in ((0, 10), (41, 60), (91, 100)):
        held.step(start)
        api.bind(0, pending=1)
        assert held.step(found)[0] == "wait" and api.events[-1] == "CapacityQueued"
    assert held.queued == 128
    held.step(131)
    assert held.step(140)[1] == "0 of 2 nodes of train-1 held (attempt 1)"
    action, message = held.step(192)
    assert action == "wait" and message.startswith("held 0 of 2 nodes") and api.events[-1] == "CapacityNotHeld"


def test_a_gang_without_its_pools_name_never_takes_a_limit_for_a_wait(monkeypatch):
    api, held = capacity(monkeypatch, timeout=60, pause=30)
    held.step(0)
    api.bind(1, pending=1)
    api.failed_scheduling("w0", karpenter_says("trn1-a1b2c3d4"))
    assert held.step(61)[1].startswith("held 1 of 2 nodes") and api.events == ["CapacityNotHeld"]


def test_a_release_that_fails_during_an_attempt_gives_every_node_back_first(monkeypatch):
    """At its deadline or on a refusal the release fails; its capacity Jobs would hold their nodes until their own
    deadline (an attempt's timeout) without it."""
    api, held = capacity(monkeypatch)
    held.step(0)
    api.bind(1)
    assert len(api.jobs) == 2
    held.give_back_all()
    assert api.jobs == [] and api.deleted == ["train-1-capacity-0", "train-1-capacity-1"]

    def refused(url, body=None, method=None):
        raise program.Refused("HTTP 403: forbidden")

    monkeypatch.setattr(program, "request", refused)
    held.give_back_all()  # best effort: the release fails anyway, with its own reason


def test_a_capacity_job_whose_create_failed_is_created_at_the_next_look_in_the_same_attempt(monkeypatch):
    api, held = capacity(monkeypatch, fail_creates=1)
    with pytest.raises(ConnectionError):
        held.step(0)
    held.step(20)
    assert held.attempt == 1 and sorted(j["metadata"]["name"] for j in api.jobs) == [
        "train-1-capacity-0",
        "train-1-capacity-1",
    ]


# --- the watch of a created gang --------------------------------------------------------------------------------


def gang_pod(name, node=None, reason=None, deleting=False):
    conditions = [{"type": "PodScheduled", "status": "False", "reason": reason}] if reason else []
    metadata = {"name": name, **({"deletionTimestamp": "2026-12-05T00:00:00Z"} if deleting else {})}
    return {"metadata": metadata, "spec": {"nodeName": node} if node else {}, "status": {"conditions": conditions}}


def test_a_pod_placed_but_not_started_is_one_volcano_marked_schedulable_and_left_unbound():
    pods = [
        gang_pod("placed", reason="Schedulable"),
        gang_pod("needs-a-node", reason="Unschedulable"),
        gang_pod("bound", node="n1", reason="Schedulable"),
        gang_pod("going", reason="Schedulable", deleting=True),
        gang_pod("new"),
    ]
    assert [pod["metadata"]["name"] for pod in program.placed_not_started(pods)] == ["placed"]


class WatchApi:
    """The requests a GangWatch makes: the gang's pods listed by their job label, DELETEs and events recorded."""

    def __init__(self):
        self.pods, self.urls, self.deletes, self.events = [], [], [], []

    def __call__(self, url, body=None, method=None):
        self.urls.append(url)
        if method == "DELETE":
            self.deletes.append((url, body))
            return {}
        if body is not None:
            self.events.append((body["reason"], body["type"], body["message"]))
            return body
        return {"items": self.pods}


def watch(monkeypatch, ref="vcjob/train-1", **annotations):
    api = WatchApi()
    monkeypatch.setattr(program, "request", api)
    held = gang((2, NEURON_POD))
    held["metadata"]["annotations"] = {f"trainium-eks/capacity-{k}": str(v) for k, v in annotations.items()}
    settings = capacity_settings(held)
    return api, program.GangWatch("https://api", "training", "train-1-release", "uid", ref, settings)


def test_a_gang_with_a_pod_placed_but_not_started_past_the_stall_time_is_deleted_to_hold_its_nodes_again(monkeypatch):
    api, gang_watch = watch(monkeypatch, **{"stall-seconds": 300})
    running = vcjob("Pending")
    api.pods = [gang_pod("train-1-node-0", reason="Schedulable"), gang_pod("train-1-node-1", reason="Unschedulable")]
    assert gang_watch.step(running, 1000) == (
        "watch",
        "1 of 2 pods of vcjob/train-1 placed but not started for 0 s",
    )
    assert "labelSelector=volcano.sh/job-name%3Dtrain-1" in api.urls[-1]
    assert gang_watch.step(running, 1299)[0] == "watch" and api.deletes == []
    action, message = gang_watch.step(running, 1300)
    assert action == "hold" and message.endswith("deleted it to hold all its nodes again (restart 1 of 3)")
    assert api.deletes == [
        (f"https://api/apis/batch.volcano.sh/v1alpha1{NS}/jobs/train-1", {"propagationPolicy": "Foreground"})
    ]
    assert [(reason, kind) for reason, kind, _ in api.events] == [("GangStalled", "Warning")]
    assert gang_watch.recreated == 1  # the annotation the gang created again carries


def test_the_count_goes_on_from_the_gang_taken_back_so_a_restarted_release_keeps_it(monkeypatch):
    api, gang_watch = watch(monkeypatch, **{"stall-seconds": 10})
    api.pods = [gang_pod("a", reason="Schedulable")]
    again = {**vcjob("Pending"), "metadata": {"annotations": {program.RECREATED_ANNOTATION: "2"}}}
    for now in (0, 10):
        action, _ = gang_watch.step(again, now)
    assert action == "hold" and gang_watch.recreated == 3


def test_the_stall_time_starts_again_when_no_pod_waits_placed(monkeypatch):
    api, gang_watch = watch(monkeypatch, **{"stall-seconds": 300})
    api.pods = [gang_pod("a", reason="Schedulable")]
    gang_watch.step(vcjob("Pending"), 0)
    api.pods = [gang_pod("a", reason="Unschedulable")]
    assert gang_watch.step(vcjob("Pending"), 200) == ("watch", "watching vcjob/train-1")
    api.pods = [gang_pod("a", reason="Schedulable")]
    assert gang_watch.step(vcjob("Pending"), 400)[0] == "watch" and api.deletes == []


def test_a_gang_that_stalls_once_more_than_its_restarts_allow_is_deleted_for_good(monkeypatch):
    api, gang_watch = watch(monkeypatch, **{"stall-seconds": 10, "restarts": 1})
    api.pods = [gang_pod("a", reason="Schedulable")]
    for now in (0, 10):
        action, _ = gang_watch.step(vcjob("Pending"), now)
    assert action == "hold"
    for now in (20, 30):
        action, message = gang_watch.step(vcjob("Pending"), now)
    assert action == "fail" and message.endswith("after 1 restarts; deleted it") and len(api.deletes) == 2
    assert [reason for reason, _, _ in api.events] == ["GangStalled", "GangNotRestarted"]


@pytest.mark.parametrize(
    "ref, job, label",
    [
        ("vcjob/t", vcjob("Completed"), None),
        ("trainjob/t", batch_job("Failed"), None),
        ("pytorchjob/t", {"status": {}}, "training.kubeflow.org/job-name%3Dt"),
        ("trainjob/t", {"status": {}}, "jobset.sigs.k8s.io/jobset-name%3Dt"),
    ],
)
def test_a_watch_ends_with_its_gang_and_finds_the_pods_of_each_kind_by_its_controllers_label(
    monkeypatch, ref, job, label
):
    api, gang_watch = watch(monkeypatch, ref=ref)
    action, message = gang_watch.step(job, 0)
    if label is None:
        assert action == "end" and message in (f"{ref} completed", f"{ref} failed") and api.urls == []
    else:
        assert action == "watch" and label in api.urls[0]


def test_a_gang_being_deleted_is_not_looked_at(monkeypatch):
    api, gang_watch = watch(monkeypatch)
    deleting = {"metadata": {"deletionTimestamp": "2026-12-05T00:00:00Z"}, "status": {}}
    assert gang_watch.step(deleting, 0) == ("deleting", "vcjob/train-1 is being deleted") and api.urls == []


def owned(job):
    return {**job, "metadata": {"ownerReferences": [{"uid": "release-uid"}]}}


def release_with_image(api):
    api.objects[RELEASE] = {
        "metadata": {"uid": "release-uid"},
        "spec": {"template": {"spec": {"containers": [{"image": "python:3.13-slim"}]}}},
    }
    api.objects[f"/api/v1{NS}/pods?labelSelector=volcano.sh/job-name%3Dtrain-1"] = {"items": []}


def test_a_peers_policy_the_release_did_not_create_ends_it_before_any_node_is_held(api):
    release_with_image(api)
    api.post_status = 409
    api.objects[f"/apis/networking.k8s.io/v1{NS}/networkpolicies/train-1-peers"] = {"metadata": {"name": "x"}}
    result = api.release(held=gang((2, NEURON_POD)))
    assert result.returncode == NEVER, result.stdout + result.stderr
    assert "networkpolicy/train-1-peers exists and was not created by job/train-1-release-abc123" in result.stdout
    assert [path for path, _ in api.posts] == [f"/apis/networking.k8s.io/v1{NS}/networkpolicies"], "no capacity Job"


def test_a_release_watches_the_gang_it_created_until_it_ends(api):
    release_with_image(api)
    api.objects[HELD] = lambda n: owned(vcjob("Running")) if n < 4 else owned(vcjob("Completed"))
    result = api.release(held=gang((2, NEURON_POD)))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("job release: watching vcjob/train-1\n") == 1  # each message once
    assert result.stdout.endswith("job release: vcjob/train-1 completed\n")
    [(path, policy)] = api.posts  # its peers policy, first of all; the gang exists (created by an earlier run)
    assert path == f"/apis/networking.k8s.io/v1{NS}/networkpolicies" and policy["metadata"]["name"] == "train-1-peers"


def test_a_watched_gang_deleted_by_someone_else_is_not_created_again_and_fails_what_waits_for_it(api):
    release_with_image(api)
    api.objects[HELD] = lambda n: owned(vcjob("Running")) if n < 3 else 404
    result = api.release(held=gang((2, NEURON_POD)))
    assert result.returncode == NEVER, result.stdout + result.stderr
    assert "vcjob/train-1 was deleted, not by this release; not creating it again" in result.stdout
    assert [path for path, _ in api.posts] == [f"/apis/networking.k8s.io/v1{NS}/networkpolicies"]


# --- a fabric check's suspect nodes -------------------------------------------------------------------------------
# A fabric check that fails naming suspect nodes: its release taints them and runs the check again on new nodes (a
# Karpenter NodePool, rounds left), or says which nodes remain suspect (a node group, no round left); any other failure
# of a check ends as before. The release program runs in-process against a fake API (its ``request`` replaced); the
# HTTP side of a node's patch runs against a fake server.

CHECK = "check-1"
CHECK_RELEASE = "check-1-release-abc123"
CHECK_PATH = f"/apis/batch.volcano.sh/v1alpha1/namespaces/training/jobs/{CHECK}"
NEURON_TAINT = {"key": "aws.amazon.com/neuron", "value": "true", "effect": "NoSchedule"}
SUSPECT = {"key": SUSPECT_TAINT, "value": CHECK, "effect": "NoSchedule"}
PAIRS = [
    {"nodes": [0, 1], "busbw_gbps": 380.1, "passed": True},
    {"nodes": [2, 0], "busbw_gbps": 90.2, "passed": False},
]


def test_the_programs_constants_are_the_librarys():
    assert FABRIC_CHECK_LABEL == conventions.FABRIC_CHECK_LABEL
    assert SUSPECT_TAINT == conventions.FABRIC_SUSPECT_TAINT == "trainium-eks/fabric-suspect"
    from trainium_eks.manifests.jobs.fabric_program import SUSPECT_NODES

    assert SUSPECT_EXIT == SUSPECT_NODES == 6 and DEFAULT_SUSPECT_ROUNDS == 2, "the program's exit, the release's read"
    assert SUSPECT_ROUNDS_ANNOTATION == "trainium-eks/fabric-suspect-rounds"


def verdict(*suspects, pairs=PAIRS):
    return {
        "verdict": "suspect-nodes",
        "reason": "pairs with node 2 are below the floor",
        "busbw_gbps": 120.5,
        "floor_gbps": 200.0,
        "suspects": list(suspects),
        "pairs": pairs,
    }


def check_pod(index, node, exit_code=None, message=None):
    """Pod ``index`` of the check on ``node``; node 0's ``fabric`` container ended with ``exit_code`` and
    ``message`` (a dict is written as JSON) when given."""
    pod = {"metadata": {"name": f"{CHECK}-node-{index}"}, "spec": {"nodeName": node}, "status": {}}
    if exit_code is not None:
        terminated = {"exitCode": exit_code, "reason": "Error"}
        if message is not None:
            terminated["message"] = message if isinstance(message, str) else json.dumps(message)
        pod["status"]["containerStatuses"] = [
            {"name": "sshd-sidecar", "state": {"running": {}}},
            {"name": "fabric", "state": {"terminated": terminated}},
        ]
    return pod


@pytest.mark.parametrize(
    "annotation, rounds",
    [(None, 2), ("0", 0), ("3", 3), ("5", 5), ("9", 5), ("-1", 0), ("two", 2), ("", 2), ("1.5", 2)],
)
def test_the_rounds_are_an_integer_kept_to_0_to_5_and_nonsense_is_the_default(annotation, rounds):
    annotations = {} if annotation is None else {SUSPECT_ROUNDS_ANNOTATION: annotation}
    assert suspect_rounds({"metadata": {"annotations": annotations}}) == rounds


@pytest.mark.parametrize(
    "pods, found",
    [
        ([check_pod(1, "n1"), check_pod(0, "n0", 6, verdict(1))], True),
        ([check_pod(0, "n0", 3, verdict(1))], False),  # below the floor, without pairs: another exit status
        ([check_pod(0, "n0", 6)], False),  # no message
        ([check_pod(0, "n0", 6, "not json {")], False),
        ([check_pod(0, "n0", 6, verdict())], False),  # no suspect named
        ([check_pod(0, "n0", 6, verdict("2"))], False),
        ([check_pod(0, "n0", 6, verdict(True))], False),
        ([check_pod(0, "n0", 6, [1])], False),
        ([check_pod(1, "n1", 6, verdict(1))], False),  # only node 0 says
        ([check_pod(0, "n0")], False),  # still running
        ([], False),
    ],
)
def test_a_verdict_is_node_0s_fabric_container_ended_with_6_and_a_message_naming_suspects(pods, found):
    assert (suspect_verdict(pods, CHECK) is not None) == found


class FakeCluster:
    """The API as a fabric check's release sees it, answering the program's ``request``: its release Job, the check
    (each created check runs one of ``runs``: a verdict, or None for a check that completes; a deleted check is seen
    being deleted once, then gone), the check's pods (pod i on node ``node-<run>-<i>``), capacity Jobs and their pods
    (bound at once), nodes (GET, PATCH; ``conflicts`` answers that many patches of a node with 409, as if someone
    changed it meanwhile), events."""

    def __init__(self, runs, pool="trn1-a1b2c3d4", rounds=None, nodes=4):
        self.runs = list(runs)
        self.pods_per_run = nodes
        self.held = {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {
                "name": CHECK,
                "namespace": "training",
                "labels": {FABRIC_CHECK_LABEL: "train-1"},
                "annotations": {
                    **({NODE_POOL_ANNOTATION: pool} if pool else {}),
                    **({SUSPECT_ROUNDS_ANNOTATION: rounds} if rounds is not None else {}),
                },
            },
            "spec": {
                "tasks": [
                    {
                        "name": "node",
                        "replicas": nodes,
                        "template": {"spec": {"containers": [{"name": "fabric", "resources": {}}]}},
                    }
                ]
            },
        }
        self.check = None
        self.looks = 0
        self.created = 0
        self.capacity = set()
        self.nodes = {}
        for run in range(len(self.runs)):
            for index in range(nodes):
                name = f"node-{run}-{index}"
                self.nodes[name] = {
                    "metadata": {"name": name, "resourceVersion": "7"},
                    "spec": {"taints": [NEURON_TAINT]},
                }
        self.conflicts = {}
        self.refused = set()
        self.log = []  # (method, path) in order
        self.patches = []  # (node, body, content type)
        self.events = []  # (reason, type, message)
        self.recreated = []  # each check created: its annotation trainium-eks/recreated-by-release (None: none)
        self.sleeps = 0
        self.policy = None  # the check's peers policy, once created

    def __call__(self, url, body=None, method=None, content_type="application/json"):
        method = method or ("GET" if body is None else "POST")
        parsed = urllib.parse.urlsplit(url)
        path, query = parsed.path, urllib.parse.unquote(parsed.query)
        self.log.append((method, path + (f"?{query}" if query else "")))
        if path == f"/apis/batch/v1/namespaces/training/jobs/{CHECK_RELEASE}":
            return {
                "metadata": {"uid": "release-uid"},
                "spec": {"template": {"spec": {"containers": [{"image": "python:3.13-slim"}]}}},
            }
        if path == CHECK_PATH:
            return self._check(method)
        if path == "/apis/batch.volcano.sh/v1alpha1/namespaces/training/jobs" and method == "POST":
            assert self.check is None and self.created < len(self.runs), "created too often"
            assert self.policy is not None, "the gang's peers policy comes first"
            for task in body["spec"]["tasks"]:
                assert task["template"]["metadata"]["labels"][program.INGRESS_POLICY_LABEL] == f"{CHECK}-peers"
            assert not self.capacity, "the gang is created once its capacity Jobs are gone"
            self.check, self.looks = {**body, "run": self.created}, 0
            self.created += 1
            self.recreated.append((body["metadata"].get("annotations") or {}).get(program.RECREATED_ANNOTATION))
            return body
        if path == "/api/v1/namespaces/training/pods":
            if query.startswith("labelSelector=volcano.sh/job-name="):
                assert query == f"labelSelector=volcano.sh/job-name={CHECK}"
                return {"items": self._check_pods()}
            assert query == f"labelSelector={program.CAPACITY_LABEL}={CHECK}"
            count = self.pods_per_run if self.capacity else 0
            bound = (
                {"metadata": {"name": f"c{i}"}, "spec": {"nodeName": f"h{i}"}, "status": {"phase": "Running"}}
                for i in range(count)
            )
            return {"items": list(bound)}
        if path == "/apis/batch/v1/namespaces/training/jobs":
            if method == "POST":
                self.capacity.add(body["metadata"]["name"])
                return body
            return {"items": [{"metadata": {"name": name, "creationTimestamp": None}} for name in self.capacity]}
        if path.startswith("/apis/batch/v1/namespaces/training/jobs/") and method == "DELETE":
            self.capacity.discard(path.rsplit("/", 1)[1])
            return {}
        if path.startswith("/apis/networking.k8s.io/v1/namespaces/training/networkpolicies"):
            if method == "GET":
                return self.policy
            assert self.policy is None or self.policy["metadata"]["name"] == body["metadata"]["name"]
            if self.policy is not None:  # a check created again finds the policy of its first creation
                raise program.Conflict("networkpolicies: HTTP 409")
            self.policy = body
            return body
        if path == "/api/v1/namespaces/training/events":
            if method == "POST":
                self.events.append((body["reason"], body["type"], body["message"]))
                return body
            return {"items": []}
        if path.startswith("/api/v1/nodes/"):
            return self._node(path.rsplit("/", 1)[1], method, body, content_type)
        raise AssertionError(f"unexpected request {method} {url}")

    def _check(self, method):
        if method == "DELETE":
            assert self.check is not None
            self.check["metadata"]["deletionTimestamp"] = "2026-12-05T00:00:00Z"
            return {}
        if self.check is None:
            return None
        if self.check["metadata"].get("deletionTimestamp"):
            seen = self.check
            self.check = None  # seen once being deleted (as it ended), then gone
            phase = "Completed" if self.runs[seen["run"]] is None else "Terminated"
            return {**seen, "status": {"state": {"phase": phase}}}
        self.looks += 1
        outcome = self.runs[self.check["run"]]
        phase = "Running" if self.looks == 1 else "Completed" if outcome is None else "Terminated"
        return {**self.check, "status": {"state": {"phase": phase}}}

    def _check_pods(self):
        if self.check is None:
            return []
        run = self.check["run"]
        outcome = self.runs[run]
        ended = self.looks > 1 and outcome is not None
        pods = []
        for index in range(self.pods_per_run):
            if index == 0 and ended:
                exit_code, message = outcome if isinstance(outcome, tuple) else (SUSPECT_EXIT, outcome)
                pods.append(check_pod(0, f"node-{run}-0", exit_code, message))
            else:
                pods.append(check_pod(index, f"node-{run}-{index}"))
        return pods

    def _node(self, name, method, body, content_type):
        if name in self.refused:
            raise program.Refused(f'HTTP 403: nodes "{name}" is forbidden')
        node = self.nodes.get(name)
        if method == "GET":
            return None if node is None else json.loads(json.dumps(node))
        assert method == "PATCH"
        self.patches.append((name, body, content_type))
        if node is None:
            return None
        if self.conflicts.get(name):
            self.conflicts[name] -= 1
            node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)
            raise program.Conflict(f"nodes/{name}: HTTP 409")
        assert body["metadata"]["resourceVersion"] == node["metadata"]["resourceVersion"]
        node["spec"]["taints"] = body["spec"]["taints"]
        node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)
        return node

    def run(self, monkeypatch, capsys):
        """Run the release program until it returns: (exit status, what it printed)."""
        monkeypatch.setattr(program, "request", self)

        def sleep(seconds):
            self.sleeps += 1
            assert self.sleeps < 200, "the release never ended"

        monkeypatch.setattr(program.time, "sleep", sleep)
        status = program.main(["training", CHECK_RELEASE], {"HELD_JOB": json.dumps(self.held)})
        return status, capsys.readouterr().out

    def reasons(self):
        return [reason for reason, _, _ in self.events if reason.startswith("Fabric")]

    def suspect_events(self):
        return [(reason, kind, message) for reason, kind, message in self.events if reason.startswith("Fabric")]


def test_suspects_in_a_karpenter_pool_are_tainted_and_the_check_runs_again_on_nodes_held_anew(monkeypatch, capsys):
    cluster = FakeCluster([verdict(2), None])
    status, out = cluster.run(monkeypatch, capsys)
    assert status == 0, out
    assert cluster.patches == [
        (
            "node-0-2",
            {"metadata": {"resourceVersion": "7"}, "spec": {"taints": [NEURON_TAINT, SUSPECT]}},
            "application/merge-patch+json",
        )
    ]
    assert cluster.nodes["node-0-2"]["spec"]["taints"] == [NEURON_TAINT, SUSPECT]
    [(reason, kind, message)] = cluster.suspect_events()
    assert (reason, kind) == ("FabricSuspect", "Warning")
    assert "bus bandwidth 120.5 Gbps below the floor 200.0 Gbps" in message
    assert f"suspect nodes: node-0-2 (node 2, pod {CHECK}-node-2): tainted; round 1 of 2: " in message
    assert "deleted the check to run it again on new nodes" in message
    assert message.endswith("pairs (node indexes; floor 200.0 Gbps): 0-1 380.1 Gbps pass; 2-0 90.2 Gbps FAIL")
    assert cluster.created == 2 and out.endswith(f"job release: vcjob/{CHECK} completed\n")
    assert out.count(f"job release: {message}\n") == 1
    # the order: the check deleted (foreground) after the taint, then its nodes held again, then created anew
    log = [entry for entry in cluster.log if entry[0] != "GET"]
    first_delete = log.index(("DELETE", CHECK_PATH))
    assert log.index(("PATCH", "/api/v1/nodes/node-0-2")) < first_delete
    creates = [i for i, entry in enumerate(log) if entry == ("POST", CHECK_PATH.rsplit("/", 1)[0])]
    holds = [i for i, entry in enumerate(log) if entry == ("POST", "/apis/batch/v1/namespaces/training/jobs")]
    assert len(creates) == 2 and len(holds) == 2
    assert holds[0] < creates[0] < first_delete < holds[1] < creates[1]


def test_deleting_the_check_is_foreground(monkeypatch):
    cluster = FakeCluster([verdict(1)])
    cluster.check = {**cluster.held, "run": 0}
    cluster.looks = 2  # ended
    deletes = []
    original = cluster.__call__

    def recording(url, body=None, method=None, content_type="application/json"):
        if method == "DELETE":
            deletes.append((url, body))
        return original(url, body, method, content_type)

    monkeypatch.setattr(program, "request", recording)
    suspects = program.FabricSuspects("https://api", "training", CHECK_RELEASE, "release-uid", cluster.held)
    action, _ = suspects.step()
    assert action == "hold" and deletes == [(f"https://api{CHECK_PATH}", {"propagationPolicy": "Foreground"})]


def test_a_second_round_does_the_same_on_the_new_nodes(monkeypatch, capsys):
    cluster = FakeCluster([verdict(2), verdict(0, 3), None])
    status, out = cluster.run(monkeypatch, capsys)
    assert status == 0, out
    assert [node for node, _, _ in cluster.patches] == ["node-0-2", "node-1-0", "node-1-3"]
    assert cluster.reasons() == ["FabricSuspect", "FabricSuspect"]
    assert "round 2 of 2" in cluster.suspect_events()[1][2] and cluster.created == 3
    assert cluster.recreated == [None, "1", "2"]  # the count status shows, which Volcano's retryCount restarts


def test_a_manifest_created_again_says_how_often():
    held = {"metadata": {"name": "train-1", "annotations": {"a": "b", program.RECREATED_ANNOTATION: "7"}}}
    assert owned_manifest(held, "r", "u")["metadata"]["annotations"] == {"a": "b"}  # a stale count is not kept
    held["metadata"]["annotations"].pop(program.RECREATED_ANNOTATION)
    again = owned_manifest(held, "r", "u", 3)["metadata"]
    assert again["annotations"] == {"a": "b", program.RECREATED_ANNOTATION: "3"} and held["metadata"][
        "annotations"
    ] == {"a": "b"}


def test_once_the_rounds_are_used_up_nothing_is_tainted_and_the_check_fails_as_before(monkeypatch, capsys):
    cluster = FakeCluster([verdict(2), verdict(1), verdict(3)])
    status, out = cluster.run(monkeypatch, capsys)
    assert status == 0, out  # the check ended (failed): its guarded job's release fails on it
    assert [node for node, _, _ in cluster.patches] == ["node-0-2", "node-1-1"]
    assert cluster.reasons() == ["FabricSuspect", "FabricSuspect", "FabricSuspectsRemain"]
    _, kind, message = cluster.suspect_events()[-1]
    assert kind == "Warning" and "suspect nodes remain: node-2-3 (node 3, pod check-1-node-3)" in message
    assert "2 of 2 rounds of new nodes done (trainium-eks/fabric-suspect-rounds)" in message
    assert "kubectl delete node" in message and "2-0 90.2 Gbps FAIL" in message
    assert cluster.created == 3 and cluster.check is not None, "the last check is left, failed"
    assert out.splitlines()[-1].startswith(f"job release: vcjob/{CHECK} failed: fabric check {CHECK}")


def test_no_round_allowed_leaves_the_first_suspects(monkeypatch, capsys):
    cluster = FakeCluster([verdict(1)], rounds="0")
    status, _ = cluster.run(monkeypatch, capsys)
    assert status == 0 and cluster.patches == [] and cluster.reasons() == ["FabricSuspectsRemain"]


def test_a_node_group_gang_taints_nothing_and_says_how_to_replace_the_node_by_hand(monkeypatch, capsys):
    cluster = FakeCluster([verdict(2)], pool=None)
    status, out = cluster.run(monkeypatch, capsys)
    assert status == 0, out
    assert cluster.patches == [] and not [entry for entry in cluster.log if entry[1].startswith("/api/v1/nodes")]
    [(reason, kind, message)] = cluster.suspect_events()
    assert (reason, kind) == ("FabricSuspectsRemain", "Warning")
    assert "suspect nodes remain: node-0-2 (node 2, pod check-1-node-2)" in message
    assert "a node group would not replace a tainted node" in message
    assert "kubectl cordon and drain it" in message and "terminate its EC2 instance" in message
    assert cluster.created == 1 and ("DELETE", CHECK_PATH) not in cluster.log


def test_a_taint_already_there_is_not_added_twice(monkeypatch, capsys):
    cluster = FakeCluster([verdict(1, 2), None])
    cluster.nodes["node-0-1"]["spec"]["taints"].append({"key": SUSPECT_TAINT, "value": "other", "effect": "NoSchedule"})
    status, _ = cluster.run(monkeypatch, capsys)
    assert status == 0
    assert [node for node, _, _ in cluster.patches] == ["node-0-2"]
    message = cluster.suspect_events()[0][2]
    assert "node-0-1 (node 1, pod check-1-node-1): tainted already" in message and cluster.created == 2


def test_a_conflict_is_read_again_and_retried(monkeypatch, capsys):
    cluster = FakeCluster([verdict(2), None])
    cluster.conflicts["node-0-2"] = 2
    status, _ = cluster.run(monkeypatch, capsys)
    assert status == 0
    assert [body["metadata"]["resourceVersion"] for _, body, _ in cluster.patches] == ["7", "8", "9"]
    assert cluster.log.count(("GET", "/api/v1/nodes/node-0-2")) == 3
    assert cluster.nodes["node-0-2"]["spec"]["taints"] == [NEURON_TAINT, SUSPECT] and cluster.created == 2


def test_a_node_that_keeps_changing_is_tried_again_at_the_next_look(monkeypatch, capsys):
    cluster = FakeCluster([verdict(2), None])
    cluster.conflicts["node-0-2"] = program.CONFLICT_TRIES + 1
    status, out = cluster.run(monkeypatch, capsys)
    assert status == 0 and "API not reachable, retrying: node node-0-2 changed 5 times" in out
    assert cluster.reasons() == ["FabricSuspect"] and cluster.created == 2


def test_a_node_already_gone_is_fine(monkeypatch, capsys):
    cluster = FakeCluster([verdict(2), None])
    del cluster.nodes["node-0-2"]
    status, _ = cluster.run(monkeypatch, capsys)
    assert status == 0 and cluster.patches == [] and cluster.created == 2
    assert "node-0-2 (node 2, pod check-1-node-2): gone" in cluster.suspect_events()[0][2]


def test_a_refused_taint_leaves_the_suspects_and_ends_as_a_failed_check(monkeypatch, capsys):
    """Without the ClusterRole (FabricSuspectAdmissionChart not applied) or past the admission policy."""
    cluster = FakeCluster([verdict(2)])
    cluster.refused.add("node-0-2")
    status, out = cluster.run(monkeypatch, capsys)
    assert status == 0 and cluster.reasons() == ["FabricSuspectsRemain"] and cluster.created == 1
    assert 'could not taint node-0-2: HTTP 403: nodes "node-0-2" is forbidden' in cluster.suspect_events()[0][2]


@pytest.mark.parametrize(
    "outcome",
    [
        (3, None),  # below the floor, no pairs measured
        (4, {"verdict": "not-efa"}),
        (SUSPECT_EXIT, None),
        (SUSPECT_EXIT, "cut {"),
        (SUSPECT_EXIT, verdict()),
    ],
)
def test_any_other_failure_of_a_check_ends_as_before(monkeypatch, capsys, outcome):
    cluster = FakeCluster([outcome])
    status, out = cluster.run(monkeypatch, capsys)
    assert status == 0 and out.endswith(f"job release: vcjob/{CHECK} failed\n")
    assert cluster.patches == [] and cluster.reasons() == [] and ("DELETE", CHECK_PATH) not in cluster.log


def test_a_gang_that_is_no_fabric_check_is_not_looked_at(monkeypatch, capsys):
    cluster = FakeCluster([verdict(2)])
    del cluster.held["metadata"]["labels"]
    status, out = cluster.run(monkeypatch, capsys)
    assert status == 0 and out.endswith(f"job release: vcjob/{CHECK} failed\n")
    pod_lists = [entry for entry in cluster.log if entry[1].startswith("/api/v1/namespaces/training/pods?")]
    assert [entry for entry in pod_lists if "volcano.sh/job-name" in entry[1]] == [pod_lists[-1]], "while running"
    assert cluster.patches == [] and cluster.reasons() == []


def test_a_long_table_is_cut_to_an_events_length(monkeypatch, capsys):
    pairs = [{"nodes": [i, i + 1], "busbw_gbps": 300.0 + i, "passed": True} for i in range(60)]
    cluster = FakeCluster([verdict(2, pairs=pairs), None])
    status, out = cluster.run(monkeypatch, capsys)
    message = cluster.suspect_events()[0][2]
    assert status == 0 and len(message) == program.EVENT_MESSAGE_LIMIT and message.endswith("...")
    assert "59-60 359.0 Gbps pass" in out, "the release's log has it whole"


class PatchServer:
    """An HTTP server that answers PATCHes of nodes with the statuses in ``answers``, recording each request."""

    def __init__(self, answers):
        self.answers, self.seen = list(answers), []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_PATCH(self):  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.seen.append((self.path, self.headers["Content-Type"], body))
                status = fake.answers.pop(0)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                answer = body if status == 200 else {"kind": "Status", "message": f"status {status} from the fake"}
                self.wfile.write(json.dumps(answer).encode())

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"


@pytest.fixture
def patch_server():
    servers = []

    def start(*answers):
        servers.append(PatchServer(answers))
        return servers[-1]

    yield start
    for server in servers:
        server.server.shutdown()


def test_a_node_patch_is_a_merge_patch_and_a_conflict_or_a_missing_node_is_told_apart(patch_server):
    server = patch_server(200, 409, 404, 403)
    url = server.url + "/api/v1/nodes/n1"
    body = {"metadata": {"resourceVersion": "7"}, "spec": {"taints": [SUSPECT]}}
    assert program.request(url, body, "PATCH", program.MERGE_PATCH) == body
    with pytest.raises(program.Conflict, match="HTTP 409: status 409 from the fake"):
        program.request(url, body, "PATCH", program.MERGE_PATCH)
    assert program.request(url, body, "PATCH", program.MERGE_PATCH) is None
    with pytest.raises(program.Refused, match="HTTP 403"):
        program.request(url, body, "PATCH", program.MERGE_PATCH)
    assert server.seen[0] == ("/api/v1/nodes/n1", "application/merge-patch+json", body)
    assert issubclass(program.Conflict, ConnectionError), "a conflict elsewhere is retried at the next look"


def test_the_suspects_nodes_node_0_named_are_tainted_when_volcano_has_deleted_their_pods(monkeypatch, capsys):
    named = {**verdict(2), "suspect_nodes": ["node-0-2"]}
    cluster = FakeCluster([named, None])
    real_pods = cluster._check_pods
    monkeypatch.setattr(
        cluster, "_check_pods", lambda: [pod for pod in real_pods() if pod["metadata"]["name"] != f"{CHECK}-node-2"]
    )
    status, out = cluster.run(monkeypatch, capsys)
    assert status == 0, out
    assert [node for node, _, _ in cluster.patches] == ["node-0-2"], "TerminateJob deleted the running peers"


def test_a_release_that_restarted_mid_round_holds_the_nodes_again_for_the_check_being_deleted(monkeypatch, capsys):
    cluster = FakeCluster([verdict(2), None])
    cluster.check = {**cluster.held, "run": 0}
    cluster.check["metadata"] = {**cluster.held["metadata"], "deletionTimestamp": "2026-12-05T00:00:00Z"}
    cluster.check["metadata"]["ownerReferences"] = [{"uid": "release-uid"}]
    cluster.created = 1  # the earlier run of the release created it, tainted and deleted it, then its pod restarted
    status, out = cluster.run(monkeypatch, capsys)
    assert status == 0, out
    assert "failed and is being deleted to run again; holding its nodes again" in out
    assert cluster.created == 2 and cluster.patches == [], "created anew; the taint was the earlier run's"


def test_a_failed_check_whose_release_still_runs_is_waited_for_and_one_whose_release_ended_has_failed():
    check = {"metadata": {"labels": {FABRIC_CHECK_LABEL: "train-1"}}, "status": {"state": {"phase": "Terminated"}}}
    running = {"status": {"active": 1}}
    ended = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    ref = f"vcjob/{CHECK}"

    def reading(release):
        return lambda asked: check if asked == ref else release if asked == program.release_of(ref) else None

    assert program.wait_states([ref], reading(running)) == {ref: "waiting"}, "its release may run it again"
    assert program.wait_states([ref], reading(ended)) == {ref: "failed"}
    assert program.wait_states([ref], reading(None)) == {ref: "failed"}, "no release: nothing runs it again"
    plain = {"metadata": {}, "status": {"state": {"phase": "Terminated"}}}
    assert program.wait_states([ref], lambda asked: plain if asked == ref else running) == {ref: "failed"}


def test_a_suspect_whose_node_is_not_known_is_named_not_given_a_round_on_the_same_nodes(monkeypatch, capsys):
    cluster = FakeCluster([verdict(2), None])
    real_pods = cluster._check_pods
    monkeypatch.setattr(
        cluster, "_check_pods", lambda: [pod for pod in real_pods() if pod["metadata"]["name"] != f"{CHECK}-node-2"]
    )
    status, out = cluster.run(monkeypatch, capsys)
    assert status == 0 and cluster.created == 1 and cluster.patches == [], out
    [(reason, _, message)] = cluster.suspect_events()
    assert reason == "FabricSuspectsRemain" and "(node not known) (node 2" in message
    assert "the node of a suspect is not known" in message

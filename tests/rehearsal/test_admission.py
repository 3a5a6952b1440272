"""The webhooks' rules (rehearsal/admission.py) on what the stacks render, and each rule denying what it
should: a rule that cannot fail here proves nothing about the objects that pass it."""

import copy
import json
from typing import Any, Callable, Dict, List

import pytest

from rehearsal.admission import RULES, denials, domain_prefixed_path_problem, view_of
from rehearsal.scenarios import workflow_run
from rehearsal.workload_controllers import QUEUE_ANNOTATION, merged_pod_spec
from tests.support.apps import COMPOSER_TRAINING, KUBEFLOW_TRAINING, TRAINIUM_EKS, stack_template
from tests.support.manifests import applied_objects
from trainium_eks.core.conventions import FABRIC_CHECK_LABEL

VARIANTS = [
    (TRAINIUM_EKS, {}),
    (TRAINIUM_EKS, {"instanceType": "trn1n.32xlarge", "nodeCount": "4"}),
    (KUBEFLOW_TRAINING, {}),
    (KUBEFLOW_TRAINING, {"kubeflowAcceleratedType": "g5.12xlarge"}),
    (COMPOSER_TRAINING, {}),
]


def trainer_pod_group(train_job: Dict[str, Any], runtime: Dict[str, Any]) -> Dict[str, Any]:
    """The PodGroup Kubeflow Trainer's Volcano plugin creates for ``train_job`` (Volcano's PodGroup webhook admits
    it when the TrainJob starts)."""
    _, annotations = merged_pod_spec(runtime, train_job)
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": train_job["metadata"]["name"], "namespace": train_job["metadata"]["namespace"]},
        "spec": {"minMember": train_job["spec"]["trainer"]["numNodes"], "queue": annotations.get(QUEUE_ANNOTATION)},
    }


def everything_admitted(stack: str, context: Dict[str, str]) -> List[Dict[str, Any]]:
    """Every object a stack creates through a webhook: what it applies, the jobs its release Jobs create, the
    PodGroups the Trainer makes of its TrainJobs, and a workflow run."""
    objects = list(applied_objects(stack_template(stack, **context)).values())
    runtimes = [o for o in objects if o["kind"] == "ClusterTrainingRuntime"]
    if runtimes:
        objects.append(workflow_run(6))
    for train_job in [o for o in objects if o["kind"] == "TrainJob"]:
        objects.append(trainer_pod_group(train_job, runtimes[0]))
    return objects


@pytest.mark.parametrize("stack,context", VARIANTS, ids=[f"{s}-{c}" for s, c in VARIANTS])
def test_every_object_each_stack_makes_passes_every_webhook_rule(stack, context):
    objects = everything_admitted(stack, context)
    view = view_of(objects)
    checked = [o for o in objects if any(rule.kind == (o.get("apiVersion"), o.get("kind")) for rule in RULES)]
    assert checked, "the stack applies objects the webhooks check"
    assert {(o["metadata"]["name"], tuple(denials(o, view))) for o in checked if denials(o, view)} == set()


def test_a_job_applied_before_its_queue_is_open_is_denied():
    """Why every job waits for the queue's state (ClusterAddons.volcano_queue_open)."""
    objects = everything_admitted(TRAINIUM_EKS, {})
    vcjob = next(o for o in objects if o["kind"] == "Job" and o["apiVersion"].startswith("batch.volcano.sh"))
    assert any("status is ``" in d for d in denials(vcjob, view_of(objects, queues_open=False)))


def library_objects() -> Dict[str, Dict[str, Any]]:
    objects = everything_admitted(KUBEFLOW_TRAINING, {}) + everything_admitted(TRAINIUM_EKS, {})
    return {
        "vcjob": next(o for o in objects if o["kind"] == "Job" and o["apiVersion"].startswith("batch.volcano.sh")),
        "trainjob": next(o for o in objects if o["kind"] == "TrainJob"),
        "runtime": next(o for o in objects if o["kind"] == "ClusterTrainingRuntime"),
        "queue": next(o for o in objects if o["kind"] == "Queue"),
        "podgroup": next(o for o in objects if o["kind"] == "PodGroup"),
        "fabric": next(o for o in objects if FABRIC_CHECK_LABEL in (o["metadata"].get("labels") or {})),
        "all": objects,
    }


def _task(obj):
    return obj["spec"]["tasks"][0]


def _patch_pod(obj):
    return obj["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"][
        "spec"
    ]["template"]["spec"]


def _runtime_pod(obj):
    return obj["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


Mutation = Callable[[Dict[str, Any]], None]
DENIED: Dict[str, tuple] = {
    "volcano job: tasks": ("vcjob", lambda o: o["spec"].update(tasks=[])),
    "volcano job: task minAvailable": ("vcjob", lambda o: _task(o).update(minAvailable=99)),
    "volcano job: job minAvailable": ("vcjob", lambda o: o["spec"].update(minAvailable=99)),
    "volcano job: task names": ("vcjob", lambda o: o["spec"]["tasks"].append(copy.deepcopy(_task(o)))),
    "volcano job: policies": (
        "vcjob",
        lambda o: _task(o)["policies"].append({"event": "PodRunning", "action": "RestartJob"}),
    ),
    "volcano job: names": ("vcjob", lambda o: o["metadata"].update(name="a" * 60)),
    "volcano job: plugins": ("vcjob", lambda o: o["spec"]["plugins"].update(gpu=[])),
    "volcano job: queue open": ("vcjob", lambda o: o["spec"].update(queue="nowhere")),
    "volcano job: pod template": (
        "vcjob",
        lambda o: _task(o)["template"]["spec"]["containers"][0]["resources"].pop("limits"),
    ),
    "volcano queue: weight and state": ("queue", lambda o: o["spec"].update(weight=0)),
    "volcano podgroup: queue open": ("podgroup", lambda o: o["spec"].update(queue="nowhere")),
    "trainjob: runtime exists": ("trainjob", lambda o: o["spec"]["runtimeRef"].update(name="missing")),
    "trainjob: patch manager": ("trainjob", lambda o: o["spec"]["runtimePatches"][0].update(manager="trainium-eks")),
    "trainjob: patched jobs and containers exist": (
        "trainjob",
        lambda o: _patch_pod(o).update(initContainers=[{"name": "start-gate", "env": []}]),
    ),
    "trainjob: reserved env": (
        "trainjob",
        lambda o: o["spec"]["trainer"]["env"].append({"name": "PET_NNODES", "value": "2"}),
    ),
    "trainjob: volcano queue and priority": (
        "trainjob",
        lambda o: o["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"].update(
            metadata={"annotations": {QUEUE_ANNOTATION: ""}}
        ),
    ),
    "trainjob: JobSet names": ("trainjob", lambda o: o["metadata"].update(name="a" * 50)),
    "runtime: ancestor jobs": ("runtime", lambda o: _runtime_pod(o)["containers"][0].update(name="trainer")),
    "runtime: JobSet failure policy": (
        "runtime",
        lambda o: o["spec"]["template"]["spec"]["failurePolicy"].update(restartStrategy="InPlaceRestart"),
    ),
}
"""Rule -> (a library object, a change the webhook denies)."""


@pytest.mark.parametrize("name", sorted(DENIED))
def test_each_rule_denies_what_its_webhook_denies(name):
    objects = library_objects()
    kind, mutate = DENIED[name]
    obj = json.loads(json.dumps(objects[kind]))
    view = view_of(objects["all"])
    assert not [d for d in denials(obj, view) if d.startswith(name + ":")], "the library's object passes"
    mutate(obj)
    assert [d for d in denials(obj, view) if d.startswith(name + ":")], denials(obj, view)


def test_the_fabric_check_passes_the_volcano_webhook_and_its_exit_code_policies_are_judged_like_it():
    """volcano v1.15.1 validate/util.go validatePolicies: exit codes may not repeat (nor be 0, nor come with an
    event); the job plugins must be registered ones (ssh, svc and env are)."""
    objects = library_objects()
    check, view = objects["fabric"], view_of(objects["all"])
    assert check["spec"]["plugins"].keys() == {"ssh", "svc", "env"} and denials(check, view) == []
    repeated = json.loads(json.dumps(check))
    _task(repeated)["policies"].append({"exitCode": 3, "action": "RestartJob"})
    assert "volcano job: policies: duplicate exitCode 3" in denials(repeated, view)
    both = json.loads(json.dumps(check))
    _task(both)["policies"][0]["event"] = "PodFailed"
    assert "volcano job: policies: must not specify event and exitCode simultaneously" in denials(both, view)


def test_the_ssh_plugins_pod_volume_must_be_a_dns_label():
    """ssh/ssh.go mountRsaKey names the pod's volume after its Secret, <job>-ssh."""
    objects = library_objects()
    check = json.loads(json.dumps(objects["fabric"]))
    check["metadata"]["name"] = "a" * 60
    _task(check).update(name="", replicas=1, minAvailable=1)
    check["spec"].update(minAvailable=1, plugins={"ssh": []})
    assert "the ssh plugin's volume" in " ".join(denials(check, view_of(objects["all"])))


def test_every_rule_has_a_case_that_it_denies():
    assert {rule.name for rule in RULES} == set(DENIED)
    assert all(rule.source.startswith(("volcano-sh/", "kubeflow/", "kubernetes-sigs/")) for rule in RULES)


@pytest.mark.parametrize(
    "value,accepted",
    [
        ("trainium-eks/train-job-chart", True),
        ("trainium-eks/jobs/v1:a", True),
        ("example.io/name", True),
        ("trainium-eks", False),
        ("Trainium-EKS/jobs", False),
        ("trainium_eks/jobs", False),
        ("trainium-eks/", False),
        ("/jobs", False),
        ("a/b c", False),
        ("a/b?x", False),
        ("", False),
    ],
)
def test_the_domain_prefixed_path_rule(value, accepted):
    """kubernetes/apimachinery pkg/util/validation IsDomainPrefixedPath, as the Trainer's webhook calls it."""
    assert (domain_prefixed_path_problem(value) is None) is accepted


def test_the_deploy_rehearsal_api_server_runs_the_webhooks():
    from rehearsal.cluster_model import Cluster

    objects = library_objects()
    cluster = Cluster.new("c")
    cluster.helm_upgrade_install(
        "kubeflow-trainer", namespace="k", chart="kubeflow-trainer", version="2", values="", create_namespace=True
    )
    cluster.apply(
        [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "training"}}], selector=None, file_name="m"
    )
    train_job = json.loads(json.dumps(objects["trainjob"]))
    assert "runtime exists" in cluster.apply([train_job], selector=None, file_name="m").errors[0]
    cluster.apply([objects["runtime"]], selector=None, file_name="m")
    train_job["spec"]["runtimePatches"][0]["manager"] = "trainium-eks"
    assert "patch manager" in cluster.apply([train_job], selector=None, file_name="m").errors[0]
    assert cluster.apply([objects["trainjob"]], selector=None, file_name="m").exit_code == 0

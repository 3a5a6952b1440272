"""The scheduling rehearsal: every stack's jobs run to completion in every arrival order with a failed attempt each,
and the model catches what today's cluster would do with jobs that wait inside their pods, gangs without Volcano, or
nodes without their device plugin."""

import json
import math
from typing import Any, Dict, List, Tuple

import pytest

from rehearsal.container_programs import Programs, WaitForJobs
from rehearsal.kubelet_expansion import expand
from rehearsal.node_capacity import allocatable, kube_reserved_millicpu
from rehearsal.scheduling_run import (
    arrival_orders,
    arrival_units,
    broken,
    created_name,
    guarded_name,
    is_job,
    rehearse_jobs,
    run_jobs,
    stack_scheduling,
    step,
)
from rehearsal.simulated_cluster import SimulatedCluster, nodes_of
from rehearsal.workload_controllers import volcano_action
from tests.support.apps import COMPOSER_TRAINING, KUBEFLOW_TRAINING, TRAINIUM_EKS, resources_of, stack_template
from tests.support.manifests import MANIFEST, held_job, manifest_of
from trainium_eks.core.conventions import Taint
from trainium_eks.manifests.addons.training_runtime import TrainingRuntimeChart
from trainium_eks.manifests.jobs.dataset_staging import DatasetStagingChart
from trainium_eks.manifests.jobs.job_release import kubelet_literal
from trainium_eks.manifests.jobs.topology import NodeGroupTopology
from trainium_eks.manifests.jobs.train_job import TrainJobChart
from trainium_eks.manifests.jobs.volcano_job import VolcanoJobChart

NEURON = (Taint("aws.amazon.com/neuron", "true", "NoSchedule"),)


def stack_parts(stack: str, **context: str) -> Tuple[list, List[Dict[str, Any]], List[Dict[str, Any]]]:
    """(nodes, standing objects, jobs) of a stack of the default app."""
    template = stack_template(stack, **context)
    objects = [manifest_of(resource) for resource in resources_of(template, MANIFEST).values()]
    return nodes_of(template.to_json()), [o for o in objects if not is_job(o)], [o for o in objects if is_job(o)]


@pytest.mark.parametrize(
    "stack,context",
    [
        (TRAINIUM_EKS, {}),
        (TRAINIUM_EKS, {"nodeCount": "4"}),
        (TRAINIUM_EKS, {"instanceType": "trn1n.32xlarge"}),
        (COMPOSER_TRAINING, {}),
        (COMPOSER_TRAINING, {"composerInstanceType": "g6.xlarge"}),
    ],
)
def test_every_stacks_jobs_complete_in_every_order_with_one_failed_attempt_each(stack, context):
    """KubeflowTraining is not here: its 6-node TrainJob gets its nodes only through the release program's capacity
    step, which this model does not run (without it the model stalls as the real components did); the real control
    plane runs it (tests/e2e/test_lifecycle.py)."""
    nodes, standing, jobs = stack_parts(stack, **context)
    arrivals = jobs
    scheduling = stack_scheduling(stack_template(stack, **context).to_json())
    reports = rehearse_jobs(
        nodes, standing, arrivals, volcano_actions=scheduling.volcano_actions, addons=scheduling.addons
    )
    assert all(not report.nodes_left for report in reports), "Karpenter removes every node after the jobs"
    units = arrival_units(arrivals)
    checks = sum(len(unit) == 2 for unit in units)
    assert checks == (2 if stack == TRAINIUM_EKS else 0), "a check before each multi-node EFA job, none elsewhere"
    orders = math.factorial(len(units)) * (2 if checks else 1)
    assert len(reports) == 2 * orders, "every order of the units, with and without failures"
    assert broken(reports) == {}
    releases = sum(1 for job in jobs if job["metadata"]["name"].endswith("-release"))
    for report in reports:
        assert set(report.jobs.values()) <= {"Complete", "Completed"}, report.jobs
        assert len(report.jobs) == len(arrivals) + releases, "each release Job created its held job"
        assert_guarded_releases_were_inert(report, arrivals)


def event_ticks(report, what: str) -> Dict[str, int]:
    """Job name -> the tick of the log line ``t=<tick>: <kind>/<namespace>/<name> <what>``."""
    found = {}
    for line in report.log:
        tick, _, rest = line.partition(": ")
        ref, _, event = rest.partition(" ")
        if event.startswith(what) and ref.count("/") == 2:
            found[ref.rsplit("/", 1)[1]] = int(tick[2:])
    return found


def assert_guarded_releases_were_inert(report, arrivals):
    """The premise of the reduced orders (rehearsal/scheduling_run.py): every fabric check completes after the last
    arrival, and the job it guards is created only once it has (in that tick or later)."""
    completed, created = event_ticks(report, "Complete"), event_ticks(report, "created")
    last_arrival = len(arrivals) - 1
    for manifest in arrivals:
        guarded = guarded_name(manifest)
        if guarded is None:
            continue
        check = manifest["metadata"]["name"].removesuffix("-release")
        assert completed[check] > last_arrival, (report.arrival, completed[check])
        assert created[guarded] >= completed[check], (report.arrival, guarded)


def test_the_orders_keep_every_permutation_of_the_apps_jobs_with_each_check_next_to_its_job():
    _, _, jobs = stack_parts(TRAINIUM_EKS)
    units = arrival_units(jobs)
    assert sorted(len(unit) for unit in units) == [1, 2, 2]
    for check, guarded in (unit for unit in units if len(unit) == 2):
        assert guarded_name(check) == created_name(guarded) and "-fabric-" in created_name(check)
    orders = arrival_orders(jobs)
    assert len(orders) == 12 and len(set(orders_as_names(orders))) == 12
    apps_jobs = {tuple(n for n in order if "-fabric-" not in n) for order in orders_as_names(orders)}
    assert len(apps_jobs) == math.factorial(3), "every order of staging, pre-compilation and training"
    for order in orders_as_names(orders):
        for index, name in enumerate(order):
            if "-fabric-" in name:
                neighbours = order[max(0, index - 1) : index + 2]
                assert any(n.startswith(name.split("-fabric-")[0] + "-") and "-fabric-" not in n for n in neighbours)


def orders_as_names(orders):
    return [tuple(created_name(m) for m in order) for order in orders]


def seed_parts_named():
    """TrainiumEks' nodes, standing objects, jobs, and the jobs by what they are: data, compile, train and their
    checks compile-fabric, train-fabric (releases named by the job they create)."""
    nodes, standing, jobs = stack_parts(TRAINIUM_EKS)
    named = {}
    for job in jobs:
        name = created_name(job)
        what = name.split("-")[2] + ("-fabric" if "-fabric-" in name else "")
        named[what] = name
    return nodes, standing, jobs, named


def test_a_fabric_check_below_its_floor_ends_the_check_and_its_job_is_never_created():
    """The check of the training job measures too little: its node 0 exits 3, Volcano's exit-code policy terminates
    the check at once (no retry), the training job's release fails naming it and the training job is never created;
    everything before it completed."""
    nodes, standing, jobs, named = seed_parts_named()
    scheduling = stack_scheduling(stack_template(TRAINIUM_EKS).to_json())
    report = run_jobs(
        nodes,
        standing,
        jobs,
        volcano_actions=scheduling.volcano_actions,
        addons=scheduling.addons,
        below_floor=frozenset({named["train-fabric"]}),
    )
    states = {ref.rsplit("/", 1)[1]: state for ref, state in report.jobs.items()}
    assert states[named["train-fabric"]] == "Terminated"
    assert states[named["train"] + "-release"] == "Failed"
    assert named["train"] not in states, "the held training job is never created"
    assert states[named["compile"]] == "Completed" and states[named["data"]] == "Complete"
    assert any("restarts" in line and "train-fabric" in line for line in report.log) is False, "no retry"
    assert any(named["train-fabric"] in line and "never created" in line for line in report.log), report.log
    assert any(v.startswith(f"vcjob/training/{named['train-fabric']} ended Terminated") for v in report.violations)
    assert not report.nodes_left, "Karpenter removes the nodes all the same"


def test_a_failed_check_before_the_pre_compilation_ends_every_later_release():
    nodes, standing, jobs, named = seed_parts_named()
    scheduling = stack_scheduling(stack_template(TRAINIUM_EKS).to_json())
    report = run_jobs(
        nodes,
        standing,
        jobs,
        volcano_actions=scheduling.volcano_actions,
        addons=scheduling.addons,
        below_floor=frozenset({named["compile"]}),
    )
    states = {ref.rsplit("/", 1)[1]: state for ref, state in report.jobs.items()}
    assert states[named["compile-fabric"]] == "Terminated", "named by the job it guards, the check fails"
    for release in ("compile", "train-fabric", "train"):
        assert states[named[release] + "-release"] == "Failed", release
    assert {named["compile"], named["train-fabric"], named["train"]}.isdisjoint(states)


def test_a_failed_first_attempt_of_a_check_restarts_it_and_the_job_runs():
    """A failure other than a verdict (exit 1: sshd, DNS, a benchmark that could not start) gets the check's one
    restart (PodFailed -> RestartJob, maxRetry 2)."""
    nodes, standing, jobs, named = seed_parts_named()
    scheduling = stack_scheduling(stack_template(TRAINIUM_EKS).to_json())
    report = run_jobs(
        nodes,
        standing,
        jobs,
        volcano_actions=scheduling.volcano_actions,
        addons=scheduling.addons,
        failing=frozenset({named["train-fabric"]}),
    )
    assert report.violations == (), report.violations
    assert any(named["train-fabric"] in line and "restarts (attempt 2)" in line for line in report.log)


@pytest.mark.parametrize(
    "code,action",
    [(3, "TerminateJob"), (4, "TerminateJob"), (78, "TerminateJob"), (5, "RestartJob"), (1, "RestartJob")],
)
def test_the_checks_policies_terminate_on_a_verdict_and_restart_on_anything_else(code, action):
    """volcano v1.15.1 applyPolicies: the first of the task's policies that names the event or the exit code."""
    _, _, jobs, named = seed_parts_named()
    (release,) = [j for j in jobs if created_name(j) == named["train-fabric"]]
    check = held_job(release)
    assert volcano_action(check["spec"], "node", code) == action
    assert volcano_action({"tasks": [{"name": "node", "policies": []}]}, "node", code) is None


# --- today's patterns, which the model must catch ----------------------------------------------------------------


def start_gate(pod, index, container):
    """A start gate: an init container polling the jobs named in its command (what the jobs had until now)."""
    if container.get("name") == "start-gate" and index < len(pod.spec.get("initContainers") or ()):
        return WaitForJobs(tuple(container["command"][4:]))
    return None


def gated(job: Dict[str, Any], *refs: str) -> Dict[str, Any]:
    """``job`` with a start gate waiting for ``refs`` in its pods, created at once instead of held."""
    gated = json.loads(json.dumps(job))
    for task in gated["spec"]["tasks"]:
        task["template"]["spec"]["initContainers"] = [
            {
                "name": "start-gate",
                "image": "python:3.12",
                "command": ["python3", "-c", "...", "training", *refs],
                "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
            }
        ]
    return gated


def seed_jobs_with_start_gates():
    nodes, standing, _ = stack_parts(TRAINIUM_EKS)
    group = NodeGroupTopology("trn1.32xlarge", 2, 2, 8, NEURON, frozenset({"fsx-claim"}))
    staging = DatasetStagingChart(
        name="data", source="s3://bucket/d.tar", directory="d", image="i:1", node_group=group
    ).manifest
    common = dict(image="i:1", node_group=group, script="/t.py")
    compile_ = VolcanoJobChart(name="compile", precompile=True, **common).manifest
    train = VolcanoJobChart(name="train", **common).manifest
    arrivals = [
        staging,
        gated(compile_, f"job/{staging['metadata']['name']}"),
        gated(train, f"vcjob/{compile_['metadata']['name']}"),
    ]
    return nodes, standing, arrivals


def test_jobs_that_wait_in_their_own_pods_deadlock_when_the_later_one_comes_first():
    """The training job admitted first binds every Neuron device in its start gate; the pre-compilation it waits for
    can then never be enqueued, let alone scheduled."""
    reports = rehearse_jobs(*seed_jobs_with_start_gates(), classifier=start_gate)
    stuck = [r for r in reports if r.violations]
    assert stuck, "the model must see the deadlock"
    assert any(
        r.arrival.index(next(a for a in r.arrival if "train-" in a))
        < r.arrival.index(next(a for a in r.arrival if "compile-" in a))
        for r in stuck
    )
    assert any("never enqueued" in v for r in stuck for v in r.violations)
    assert any("a wait that never ends" in v for r in stuck for v in r.violations)


def trainjob_parts(runtime: Dict[str, Any]):
    nodes, standing, _ = stack_parts(KUBEFLOW_TRAINING)
    standing = [o for o in standing if o["kind"] != "ClusterTrainingRuntime"] + [runtime]
    group = NodeGroupTopology("m5.xlarge", 6, 6, 0, (), frozenset({"efs-sc-claim"}))
    jobs = [
        TrainJobChart(name=name, image="i:1", node_group=group, script="/t.py").manifest for name in ("first", "second")
    ]
    return nodes, standing, jobs


def test_two_overlapping_trainjobs_gang_through_volcano_one_after_the_other():
    (runtime,) = TrainingRuntimeChart().manifests()
    reports = rehearse_jobs(*trainjob_parts(runtime))
    assert broken(reports) == {}


def test_a_gpu_job_on_a_node_without_the_nvidia_device_plugin_can_never_be_placed():
    nodes, standing, jobs = stack_parts(COMPOSER_TRAINING)
    without_plugin = [o for o in standing if o["metadata"]["name"] != "nvidia-device-plugin"]
    report = run_jobs(nodes, without_plugin, jobs)
    assert any("can never be placed" in v and "nvidia.com/gpu" in v for v in report.violations), report.violations


def test_a_volcano_job_with_no_node_of_its_kind_is_never_enqueued_and_makes_no_pod():
    """volcano-sh/volcano v1.15.1: proportion refuses a PodGroup asking for more than the cluster has, and the vcjob
    controller creates pods only once it is enqueued: with no Neuron node yet, nothing ever appears."""
    nodes, standing, _ = stack_parts(TRAINIUM_EKS)
    standing = [o for o in standing if o["kind"] not in ("NodePool", "EC2NodeClass")]
    system_only = [n for n in nodes if "trainium-eks/node-role" in n.labels]
    group = NodeGroupTopology("trn1.32xlarge", 2, 2, 8, NEURON, frozenset({"fsx-claim"}))
    job = VolcanoJobChart(name="train", image="i:1", node_group=group, script="/t.py").manifest
    report = run_jobs(system_only, standing, [job])
    assert any("never enqueued" in v for v in report.violations), report.violations
    assert any("can never be placed" in v and "node selector" in v for v in report.violations)
    assert not any(line.startswith("t=") and "pod train-" in line for line in report.log), "no pod before enqueue"


def seed_cluster():
    """The TrainiumEks cluster with its standing objects, and its jobs by what they are (bert-phase1-<what>-...,
    bert-phase1-<what>-fabric-... for the fabric checks)."""
    nodes, standing, jobs = stack_parts(TRAINIUM_EKS)
    cluster = SimulatedCluster(nodes=nodes, queues={"default": {"weight": 1}})
    for manifest in standing:
        cluster.create(manifest)
    named = {}
    for job in jobs:
        name = job["metadata"]["name"]
        what = name.split("-")[2] + ("-fabric" if "-fabric-" in name else "")
        named[("release-of-" if name.endswith("-release") else "") + what] = job
    return cluster, named


def test_deleting_a_release_deletes_the_job_its_program_created():
    cluster, jobs = seed_cluster()
    staging = cluster.create(jobs["data"])
    staging.state = "Complete"
    check = cluster.create(held_job(jobs["release-of-compile-fabric"]))
    check.state = "Completed"
    release = cluster.create(jobs["release-of-compile"])
    programs = Programs()
    for _ in range(10):
        step(cluster, programs)
    (held,) = [w for w in cluster.workloads.values() if w.owner == release.ref]
    assert held.kind == "vcjob" and held.name == jobs["release-of-compile"]["metadata"]["name"].removesuffix("-release")
    assert held.manifest["metadata"]["ownerReferences"][0]["name"] == release.name, "the program made it the owner"
    cluster.delete_workload(release.ref, "CloudFormation deleted it")
    assert held.ref not in cluster.workloads


def test_a_failed_staging_ends_every_later_release_at_once():
    """staging fails for good: precompile's release fails, and training's release, whose job will never exist,
    fails too instead of waiting out its 14 days."""
    cluster, jobs = seed_cluster()
    staging = cluster.create(jobs["data"])
    staging.state = "Failed"
    releases = [cluster.create(jobs[f"release-of-{what}"]) for what in ("compile-fabric", "compile", "train-fabric")]
    releases.append(cluster.create(jobs["release-of-train"]))
    programs = Programs()
    for _ in range(20):
        step(cluster, programs)
    assert [release.state for release in releases] == ["Failed"] * 4, cluster.log
    assert not any(w.kind == "vcjob" for w in cluster.workloads.values())


def test_node_allocatable_follows_nodeadm():
    """awslabs/amazon-eks-ami nodeadm: kubeReserved CPU tiers, memory 11 x maxPods + 255 MiB, eviction 100 MiB."""
    assert kube_reserved_millicpu(4) == 80 and kube_reserved_millicpu(128) == 390
    assert allocatable("trn1.32xlarge") == {"cpu": 127610, "memory": 521216, "pods": 247}
    assert allocatable("m5.xlarge") == {"cpu": 3920, "memory": 15391, "pods": 58}
    assert allocatable("p4d.24xlarge")["pods"] == 250, "a managed node group caps pods at 250"


@pytest.mark.parametrize(
    "text",
    [
        "plain",
        "${NODE_ZERO}:29500",
        "$(NOT_A_VAR)",
        "a$$b",
        "$$(x)",
        "ends with $",
        "$(",
        '{"a": "$(b)"}',
        "${Token[X.1]}",
    ],
)
def test_kubelet_literals_reach_the_container_as_written(text):
    """Kubernetes third_party/forked/golang/expansion: $$ gives $, $(VAR) a variable, anything else stays."""
    assert expand(kubelet_literal(text), {"NOT_A_VAR": "surprise", "b": "c", "x": "y"}) == text
    assert kubelet_literal("${Token[X.1]}") == "${Token[X.1]}", "CDK tokens are left alone"
    assert expand("$(A)-$$(A)", {"A": "1"}) == "1-$(A)"

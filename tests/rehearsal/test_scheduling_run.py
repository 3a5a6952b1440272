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
from rehearsal.scenarios import workflow_run
from rehearsal.scheduling_run import broken, is_job, rehearse_jobs, run_jobs, stack_scheduling, step
from rehearsal.simulated_cluster import SimulatedCluster, nodes_of
from tests.support.apps import COMPOSER_TRAINING, KUBEFLOW_TRAINING, TRAINIUM_EKS, resources_of, stack_template
from tests.support.manifests import MANIFEST, manifest_of
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
    "stack,context,extra",
    [
        (TRAINIUM_EKS, {}, 0),
        (TRAINIUM_EKS, {"nodeCount": "4"}, 0),
        (TRAINIUM_EKS, {"instanceType": "trn1n.32xlarge"}, 0),
        (KUBEFLOW_TRAINING, {}, 6),
        (KUBEFLOW_TRAINING, {"kubeflowCpuNodes": "3"}, 3),
        (COMPOSER_TRAINING, {}, 0),
        (COMPOSER_TRAINING, {"composerInstanceType": "g6.xlarge"}, 0),
    ],
)
def test_every_stacks_jobs_complete_in_every_order_with_one_failed_attempt_each(stack, context, extra):
    nodes, standing, jobs = stack_parts(stack, **context)
    arrivals = jobs + ([workflow_run(extra)] if extra else [])
    scheduling = stack_scheduling(stack_template(stack, **context).to_json())
    reports = rehearse_jobs(
        nodes, standing, arrivals, volcano_actions=scheduling.volcano_actions, addons=scheduling.addons
    )
    assert all(not report.nodes_left for report in reports), "Karpenter removes every node after the jobs"
    assert len(reports) == 2 * math.factorial(len(arrivals)), "every order, with and without failures"
    assert broken(reports) == {}
    releases = sum(1 for job in jobs if job["metadata"]["name"].endswith("-release"))
    for report in reports:
        assert set(report.jobs.values()) <= {"Complete", "Completed"}, report.jobs
        assert len(report.jobs) == len(arrivals) + releases, "each release Job created its held job"


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
    """The TrainiumEks cluster with its standing objects, and its jobs by what they are (bert-phase1-<what>-...)."""
    nodes, standing, jobs = stack_parts(TRAINIUM_EKS)
    cluster = SimulatedCluster(nodes=nodes, queues={"default": {"weight": 1}})
    for manifest in standing:
        cluster.create(manifest)
    named = {}
    for job in jobs:
        name = job["metadata"]["name"]
        named[("release-of-" if name.endswith("-release") else "") + name.split("-")[2]] = job
    return cluster, named


def test_deleting_a_release_deletes_the_job_its_program_created():
    cluster, jobs = seed_cluster()
    staging = cluster.create(jobs["data"])
    staging.state = "Complete"
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
    compile_release = cluster.create(jobs["release-of-compile"])
    train_release = cluster.create(jobs["release-of-train"])
    programs = Programs()
    for _ in range(20):
        step(cluster, programs)
    assert (compile_release.state, train_release.state) == ("Failed", "Failed"), cluster.log
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

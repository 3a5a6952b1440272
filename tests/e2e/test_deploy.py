"""A user's whole stack lifecycle on the real control plane: a deploy applies every stack's template, in
CloudFormation's order, through aws-eks-v2's kubectl handler with the kubectl layer's kubectl and helm, against the
real API server with every CRD installed and the real Volcano, JobSet and Trainer webhooks serving; the seed jobs run
to their end on their own (the release programs as processes with the ``job-release`` token, the gangs placed by the
real Volcano scheduler on nodes the real Karpenter core launches through its kwok provider); then a ``cdk destroy``
in CloudFormation's delete order leaves exactly the objects the library retains, and no node. For the settings other
than the default (whose whole life, updates included, is ``test_lifecycle.py``'s)."""

from __future__ import annotations

import pytest

import app as default_app
from e2e.components import ComponentRunner
from e2e.deploy import LiveStack, applied_objects
from e2e.processes import wait_for
from e2e.seed_runs import (
    SEED_RUN_MINUTES,
    created_before_its_waits_ended,
    peers_policies,
    run_directory_mounts,
    seed_jobs,
    stop_graces,
    wait_for_jobs,
)
from e2e.stack_state import object_key, present
from rehearsal.scenarios import (
    COMPOSER_TRAINING,
    GPU_GROUP,
    KUBEFLOW_TRAINING,
    NODE_GROUPS,
    STACKS,
    TRAINIUM_EKS,
    default_app_source,
)
from tests.support.apps import new_app
from tests.support.dns_firewall import allowed_domains, unanswered
from tests.support.manifests import held_job
from trainium_eks.constructs.applied_chart import RETAINED_KINDS
from trainium_eks.core.conventions import HELD_JOB_LABEL
from trainium_eks.manifests.jobs.job_release_program import PEERS_SUFFIX, gang_pods, peer_templates
from trainium_eks.workloads import bert_phase1, cifar10_ddp, composer_resnet

SEED_GRACES = {
    bert_phase1.TRAINING_STOP.grace_seconds,
    cifar10_ddp.STOP.grace_seconds,
    composer_resnet.STOP.grace_seconds,
}
"""The pod graces of the seed jobs' graceful stops."""

CASES = [(stack, NODE_GROUPS) for stack in STACKS] + [(KUBEFLOW_TRAINING, GPU_GROUP)]
assert {TRAINIUM_EKS, KUBEFLOW_TRAINING, COMPOSER_TRAINING} == set(STACKS)


@pytest.mark.parametrize("stack,variant", CASES, ids=lambda v: v if isinstance(v, str) else v.label)
def test_a_deploy_applies_everything_runs_the_seed_jobs_and_a_destroy_removes_it_all(
    cluster, binaries, tools, stack, variant
):
    template, region = default_app_source(new_app, default_app.build_app, stack)(variant)
    with ComponentRunner(cluster, binaries) as runner, LiveStack(cluster, stack, region, tools) as live:
        deployed = live.deploy(template)
        assert not deployed.failures, f"{deployed.describe_failures()}\n{runner.describe()}\n{cluster.describe()}"
        runner.check()
        assert volcano_pull_policies(cluster.api) == {"IfNotPresent"}, "the release's basic.image_pull_policy"
        assert unanswered_images(cluster.api, template) == {}, "every image's names are on the DNS firewall's list"
        objects = applied_objects(live)
        kept = applied_objects(live, retained=True)
        assert objects, "the template applies Kubernetes objects"
        assert present(cluster.api, objects) == [object_key(obj) for obj in objects]

        jobs = seed_jobs(objects)
        assert jobs, "every stack runs seed jobs"
        states = wait_for_jobs(
            cluster.api,
            jobs,
            timeout=SEED_RUN_MINUTES * 60,
            check=runner.check,
            describe=lambda: f"{runner.describe()}\n{cluster.describe()}",
        )
        assert set(states.values()) == {"done"}, states
        assert created_before_its_waits_ended(cluster.api, objects) == []
        graces = stop_graces(cluster.api)
        assert graces and set(graces.values()) <= SEED_GRACES, f"the training pods keep their job's grace: {graces}"
        mounts = run_directory_mounts(cluster.api)
        assert mounts and all(mounts.values()), f"every training pod mounts its run directory: {mounts}"
        held_jobs = {
            held["metadata"]["name"] + PEERS_SUFFIX: (release["metadata"]["name"], len(gang_pods(held)) and 2)
            for release in objects
            if HELD_JOB_LABEL in (release["metadata"].get("labels") or {})
            for held in [held_job(release)]
            if peer_templates(held)
        }
        peers = peers_policies(cluster.api, "training")
        assert set(peers) == set(held_jobs), "each held job's release created its peers policy, and no other policy"
        for name, found in peers.items():
            release, least = held_jobs[name]
            assert found["owners"] == [release] and found["selects"], found
            job = name[: -len(PEERS_SUFFIX)]
            assert len(found["pods"]) >= max(least, 1), f"{name} selects {found} (a gang: at least two pods)"
            assert set(found["pods"].values()) == {job}, f"{name} selects pods of other jobs: {found}"

        destroyed = live.deploy(None)
        assert not destroyed.failures, f"{destroyed.describe_failures()}\n{runner.describe()}\n{cluster.describe()}"
        # Kept: the namespace, volume and claim of the training data (their resources' DeletionPolicy is Retain).
        assert present(cluster.api, objects) == [object_key(obj) for obj in kept]
        assert {obj["kind"] for obj in kept} <= RETAINED_KINDS
        # The releases' peers policies went with them (their owner), by the garbage collector, in its own time.
        wait_for(
            "the peers policies to go with their releases",
            lambda: not peers_policies(cluster.api, "training"),
            timeout=120,
            describe=cluster.describe,
        )
        # Karpenter's nodes went before Karpenter did (the EC2NodeClass's finalizer held its delete until then).
        assert [node["metadata"]["name"] for node in cluster.api.list("v1", "Node")] == [], cluster.describe()


WORKLOADS = (("apps/v1", "Deployment"), ("apps/v1", "DaemonSet"), ("apps/v1", "StatefulSet"), ("batch/v1", "Job"))


def unanswered_images(api, template) -> dict:
    """Image -> the names its pull resolves that the template's DNS firewall does not answer, for every container of
    every workload in the cluster (the Helm releases' as the real Helm rendered them, and the stack's own)."""
    allowed = allowed_domains(template)
    specs = [w["spec"]["template"]["spec"] for version, kind in WORKLOADS for w in api.list(version, kind)]
    images = {c["image"] for spec in specs for c in spec.get("initContainers", []) + spec["containers"]}
    assert len(images) > 5, images
    return {image: names for image in sorted(images) if (names := unanswered(allowed, image))}


def volcano_pull_policies(api) -> set:
    """The ``imagePullPolicy`` of every container of the Volcano release's Deployments, as Helm rendered them."""
    deployments = api.list("apps/v1", "Deployment", namespace="volcano-system")
    assert deployments, "the Volcano release has Deployments"
    return {
        container["imagePullPolicy"]
        for deployment in deployments
        for container in deployment["spec"]["template"]["spec"]["containers"]
    }

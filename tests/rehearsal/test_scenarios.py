"""The deploy rehearsal of the default app: each scenario of ``make rehearse`` keeps every promise.

Templates are synthesized once per variant and each old variant is deployed once (``rehearsal`` fixture); the
real aws-eks-v2 handler runs against fake ``aws``/``kubectl``/``helm`` (:mod:`rehearsal`). A scenario
whose promise the library breaks today is listed in :data:`KNOWN_DEFECTS` with the defect (a strict xfail: remove
the entry when the library is fixed).
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Tuple

import pytest

import app as default_app
from rehearsal.cfn_changes import Action
from rehearsal.report import render
from rehearsal.scenario import Rehearsal, ScenarioResult
from rehearsal.scenarios import (
    COMPOSER_TRAINING,
    KUBEFLOW_TRAINING,
    TRAINIUM_EKS,
    all_scenarios,
    default_app_sources,
)
from tests.support.apps import new_app

SCENARIOS = {f"{scenario.stack}: {scenario.name}": scenario for scenario in all_scenarios()}

KNOWN_DEFECTS: Dict[str, str] = {}
"""Scenario (``<stack>: <name>``) -> the library defect that breaks one of its promises today."""


@pytest.fixture(scope="module")
def rehearsal():
    """One rehearsal for the module: templates and deployments are cached."""
    with Rehearsal(default_app_sources(new_app, default_app.build_app)) as shared:
        yield shared


def run(rehearsal: Rehearsal, name: str, stack: str = TRAINIUM_EKS) -> ScenarioResult:
    """The result of the scenario ``name`` of ``stack``."""
    return rehearsal.run(SCENARIOS[f"{stack}: {name}"])


def actions_of(result: ScenarioResult, resource_type: str) -> List[Action]:
    """The actions on the resources of ``resource_type``."""
    return [change.action for change in result.plan.changes if change.resource_type == resource_type]


def job_names(result: ScenarioResult) -> List[str]:
    """Names of the jobs in the clusters after the scenario."""
    return sorted(obj.name for _, obj in result.cluster_after.all_objects() if obj.kind in ("Job", "TrainJob"))


def node_pools(result: ScenarioResult) -> List[Dict[str, Any]]:
    """The specs of the Karpenter NodePools in the clusters after the scenario."""
    return [obj.content["spec"] for _, obj in result.cluster_after.all_objects() if obj.kind == "NodePool"]


def pool_types_and_limits(result: ScenarioResult) -> List[Tuple[List[str], str]]:
    """Each NodePool's instance types and node limit after the scenario."""
    return [
        (
            next(r["values"] for r in spec["template"]["spec"]["requirements"] if r["key"].endswith("instance-type")),
            spec["limits"]["nodes"],
        )
        for spec in node_pools(result)
    ]


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=KNOWN_DEFECTS[name]))
        if name in KNOWN_DEFECTS
        else name
        for name in SCENARIOS
    ],
)
def test_the_scenario_keeps_its_promises(rehearsal, name):
    result = rehearsal.run(SCENARIOS[name])
    assert result.failed_promises() == {}, render(result)


def test_a_fresh_deploy_runs_the_handler_for_every_manifest_and_chart(rehearsal):
    result = run(rehearsal, "fresh deploy")
    handler_steps = [s for s in result.plan.steps if s.resource_type.startswith("Custom::AWSCDK-EKS-")]
    invocations = [run.invocation for run in result.runs if run.invocation is not None]
    assert handler_steps and len(invocations) == len(handler_steps)
    assert all(invocation.succeeded for invocation in invocations)
    (cluster,) = result.cluster_after.clusters.values()
    assert cluster.find("Namespace", "training") is not None
    assert cluster.find("PersistentVolumeClaim", "fsx-claim", "training") is not None
    assert cluster.releases[("volcano-system", "volcano")].revision == 1
    names = job_names(result)
    assert len(names) == 5, "staging, and the releases of two jobs and of their fabric checks"
    assert sum("-fabric-" in name for name in names) == 2


def test_the_report_names_no_folder_of_the_rehearsal_itself(rehearsal):
    """The handler's workspace and the folders it pulls charts into are gone once the rehearsal ends: the report
    names them ``<scratch>`` and ``<scratch>/tmp/<temporary>``, the same in every run."""
    text = render(run(rehearsal, "fresh deploy"))
    assert "helm upgrade karpenter <scratch>/tmp/<temporary>/karpenter " in text
    assert re.findall(r"(?<![>\w])/tmp/\S*", text) == []


def test_scaling_out_updates_the_node_pool_and_renames_the_jobs(rehearsal):
    before = job_names(rehearsal.deployed(TRAINIUM_EKS, SCENARIOS["TrainiumEks: fresh deploy"].new))
    result = run(rehearsal, "nodeCount 2 -> 4")
    assert actions_of(result, "AWS::EKS::Nodegroup") == []
    assert pool_types_and_limits(result) == [(["trn1.32xlarge"], "4")]
    after = job_names(result)
    assert len(after) == 5 and set(after) != set(before)


def test_another_instance_type_updates_the_node_pool_and_its_node_class_in_place(rehearsal):
    result = run(rehearsal, "instanceType trn1 -> trn1n")
    assert pool_types_and_limits(result) == [(["trn1n.32xlarge"], "2")]
    (node_class,) = [o for _, o in result.cluster_after.all_objects() if o.kind == "EC2NodeClass"]
    assert sum(i["interfaceType"] == "efa-only" for i in node_class.content["spec"]["networkInterfaces"]) == 16


def test_switching_to_node_groups_creates_them_and_deletes_the_pool(rehearsal):
    result = run(rehearsal, "Karpenter -> node groups")
    assert actions_of(result, "AWS::EKS::Nodegroup") == [Action.CREATE]
    assert node_pools(result) == []
    back = run(rehearsal, "node groups -> Karpenter")
    assert actions_of(back, "AWS::EKS::Nodegroup") == [Action.DELETE]
    assert pool_types_and_limits(back) == [(["trn1.32xlarge"], "2")]


def test_a_changed_training_argument_replaces_only_the_jobs_that_use_it(rehearsal):
    before = job_names(rehearsal.deployed(TRAINIUM_EKS, SCENARIOS["TrainiumEks: fresh deploy"].new))
    after = job_names(run(rehearsal, "a changed training argument"))
    assert [name for name in before if name.startswith("bert-phase1-data-")] == [
        name for name in after if name.startswith("bert-phase1-data-")
    ], "the staging job does not take the training arguments"
    renamed = set(after) - set(before)
    assert len(renamed) == 4, "the two jobs' releases, and those of their checks (a check's name covers its job's)"
    assert sum("-fabric-" in name for name in renamed) == 2


def test_removed_jobs_are_deleted_from_the_cluster(rehearsal):
    result = run(rehearsal, "the seed jobs removed from the app")
    assert {(s.operation, s.phase) for s in result.plan.steps} == {("Delete", "cleanup")}
    assert job_names(result) == []


def test_a_new_volcano_chart_is_a_helm_upgrade_of_the_same_release(rehearsal):
    result = run(rehearsal, "a new Volcano chart version")
    helm_steps = [s for s in result.plan.steps if s.resource_type == "Custom::AWSCDK-EKS-HelmChart"]
    assert [s.operation for s in helm_steps] == ["Update"]
    (cluster,) = result.cluster_after.clusters.values()
    release = cluster.releases[("volcano-system", "volcano")]
    assert (release.revision, release.version) == (2, helm_steps[0].properties["Version"])


def test_a_kubernetes_upgrade_keeps_the_cluster(rehearsal):
    result = run(rehearsal, "kubernetesVersion 1.35 -> 1.36")
    assert actions_of(result, "AWS::EKS::Cluster") == [Action.UPDATE]
    assert set(result.cluster_before.clusters) == set(result.cluster_after.clusters)


def test_destroy_keeps_the_data_and_deletes_the_cluster(rehearsal):
    result = run(rehearsal, "cdk destroy")
    retained = {c.resource_type for c in result.plan.changes if c.action is Action.RETAIN}
    assert {"AWS::FSx::FileSystem", "AWS::ECR::Repository", "AWS::KMS::Key", "AWS::Logs::LogGroup"} <= retained
    assert result.cluster_after.clusters == {}


def test_a_fresh_kubeflow_deploy_installs_the_trainer_and_creates_the_trainjob_after_its_runtime(rehearsal):
    result = run(rehearsal, "fresh deploy", KUBEFLOW_TRAINING)
    (cluster,) = result.cluster_after.clusters.values()
    assert cluster.releases[("kubeflow-system", "kubeflow-trainer")].revision == 1
    assert cluster.find("PersistentVolumeClaim", "efs-sc-claim", "training") is not None
    order = [run.step.logical_id for run in result.runs]
    (runtime,) = [i for i, logical_id in enumerate(order) if logical_id.startswith("KubeflowTrainerRuntime")]
    (release,) = [i for i, logical_id in enumerate(order) if logical_id.startswith("JobsTrainingJob")]
    assert runtime < release, "the TrainJob's release Job comes after the runtime the TrainJob will name"
    (volcano,) = [i for i, logical_id in enumerate(order) if logical_id.startswith("AddonsVolcano3")]
    (trainer,) = [i for i, logical_id in enumerate(order) if logical_id.startswith("KubeflowTrainerRelease")]
    assert volcano < trainer, "the Trainer's controller starts once the PodGroup kind exists"
    assert len(job_names(result)) == 2, "the staging job and the TrainJob's release Job"


def test_a_new_trainer_chart_is_a_helm_upgrade_that_keeps_the_jobs(rehearsal):
    before = job_names(rehearsal.deployed(KUBEFLOW_TRAINING, SCENARIOS["KubeflowTraining: fresh deploy"].new))
    result = run(rehearsal, "a new Kubeflow Trainer chart version", KUBEFLOW_TRAINING)
    (cluster,) = result.cluster_after.clusters.values()
    assert cluster.releases[("kubeflow-system", "kubeflow-trainer")].revision == 2
    assert job_names(result) == before


def test_another_recipe_replaces_only_the_recipe_run(rehearsal):
    before = set(job_names(rehearsal.deployed(COMPOSER_TRAINING, SCENARIOS["ComposerTraining: fresh deploy"].new)))
    after = set(job_names(run(rehearsal, "another recipe", COMPOSER_TRAINING)))
    (new,) = after - before
    assert new.startswith("resnet-recipe-") and len(after) == 3


@pytest.mark.parametrize("stack", [KUBEFLOW_TRAINING, COMPOSER_TRAINING])
def test_destroy_keeps_the_efs_data(rehearsal, stack):
    result = run(rehearsal, "cdk destroy", stack)
    retained = {c.resource_type for c in result.plan.changes if c.action is Action.RETAIN}
    assert {"AWS::EFS::FileSystem", "AWS::ECR::Repository"} <= retained
    if stack == KUBEFLOW_TRAINING:
        assert "AWS::S3::Bucket" in retained, "the SageMaker runs' models"


def test_fewer_cpu_nodes_update_the_node_pool_and_rename_the_trainjob(rehearsal):
    before = job_names(rehearsal.deployed(KUBEFLOW_TRAINING, SCENARIOS["KubeflowTraining: fresh deploy"].new))
    result = run(rehearsal, "kubeflowCpuNodes 6 -> 3", KUBEFLOW_TRAINING)
    assert pool_types_and_limits(result) == [(["m5.xlarge"], "3")]
    after = job_names(result)
    renamed = set(after) - set(before)
    assert len(after) == 2 and len(renamed) == 1 and next(iter(renamed)).startswith("cifar10-ddp-")


def test_a_gpu_group_added_creates_its_node_pool_and_the_nvidia_plugin(rehearsal):
    result = run(rehearsal, "a GPU group added", KUBEFLOW_TRAINING)
    assert sorted(pool_types_and_limits(result)) == [(["g5.12xlarge"], "1"), (["m5.xlarge"], "6")]
    (cluster,) = result.cluster_after.clusters.values()
    assert cluster.find("DaemonSet", "nvidia-device-plugin", "kube-system") is not None


def test_another_gpu_type_updates_the_node_pool_in_place(rehearsal):
    result = run(rehearsal, "composerInstanceType g5 -> g6", COMPOSER_TRAINING)
    assert pool_types_and_limits(result) == [(["g6.xlarge"], "1")]
    assert Action.REPLACE not in actions_of(result, "AWS::EC2::Subnet"), "usw2-az3 offers g6 too: no move"

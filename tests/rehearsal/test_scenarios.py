"""The deploy rehearsal of the default app: each scenario of ``make rehearse`` keeps every promise.

Templates are synthesized once per variant and each old variant is planned once (``rehearsal`` fixture). What a
scenario leaves in the cluster is read here from the objects its template applies; that the handler, the API server
and the controllers then hold exactly those is what ``tests/e2e/test_lifecycle.py`` checks on the real components.
A scenario whose promise the library breaks today is listed in :data:`KNOWN_DEFECTS` with the defect (a strict
xfail: remove the entry when the library is fixed).
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Tuple

import pytest

import app as default_app
from rehearsal.cfn_changes import Action, Step
from rehearsal.promises import DEPLOY_PROMISES, SUBNETS_DISJOINT
from rehearsal.report import render
from rehearsal.scenario import Rehearsal, Scenario, ScenarioResult, Variant, desired_objects
from rehearsal.scenarios import (
    COMPOSER_TRAINING,
    DEFAULT,
    KUBEFLOW_TRAINING,
    TRAINIUM_EKS,
    all_scenarios,
    default_app_sources,
)
from tests.support.apps import new_app
from trainium_eks.constructs.preflight import RESOURCE_TYPE as PREFLIGHT
from trainium_eks.constructs.preflight import SOURCE as PREFLIGHT_SOURCE
from trainium_eks.core.lambda_sources import load_lambda_module

SCENARIOS = {f"{scenario.stack}: {scenario.name}": scenario for scenario in all_scenarios()}

KNOWN_DEFECTS: Dict[str, str] = {}
"""Scenario (``<stack>: <name>``) -> the library defect that breaks one of its promises today."""


@pytest.fixture(scope="module")
def rehearsal():
    """One rehearsal for the module: templates and deployments are cached."""
    return Rehearsal(default_app_sources(new_app, default_app.build_app))


def run(rehearsal: Rehearsal, name: str, stack: str = TRAINIUM_EKS) -> ScenarioResult:
    """The result of the scenario ``name`` of ``stack``."""
    return rehearsal.run(SCENARIOS[f"{stack}: {name}"])


def actions_of(result: ScenarioResult, resource_type: str) -> List[Action]:
    """The actions on the resources of ``resource_type``."""
    return [change.action for change in result.plan.changes if change.resource_type == resource_type]


def objects(result: ScenarioResult, kind: str) -> List[Dict[str, Any]]:
    """The objects of ``kind`` that the deployed template applies."""
    return [obj for _, obj in desired_objects(result) if obj["kind"] == kind]


def find(result: ScenarioResult, kind: str, name: str, namespace: Optional[str] = None) -> bool:
    """Whether the deployed template applies the object."""
    return any(
        obj["metadata"]["name"] == name and obj["metadata"].get("namespace") == namespace
        for obj in objects(result, kind)
    )


def job_names(result: ScenarioResult) -> List[str]:
    """Names of the jobs the deployed template applies (batch Jobs and TrainJobs)."""
    return sorted(obj["metadata"]["name"] for kind in ("Job", "TrainJob") for obj in objects(result, kind))


def node_pools(result: ScenarioResult) -> List[Dict[str, Any]]:
    """The specs of the Karpenter NodePools the deployed template applies."""
    return [obj["spec"] for obj in objects(result, "NodePool")]


def helm_steps(result: ScenarioResult) -> List[Step]:
    """The steps of the Helm releases."""
    return [step for step in result.plan.steps if step.resource_type == "Custom::AWSCDK-EKS-HelmChart"]


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


def test_a_fresh_deploy_applies_every_manifest_and_chart(rehearsal):
    result = run(rehearsal, "fresh deploy")
    assert all(step.operation == "Create" for step in result.plan.steps)
    assert find(result, "Namespace", "training")
    assert find(result, "PersistentVolumeClaim", "fsx-claim", "training")
    assert [step.properties["Release"] for step in helm_steps(result)].count("volcano") == 1
    names = job_names(result)
    assert len(names) == 5, "staging, and the releases of two jobs and of their fabric checks"
    assert sum("-fabric-" in name for name in names) == 2


def test_the_report_lists_every_step_and_promise(rehearsal):
    result = run(rehearsal, "cdk destroy")
    text = render(result)
    assert len([line for line in text.splitlines() if re.match(r"  \d+ ", line)]) == len(result.plan.steps)
    assert all(f"ok    {name}" in text for name in result.violations)


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
    (node_class,) = objects(result, "EC2NodeClass")
    assert sum(i["interfaceType"] == "efa-only" for i in node_class["spec"]["networkInterfaces"]) == 16


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


def test_a_larger_lustre_file_system_grows_in_place_with_its_volume(rehearsal):
    result = run(rehearsal, "lustreStorageGiB 1200 -> 2400")
    assert actions_of(result, "AWS::FSx::FileSystem") == [Action.UPDATE]
    (volume,) = objects(result, "PersistentVolume")
    assert volume["spec"]["capacity"]["storage"] == "2400Gi"
    (step,) = [s for s in result.plan.steps if s.logical_id.startswith("AddonsSharedVolumePersistentVolumefsxpv")]
    assert step.operation == "Update", "the volume keeps its name: Kubernetes lets a volume's capacity change"


def test_removed_jobs_are_deleted_from_the_cluster(rehearsal):
    result = run(rehearsal, "the seed jobs removed from the app")
    assert {(s.operation, s.phase) for s in result.plan.steps} == {("Delete", "cleanup")}
    assert job_names(result) == []


def test_a_new_volcano_chart_is_a_helm_upgrade_of_the_same_release(rehearsal):
    result = run(rehearsal, "a new Volcano chart version")
    (step,) = helm_steps(result)
    assert (step.operation, step.properties["Release"]) == ("Update", "volcano"), "helm upgrade of the same release"
    assert step.properties["Version"] != step.old_properties["Version"]


def test_a_kubernetes_upgrade_keeps_the_cluster(rehearsal):
    result = run(rehearsal, "kubernetesVersion 1.35 -> 1.36")
    assert actions_of(result, "AWS::EKS::Cluster") == [Action.UPDATE]
    (cluster,) = [s for s in result.plan.steps if s.resource_type == "AWS::EKS::Cluster"]
    assert (cluster.operation, cluster.properties["Version"]) == ("Update", "1.36")


def test_destroy_keeps_the_data_and_deletes_the_cluster(rehearsal):
    result = run(rehearsal, "cdk destroy")
    retained = {c.resource_type for c in result.plan.changes if c.action is Action.RETAIN}
    assert {"AWS::FSx::FileSystem", "AWS::ECR::Repository", "AWS::KMS::Key", "AWS::Logs::LogGroup"} <= retained
    assert [c.action for c in result.plan.changes if c.resource_type == "AWS::EKS::Cluster"] == [Action.DELETE]


def test_a_fresh_kubeflow_deploy_installs_the_trainer_and_creates_the_trainjob_after_its_runtime(rehearsal):
    result = run(rehearsal, "fresh deploy", KUBEFLOW_TRAINING)
    assert [step.properties["Release"] for step in helm_steps(result)].count("kubeflow-trainer") == 1
    assert find(result, "PersistentVolumeClaim", "efs-sc-claim", "training")
    order = [step.logical_id for step in result.plan.steps]
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
    (step,) = [s for s in helm_steps(result) if s.properties["Release"] == "kubeflow-trainer"]
    assert step.operation == "Update" and step.properties["Version"] != step.old_properties["Version"]
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
    assert sorted(pool_types_and_limits(result)) == [(["g6.12xlarge"], "1"), (["m5.xlarge"], "6")]
    assert find(result, "DaemonSet", "nvidia-device-plugin", "kube-system")


def test_another_gpu_type_updates_the_node_pool_in_place(rehearsal):
    result = run(rehearsal, "composerInstanceType g5 -> g6", COMPOSER_TRAINING)
    assert pool_types_and_limits(result) == [(["g6.xlarge"], "1")]
    assert Action.REPLACE not in actions_of(result, "AWS::EC2::Subnet"), "usw2-az3 offers g6 too: no move"


G5_GROUP = Variant("kubeflowAcceleratedType=g5.12xlarge", context=(("kubeflowAcceleratedType", "g5.12xlarge"),))
"""A GPU group of a type the KubeflowTraining stack's AZ (usw2-az4) does not offer, as a user may ask for."""


def test_a_group_the_stacks_zone_does_not_offer_is_refused_by_the_preflight_before_any_subnet_moves(rehearsal):
    """The GPU scenario adds g6, which the stack's AZ offers. A user may ask for g5: the AZ follows the types, so
    every subnet would be replaced with its CIDR block, which EC2 refuses (the model's promise). The stack's own
    preflight, run on the two plans CloudFormation gives it in that update, fails first."""
    result = rehearsal.run(Scenario("a g5 group added", KUBEFLOW_TRAINING, DEFAULT, G5_GROUP, DEPLOY_PROMISES))
    assert set(result.failed_promises()) == {SUBNETS_DISJOINT.name}
    first = result.plan.steps[0]
    assert (first.resource_type, first.operation) == (PREFLIGHT, "Update"), "every other step waits for it"
    checks = load_lambda_module(PREFLIGHT_SOURCE, "preflight_checks")
    plan, previous = (json.loads(properties["Plan"]) for properties in (first.properties, first.old_properties))
    context = checks.AwsContext(None, "us-west-2", plan, previous=previous, forward=True)
    moves = [check() for name, check in checks.planned_checks(context) if name.startswith("zone-move/")]
    assert [(found.check, found.status) for found in moves] == [("zone-move/CpuNodes", "fail")]
    assert "from usw2-az4 to usw2-az3" in moves[0].message

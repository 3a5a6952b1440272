"""HybridTrainingWorkflow: the Step Functions state machine that trains on SageMaker or on the cluster, per run.

The definition is checked three ways, offline: its shape (states, parameters), the pinned asl-validator (schema,
JSONata syntax, resource ARNs), and a small walker that follows Pass, Choice, Wait, Task and Fail states with the real
JSONata engine (the ``jsonata`` package asl-validator pins), so that a request's path through the workflow, the
TrainJob it creates and the causes it fails with are computed, not copied. The IAM statements are asserted one by
one; cfn-lint and cdk-nag run on a stack with a real ``TrainingCluster``."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Dict, List

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_s3 as s3
from cdk_nag import AwsSolutionsChecks

from rehearsal.kubelet_expansion import expand
from tests.support.apps import REPO, new_app, only, resources_of
from tests.support.clusters import ENV, imported_cluster
from tests.support.jsonata import NODE
from tests.support.k8s_validation import validate_objects
from tests.support.workflow_walk import execution_arn
from tests.support.workflow_walk import walk as walk_execution
from trainium_eks.constructs.cluster import TrainingCluster
from trainium_eks.constructs.efs_storage import EfsStorage
from trainium_eks.constructs.hybrid_workflow import (
    SAGEMAKER_ENI_ACTIONS,
    SAGEMAKER_ENI_PERMISSION_ACTIONS,
    SAGEMAKER_VPC_ACTIONS,
    SAGEMAKER_VPC_DESCRIBE_ACTIONS,
    HybridTrainingWorkflow,
    sagemaker_types_for,
)
from trainium_eks.constructs.image_repository import TrainingImageRepository
from trainium_eks.constructs.logged_state_machine import MAX_STATE_MACHINE_NAME, state_machine_name
from trainium_eks.constructs.network import TrainingNetwork
from trainium_eks.core.cfn_text import cfn_text, compact_json
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.facts.catalog import INSTANCE_CATALOG, Accelerator
from trainium_eks.manifests.jobs.topology import NodeGroupTopology
from trainium_eks.manifests.jobs.train_job import TrainJobChart

CPU = NodeGroupTopology("m5.xlarge", 2, 2, 0, (), frozenset({"efs-sc-claim"}))


ENDPOINT = "https://0123456789ABCDEF.gr7.us-west-2.eks.amazonaws.com"


ASL_VALIDATOR = REPO / "node_modules" / ".bin" / "asl-validator"


EXECUTION = "3f2b8c1e-5d4a-4b7e-9c1d-0a1b2c3d4e5f"


JOB = "cifar10-ddp-56ad53dc94"
"""The job of a run of :data:`EXECUTION`: the base name and the first ten hex digits of the SHA-256 of its name."""


LAUNCHER = REPO / "images" / "cifar10-ddp" / "launch.py"


SAGEMAKER = "arn:aws:states:::sagemaker:createTrainingJob.sync"


EKS_CALL = "arn:aws:states:::eks:call"


def train_job(**overrides: Any) -> TrainJobChart:
    props = dict(
        name="cifar10-ddp",
        image="123456789012.dkr.ecr.us-west-2.amazonaws.com/cifar10:1",
        node_group=CPU,
        script="/opt/cifar10/launch.py",
        launcher="direct",
        args=["--", "--data-dir", "/data/cifar10", "--output-dir", "/data/output/${TRAINING_JOB_NAME}"],
    )
    props.update(overrides)
    return TrainJobChart(**props)


def workflow_stack(**props: Any):
    """A stack with an imported cluster (endpoint and certificate given), an EfsStorage, an ECR repository and the
    workflow; ``props`` override the workflow's."""
    app = new_app()
    stack = cdk.Stack(app, "Hybrid", env=ENV)
    network, cluster = imported_cluster(
        stack, cluster_endpoint=ENDPOINT, cluster_certificate_authority_data="Q0VSVElGSUNBVEU="
    )
    efs = EfsStorage(stack, "Efs", vpc=network.vpc)
    repository = ecr.Repository(stack, "Repository")
    arguments = dict(
        cluster=cluster,
        endpoint_access=eks.EndpointAccess.PUBLIC_AND_PRIVATE,
        train_job=train_job(),
        image_repository=repository,
        efs=efs,
        vpc=network.vpc,
        subnets=list(network.vpc.private_subnets),
    )
    arguments.update(props)
    workflow = HybridTrainingWorkflow(stack, "Workflow", **arguments)
    return stack, workflow, assertions.Template.from_stack(stack)


@pytest.fixture(scope="module")
def built():
    return workflow_stack()


@pytest.fixture(scope="module")
def template(built) -> assertions.Template:
    return built[2]


@pytest.fixture(scope="module")
def definition(template) -> Dict[str, Any]:
    return definition_of(template)


def flatten(value: Any) -> str:
    """A CloudFormation string expression as text, references as readable placeholders (``<Ref:Id>``)."""
    return cfn_text(
        value,
        reference=lambda logical_id: f"<Ref:{logical_id}>",
        attribute=lambda parts: f"<GetAtt:{'.'.join(parts)}>",
        other=compact_json,
    )


def state_machines(template: assertions.Template) -> Dict[str, Dict[str, Any]]:
    """The workflow's state machine (``run``) and the cleanup's (``cleanup``)."""
    found = resources_of(template, "AWS::StepFunctions::StateMachine")
    by_type = {r["Properties"]["StateMachineType"]: r for r in found.values()}
    assert len(found) == 2 and set(by_type) == {"STANDARD", "EXPRESS"}, sorted(found)
    return {"run": by_type["STANDARD"], "cleanup": by_type["EXPRESS"]}


def definition_of(template: assertions.Template, which: str = "run") -> Dict[str, Any]:
    state_machine = state_machines(template)[which]
    return json.loads(flatten(state_machine["Properties"]["DefinitionString"]))


def private_subnets(stack: cdk.Stack) -> List[ec2.ISubnet]:
    return list(stack.node.find_child("Network").vpc.private_subnets)


def logical_id(stack: cdk.Stack, construct) -> str:
    return stack.get_logical_id(construct.node.default_child)


def walk(definition: Dict[str, Any], *requests: Dict[str, Any], **options: Any) -> List[Dict[str, Any]]:
    """:func:`~tests.support.workflow_walk.walk`, in the execution :data:`EXECUTION` unless ``execution`` says."""
    return walk_execution(definition, *requests, **{"execution": EXECUTION, **options})


def load_launcher():
    spec = importlib.util.spec_from_file_location("hybrid_cifar10_launch", LAUNCHER)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("which", ["run", "cleanup"])
def test_definition_passes_the_pinned_asl_validator(template, which, tmp_path):
    definition = definition_of(template, which)
    path = tmp_path / "definition.json"
    path.write_text(json.dumps(definition))
    result = subprocess.run(
        [str(ASL_VALIDATOR), "--json-path", str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{NODE.parent}{os.pathsep}{os.environ['PATH']}"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert definition["QueryLanguage"] == "JSONata"


def test_choice_on_the_runtime_and_a_fail_state_naming_the_allowed_values(definition):
    choice = definition["States"]["Choose runtime"]
    assert choice["Type"] == "Choice" and choice["Default"] == "Unknown runtime"
    assert [c["Next"] for c in choice["Choices"]] == ["Check SageMaker request", "Check Kubernetes request"]
    slurm, missing = walk(definition, {"training_runtime": "slurm"}, {"hyperparameters": {}})
    assert slurm["end"] == "Fail" and slurm["error"] == "UnknownRuntime"
    assert slurm["cause"] == "training_runtime must be one of kubernetes, sagemaker; got slurm"
    assert missing["cause"] == "training_runtime must be one of kubernetes, sagemaker; got none", "no default runtime"


def test_sagemaker_branch_runs_create_training_job_sync_with_the_efs_channel(built, definition):
    stack, workflow, _ = built
    task = definition["States"]["Train on SageMaker"]
    assert task["Type"] == "Task" and task["Resource"] == SAGEMAKER
    assert task["Catch"] == [{"ErrorEquals": ["States.ALL"], "Next": "SageMaker training failed"}]
    (run,) = walk(definition, {"training_runtime": "sagemaker", "hyperparameters": {"epochs": "5"}})
    assert run["end"] == "Task" and run["state"] == "Train on SageMaker"
    request = run["calls"][0]["arguments"]
    assert request["TrainingJobName"] == JOB, "<base>-<10 hex digits of the execution name's SHA-256>"
    assert request["RoleArn"] == f"<GetAtt:{stack.get_logical_id(workflow.sagemaker_role.node.default_child)}.Arn>"
    assert request["AlgorithmSpecification"] == {
        "TrainingImage": "123456789012.dkr.ecr.us-west-2.amazonaws.com/cifar10:1",
        "TrainingInputMode": "File",
    }
    assert request["HyperParameters"] == {"epochs": "5"}
    efs_id = next(i for i in resources_of(built[2], "AWS::EFS::FileSystem"))
    assert request["InputDataConfig"] == [
        {
            "ChannelName": "training",
            "InputMode": "File",
            "DataSource": {
                "FileSystemDataSource": {
                    "FileSystemId": f"<Ref:{efs_id}>",
                    "FileSystemType": "EFS",
                    "FileSystemAccessMode": "ro",
                    "DirectoryPath": "/cifar10",
                }
            },
        }
    ]
    bucket = logical_id(stack, workflow.output_bucket)
    assert request["OutputDataConfig"] == {"S3OutputPath": f"s3://<Ref:{bucket}>/sagemaker/"}
    assert request["ResourceConfig"] == {"InstanceType": "ml.m5.xlarge", "InstanceCount": 2, "VolumeSizeInGB": 50}
    group = stack.get_logical_id(workflow.sagemaker_security_group.node.default_child)
    subnets = [flatten(stack.resolve(subnet.subnet_id)) for subnet in private_subnets(stack)]
    assert request["VpcConfig"] == {"SecurityGroupIds": [f"<GetAtt:{group}.GroupId>"], "Subnets": subnets}
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 86400}
    assert request["EnableNetworkIsolation"] is True and request["EnableInterContainerTrafficEncryption"] is True


def test_sagemaker_run_overrides_and_outcomes(definition):
    request = {"training_runtime": "sagemaker", "node_count": 4, "instance_type": "ml.g5.xlarge"}
    done = {
        "TrainingJobName": JOB,
        "TrainingJobStatus": "Completed",
        "ModelArtifacts": {"S3ModelArtifacts": "s3://bucket/sagemaker/cifar10-ddp-1b2c3d4e5f/output/model.tar.gz"},
    }
    (succeeded,) = walk(definition, request, results={"Train on SageMaker": [done]})
    resources = succeeded["calls"][0]["arguments"]["ResourceConfig"]
    assert resources["InstanceType"] == "ml.g5.xlarge" and resources["InstanceCount"] == 4
    assert succeeded["end"] == "Succeed" and succeeded["steps"][-1] == "SageMaker training succeeded"
    assert succeeded["output"] == {
        "runtime": "sagemaker",
        "job_name": JOB,
        "status": "Completed",
        "model_artifacts": done["ModelArtifacts"]["S3ModelArtifacts"],
    }
    cause = json.dumps({"TrainingJobStatus": "Failed", "FailureReason": "AlgorithmError: exit code 2"})
    (failed,) = walk(
        definition, request, results={"Train on SageMaker": [{"Error": "States.TaskFailed", "Cause": cause}]}
    )
    assert failed["end"] == "Fail" and failed["steps"][-1] == "SageMaker training failed"
    assert failed["error"] == "States.TaskFailed" and json.loads(failed["cause"])["FailureReason"].startswith("Algo")


def test_requests_are_checked_with_every_problem_in_one_cause(definition):
    sagemaker, kubernetes, types = walk(
        definition,
        {"training_runtime": "sagemaker", "hyperparameters": {"epochs": 3, "lr": "0.1"}, "node_count": 0},
        {"training_runtime": "kubernetes", "node_count": 3, "instance_type": "ml.g5.xlarge"},
        {"training_runtime": "sagemaker", "hyperparameters": "epochs=3", "instance_type": "ml.m5.large"},
    )
    assert sagemaker["end"] == "Fail" and sagemaker["error"] == "InvalidRequest"
    assert sagemaker["cause"] == (
        "hyperparameters must be strings (as SageMaker requires): epochs; "
        "node_count must be an integer of at least 1 and at most 4; got 0"
    )
    assert kubernetes["cause"] == (
        "node_count must be an integer of at least 1 and at most 2; got 3; "
        "instance_type is a SageMaker setting; the Kubernetes job runs on the node group of m5.xlarge"
    )
    assert types["cause"].startswith("hyperparameters must be an object of string values; instance_type must be one")
    assert types["cause"].endswith("; got ml.m5.large")


def test_a_sagemaker_run_asks_for_at_most_the_instances_and_types_the_stack_allows(definition):
    """Whoever may start an execution may start SageMaker instances: the workflow caps how many and which."""
    (too_many,) = walk(definition, {"training_runtime": "sagemaker", "node_count": 5})
    assert (
        too_many["end"] == "Fail"
        and too_many["cause"] == "node_count must be an integer of at least 1 and at most 4; got 5"
    )
    assert not too_many["calls"], "nothing started"
    _, workflow, template = workflow_stack(
        sagemaker_instance_types=["ml.m5.xlarge", "ml.g5.xlarge"], sagemaker_max_instance_count=8
    )
    narrow = definition_of(template)
    eight, big = walk(
        narrow,
        {"training_runtime": "sagemaker", "node_count": 8, "instance_type": "ml.g5.xlarge"},
        {"training_runtime": "sagemaker", "instance_type": "ml.p4d.24xlarge"},
    )
    assert eight["end"] == "Task" and eight["calls"][0]["arguments"]["ResourceConfig"]["InstanceCount"] == 8
    assert big["end"] == "Fail" and big["cause"] == (
        "instance_type must be one of ml.m5.xlarge, ml.g5.xlarge; got ml.p4d.24xlarge"
    )


@pytest.mark.parametrize(
    "props,problem",
    [
        (
            {"sagemaker_max_instance_count": 1},
            "sagemaker_max_instance_count=1: an integer of at least 2",
        ),
        (
            {"sagemaker_instance_types": ["ml.p4d.24xlarge"]},
            "sagemaker_instance_type='ml.m5.xlarge': a SageMaker training type (ml.*) of the catalog the image "
            "runs on: ml.p4d.24xlarge",
        ),
        (
            {"sagemaker_instance_types": ["ML.M5.XLARGE"]},
            "sagemaker_instance_types='ML.M5.XLARGE': a SageMaker training type (ml.*) of the catalog the image "
            "runs on (did you mean 'ml.m5.xlarge'?)",
        ),
    ],
)
def test_sagemaker_caps_that_contradict_the_defaults_or_the_catalog_are_refused(props, problem):
    with pytest.raises(ConfigurationError) as raised:
        workflow_stack(**props)
    assert any(found.startswith(problem) for found in raised.value.problems), raised.value.problems


def held_job(release: Dict[str, Any]) -> Dict[str, Any]:
    """The TrainJob a release Job carries, as its container reads it: ``HELD_JOB`` after the kubelet's expansion
    (:func:`rehearsal.kubelet_expansion.expand`, with a variable of every name the TrainJob's text holds defined, so
    that an escape that failed would show)."""
    (env,) = release["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env["name"] == "HELD_JOB"
    names = {"TRAINING_JOB_NAME", "VC_TASK_INDEX", "NODE_ZERO", "HOME", "PET_NNODES"}
    return json.loads(expand(env["value"], {name: "<expanded>" for name in names}))


def test_kubernetes_branch_creates_the_release_of_the_runs_trainjob_which_feeds_the_launcher(
    built, definition, tmp_path
):
    request = {"training_runtime": "kubernetes", "hyperparameters": {"epochs": "5", "batch_size": "32"}}
    (run,) = walk(definition, request)
    assert run["steps"] == [
        "Read request",
        "Choose runtime",
        "Check Kubernetes request",
        "Kubernetes request valid?",
        "Render TrainJob",
        "Create release",
    ]
    call = run["calls"][0]["arguments"]
    assert call["ClusterName"] == "existing" and call["Endpoint"] == ENDPOINT
    assert call["CertificateAuthority"] == "Q0VSVElGSUNBVEU="
    assert call["Method"] == "POST" and call["Path"] == "/apis/batch/v1/namespaces/training/jobs"
    release = call["RequestBody"]
    assert release["metadata"]["name"] == f"{JOB}-release"
    assert release["metadata"]["annotations"]["trainium-eks/execution"] == execution_arn(EXECUTION)
    assert release["metadata"]["labels"]["trainium-eks/held-job"] == JOB
    assert release["spec"]["template"]["metadata"]["labels"]["trainium-eks/held-job"] == JOB
    container = release["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][2:] == ["training", f"{JOB}-release"], "the namespace and its own name; no wait"
    assert release["spec"]["activeDeadlineSeconds"] == 86400 + 26400 + 600, "run, wait for nodes, program's margin"
    job = held_job(release)
    assert job["metadata"]["name"] == JOB
    assert job["metadata"]["labels"]["app.kubernetes.io/instance"] == job["metadata"]["name"]
    assert job["spec"]["trainer"]["numNodes"] == 2
    env = {item["name"]: item["value"] for item in job["spec"]["trainer"]["env"]}
    assert json.loads(env["TRAINING_HYPERPARAMETERS"]) == request["hyperparameters"]
    assert env["TRAINING_JOB_NAME"] == job["metadata"]["name"]
    assert env["TRAINING_RUN_ID"] == execution_arn(EXECUTION)
    validate_objects([release, job], tmp_path)

    launcher = load_launcher()
    contract = {"PET_NNODES": "2", "PET_NODE_RANK": "1", "PET_MASTER_ADDR": "m", "PET_NPROC_PER_NODE": "1", **env}
    command = job["spec"]["trainer"]["command"][2].replace("${TRAINING_JOB_NAME}", env["TRAINING_JOB_NAME"])
    words = shlex.split(command)
    script_args = words[words.index("--") + 1 :]
    launch = launcher.kubernetes_launch(contract, script="train_cifar10.py", script_args=script_args)
    words = launch.command[launch.command.index("train_cifar10.py") + 1 :]
    assert words == [
        "--data-dir",
        "/data/cifar10",
        "--output-dir",
        f"/data/output/{job['metadata']['name']}",
        "--epochs",
        "5",
        "--batch-size",
        "32",
    ], "the launcher turns the run's hyperparameters into the script's arguments"


def listed(*conditions, execution=EXECUTION, **metadata):
    """The answer of the list of the run's TrainJob (by name), once the release of ``execution`` has created it."""
    annotations = {"trainium-eks/execution": execution_arn(execution)}
    item = {
        "metadata": {"name": JOB, "annotations": annotations, **metadata},
        "status": {"conditions": list(conditions)},
    }
    return {"ResponseBody": {"items": [item]}, "StatusCode": 200}


NOT_CREATED = {"ResponseBody": {"items": []}, "StatusCode": 200}
"""The answer of the list before the release has created the TrainJob."""


def release_reading(*conditions):
    return {"ResponseBody": {"status": {"active": 1, "conditions": list(conditions)}}, "StatusCode": 200}


def test_kubernetes_branch_ends_with_the_trainjob_or_its_failed_release(definition):
    status = definition["States"]["Read TrainJob"]
    assert status["Resource"] == EKS_CALL and status["Arguments"]["Method"] == "GET"
    assert definition["States"]["Wait for TrainJob"]["Seconds"] == 60
    request = {"training_runtime": "kubernetes"}
    created = {"ResponseBody": {}, "StatusCode": 201}
    running = listed({"type": "Created", "status": "True", "reason": "JobsCreationSucceeded", "message": "ok"})
    complete = listed({"type": "Complete", "status": "True", "reason": "JobsCompleted", "message": "done"})
    failed = listed({"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "exit 2"})
    unauthorized = {"Error": "EKS.403", "Cause": '{"StatusCode": 403, "StatusText": "Forbidden"}'}
    deleted = {"ResponseBody": {"status": "Success"}, "StatusCode": 200}
    holding = release_reading()
    gave_up = release_reading(
        {"type": "Failed", "status": "True", "reason": "PodFailurePolicy", "message": "exit code 3"}
    )
    done = release_reading({"type": "Complete", "status": "True"})
    ok, bad, forbidden, stuck, never, stalled, gone, starved = [
        walk(
            definition,
            request,
            results={
                "Create release": [created],
                "Read TrainJob": readings,
                "Read release": releases,
                "Delete release": [deleted],
            },
        )[0]
        for readings, releases in (
            ([NOT_CREATED, running, complete], [holding]),
            ([running, failed], [holding]),
            ([unauthorized], [holding]),
            ([running], [holding]),
            ([NOT_CREATED], [holding, holding, gave_up]),
            ([running, running, NOT_CREATED], [gave_up]),
            ([NOT_CREATED], [done, done]),
            ([NOT_CREATED], [holding]),
        )
    ]
    assert ok["end"] == "Succeed" and ok["steps"].count("Read TrainJob") == 3
    assert ok["steps"].count("Read release") == 1, "read only while the TrainJob is not there yet"
    lookup = ok["calls"][1]["arguments"]
    assert lookup["Path"] == "/apis/trainer.kubeflow.org/v1alpha1/namespaces/training/trainjobs"
    assert lookup["QueryParameters"] == {"fieldSelector": [f"metadata.name={JOB}"]}
    assert ok["output"]["runtime"] == "kubernetes" and ok["output"]["job_name"] == JOB
    assert bad["end"] == "Fail" and bad["error"] == "TrainJobFailed"
    assert bad["cause"] == f"TrainJob {JOB}: BackoffLimitExceeded: exit 2"
    assert forbidden["end"] == "Fail" and forbidden["error"] == "EKS.403"
    assert stuck["end"] == "Fail" and stuck["error"] == "MaxRuntimeExceeded"
    assert stuck["steps"].count("Read TrainJob") == 1440, "24 h of one-minute polls"
    assert stuck["cause"] == f"TrainJob {JOB} did not finish within 86400 seconds; it was deleted with its release"
    delete = stuck["calls"][-1]
    assert delete["state"] == "Delete release" and delete["arguments"]["Method"] == "DELETE"
    assert delete["arguments"]["Path"] == f"/apis/batch/v1/namespaces/training/jobs/{JOB}-release"
    assert delete["arguments"]["QueryParameters"] == {"propagationPolicy": ["Background"]}, "the TrainJob goes too"
    assert never["end"] == "Fail" and never["error"] == "ReleaseFailed"
    assert never["steps"].count("Read release") == 3 and never["calls"][-1]["state"] == "Read release"
    assert never["cause"] == (
        f"job/{JOB}-release, which holds the nodes of TrainJob {JOB} and creates it, failed (PodFailurePolicy: "
        "exit code 3) before creating the TrainJob: its nodes could not be held; its log says why: kubectl -n "
        f"training logs job/{JOB}-release"
    )
    assert stalled["error"] == "ReleaseFailed" and "after the TrainJob had run: a restart" in stalled["cause"]
    assert gone["end"] == "Fail" and gone["error"] == "TrainJobDeleted" and gone["steps"].count("Read release") == 2
    assert starved["end"] == "Fail" and starved["error"] == "MaxRuntimeExceeded"
    assert starved["steps"].count("Read TrainJob") == 440, "7 h 20 min of one-minute polls without a TrainJob"
    assert starved["cause"] == (
        f"the release of TrainJob {JOB} did not create it within 26400 seconds of waiting for nodes; it was deleted"
    )


def test_only_the_runs_own_trainjob_counts_and_not_while_it_is_being_deleted(definition):
    """A TrainJob of the run's name that another execution's release (or a person) created, or the run's own that
    its release is taking back after a stall, is not the run's TrainJob: the run goes on waiting for its release."""
    other = listed({"type": "Complete", "status": "True"}, execution="someone-else")
    leaving = listed({"type": "Failed", "status": "True"}, deletionTimestamp="2026-12-01T10:05:00Z")
    complete = listed({"type": "Complete", "status": "True"})
    for reading in (other, leaving):
        (run,) = walk(
            definition,
            {"training_runtime": "kubernetes"},
            results={
                "Create release": [{"StatusCode": 201}],
                "Read TrainJob": [reading, complete],
                "Read release": [release_reading()],
            },
        )
        assert run["end"] == "Succeed" and run["steps"].count("Read release") == 1, reading


def test_default_runtime_and_options_reach_the_definition(tmp_path):
    _, _, template = workflow_stack(
        default_runtime="kubernetes",
        network_isolation=False,
        inter_container_encryption=False,
        max_runtime=cdk.Duration.hours(2),
        poll_interval=cdk.Duration.seconds(30),
        sagemaker_instance_type="ml.g5.12xlarge",
        output_prefix="models/cifar10",
        data_directory="/datasets/cifar10",
    )
    definition = definition_of(template)
    (run,) = walk(definition, {})
    assert run["state"] == "Create release", "requests without training_runtime run on the default"
    (sagemaker,) = walk(definition, {"training_runtime": "sagemaker"})
    request = sagemaker["calls"][0]["arguments"]
    assert request["EnableNetworkIsolation"] is False and request["EnableInterContainerTrafficEncryption"] is False
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 7200}
    assert request["ResourceConfig"]["InstanceType"] == "ml.g5.12xlarge"
    assert request["OutputDataConfig"]["S3OutputPath"].endswith("/models/cifar10/")
    assert request["InputDataConfig"][0]["DataSource"]["FileSystemDataSource"]["DirectoryPath"] == "/datasets/cifar10"
    assert definition["States"]["Wait for TrainJob"]["Seconds"] == 30
    assert "$polls >= 240" in json.dumps(definition["States"]["TrainJob finished?"])


def statements_of(template: assertions.Template, stack: cdk.Stack, role) -> List[Dict[str, Any]]:
    role_id = stack.get_logical_id(role.node.default_child)
    found = []
    for policy in resources_of(template, "AWS::IAM::Policy").values():
        if {"Ref": role_id} in policy["Properties"]["Roles"]:
            found += policy["Properties"]["PolicyDocument"]["Statement"]
    return found


def normalized(statement: Dict[str, Any]) -> Dict[str, Any]:
    actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
    resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
    return {
        "Sid": statement.get("Sid"),
        "Action": sorted(actions),
        "Resource": [flatten(r) for r in resources],
        "Condition": statement.get("Condition"),
    }


def test_state_machine_role_has_exactly_its_statements(built):
    stack, workflow, template = built
    statements = [normalized(s) for s in statements_of(template, stack, workflow.role)]
    assert all(s["Effect"] == "Allow" for s in statements_of(template, stack, workflow.role))
    job_role = stack.get_logical_id(workflow.sagemaker_role.node.default_child)
    selected_name = json.dumps(
        {"Fn::Select": [6, {"Fn::Split": [":", {"Ref": logical_id(stack, workflow.state_machine)}]}]},
        separators=(",", ":"),
    )
    expected = [
        {
            "Sid": None,
            "Action": ["states:DescribeExecution"],
            "Resource": [f"arn:aws:states:us-west-2:123456789012:execution:{selected_name}:*"],
            "Condition": None,
        },
        {
            "Sid": "TrainingJobs",
            "Action": ["sagemaker:CreateTrainingJob", "sagemaker:DescribeTrainingJob", "sagemaker:StopTrainingJob"],
            "Resource": ["arn:aws:sagemaker:us-west-2:123456789012:training-job/cifar10-ddp-*"],
            "Condition": None,
        },
        {"Sid": "TrainingJobTags", "Action": ["sagemaker:ListTags"], "Resource": ["*"], "Condition": None},
        {
            "Sid": "PassJobRole",
            "Action": ["iam:PassRole"],
            "Resource": [f"<GetAtt:{job_role}.Arn>"],
            "Condition": {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
        },
        {
            "Sid": "TrainingJobEvents",
            "Action": ["events:DescribeRule", "events:PutRule", "events:PutTargets"],
            "Resource": [
                "arn:aws:events:us-west-2:123456789012:rule/StepFunctionsGetEventsForSageMakerTrainingJobsRule"
            ],
            "Condition": None,
        },
        {
            "Sid": None,
            "Action": [
                "logs:CreateLogDelivery",
                "logs:DeleteLogDelivery",
                "logs:DescribeLogGroups",
                "logs:DescribeResourcePolicies",
                "logs:GetLogDelivery",
                "logs:ListLogDeliveries",
                "logs:PutResourcePolicy",
                "logs:UpdateLogDelivery",
                "xray:GetSamplingRules",
                "xray:GetSamplingTargets",
                "xray:PutTelemetryRecords",
                "xray:PutTraceSegments",
            ],
            "Resource": ["*"],
            "Condition": None,
        },
    ]
    assert sorted(statements, key=json.dumps) == sorted(expected, key=json.dumps)
    role = template.to_json()["Resources"][stack.get_logical_id(workflow.role.node.default_child)]
    machines = "arn:aws:states:us-west-2:123456789012:stateMachine"
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"] == [
        {
            "Action": "sts:AssumeRole",
            "Condition": {
                "StringEquals": {"aws:SourceAccount": "123456789012"},
                "ArnEquals": {"aws:SourceArn": [f"{machines}:{workflow_name}", f"{machines}:{cleanup_name}"]},
            },
            "Effect": "Allow",
            "Principal": {"Service": "states.amazonaws.com"},
        }
    ]
    assert "ManagedPolicyArns" not in role["Properties"]


def test_the_state_machines_have_the_names_the_role_trusts_without_a_reference_to_them(built):
    """The trust names both state machines (the workflow's and the cleanup's, which share the role) by ARN, built from
    the stack's name: a Ref to a state machine from its own role would be a circular dependency."""
    stack, workflow, template = built
    names = {
        machine["Properties"]["StateMachineName"]
        for machine in resources_of(template, "AWS::StepFunctions::StateMachine").values()
    }
    assert names == {workflow_name, cleanup_name}
    assert workflow.state_machine.node.default_child.state_machine_name == workflow_name
    assert all(len(name) <= MAX_STATE_MACHINE_NAME for name in names)
    assert state_machine_name(stack, "Hybrid/Workflow") == workflow_name
    role = template.to_json()["Resources"][stack.get_logical_id(workflow.role.node.default_child)]
    assert "Ref" not in json.dumps(role["Properties"]["AssumeRolePolicyDocument"])


workflow_name = "Hybrid-Workflow-1cda1a45"
cleanup_name = "Hybrid-Cleanup-3550419a"


def test_sagemaker_job_role_has_exactly_its_statements(built):
    stack, workflow, template = built
    statements = [normalized(s) for s in statements_of(template, stack, workflow.sagemaker_role)]
    repository = logical_id(stack, stack.node.find_child("Repository"))
    bucket = logical_id(stack, workflow.output_bucket)
    vpc = stack.get_logical_id(stack.node.find_child("Network").cfn_vpc)
    vpc_arn = {"Fn::Join": ["", ["arn:aws:ec2:us-west-2:123456789012:vpc/", {"Ref": vpc}]]}
    assert sorted(SAGEMAKER_VPC_ACTIONS) == sorted(
        SAGEMAKER_ENI_ACTIONS + SAGEMAKER_ENI_PERMISSION_ACTIONS + SAGEMAKER_VPC_DESCRIBE_ACTIONS
    )
    expected = [
        {
            "Sid": None,
            "Action": ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
            "Resource": [f"<GetAtt:{repository}.Arn>"],
            "Condition": None,
        },
        {"Sid": None, "Action": ["ecr:GetAuthorizationToken"], "Resource": ["*"], "Condition": None},
        {
            "Sid": "TrainingLogs",
            "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"],
            "Resource": ["arn:aws:logs:us-west-2:123456789012:log-group:/aws/sagemaker/TrainingJobs:*"],
            "Condition": None,
        },
        {
            "Sid": "TrainingMetrics",
            "Action": ["cloudwatch:PutMetricData"],
            "Resource": ["*"],
            "Condition": {"StringEquals": {"cloudwatch:namespace": "/aws/sagemaker/TrainingJobs"}},
        },
        {
            "Sid": "TrainingNetworkInterfaces",
            "Action": sorted(SAGEMAKER_ENI_ACTIONS),
            "Resource": ["*"],
            "Condition": {"ArnEquals": {"ec2:Vpc": vpc_arn}},
        },
        {
            "Sid": "TrainingNetworkDescriptions",
            "Action": sorted(SAGEMAKER_ENI_PERMISSION_ACTIONS + SAGEMAKER_VPC_DESCRIBE_ACTIONS),
            "Resource": ["*"],
            "Condition": None,
        },
        {
            "Sid": "ModelOutput",
            "Action": ["s3:AbortMultipartUpload", "s3:PutObject"],
            "Resource": [f"<GetAtt:{bucket}.Arn>/sagemaker/*"],
            "Condition": None,
        },
    ]
    assert sorted(statements, key=json.dumps) == sorted(expected, key=json.dumps)
    role = template.to_json()["Resources"][stack.get_logical_id(workflow.sagemaker_role.node.default_child)]
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"] == [
        {
            "Action": "sts:AssumeRole",
            "Condition": {
                "StringEquals": {"aws:SourceAccount": "123456789012"},
                "ArnLike": {"aws:SourceArn": "arn:aws:sagemaker:us-west-2:123456789012:*"},
            },
            "Effect": "Allow",
            "Principal": {"Service": "sagemaker.amazonaws.com"},
        }
    ]


def test_access_entry_names_the_group_and_the_role_chart_allows_releases_and_reading_trainjobs_only(built, tmp_path):
    stack, workflow, template = built
    entry = only(template, "AWS::EKS::AccessEntry")["Properties"]
    assert entry == {
        "ClusterName": "existing",
        "PrincipalArn": {"Fn::GetAtt": [stack.get_logical_id(workflow.role.node.default_child), "Arn"]},
        "KubernetesGroups": ["trainium-eks:workflow"],
        "Type": "STANDARD",
    }, "no access policy: the Role below is all the state machine may do"
    objects = workflow.access_chart.manifests()
    validate_objects(objects, tmp_path)
    role, binding = objects
    assert role["kind"] == "Role" and role["metadata"]["namespace"] == "training"
    assert role["rules"] == [
        {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs"], "verbs": ["list"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "get", "delete"]},
    ]
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "trainium-eks:workflow"}
    ]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert sorted(workflow.access.manifests) == [
        "Role.training.hybrid-workflow",
        "RoleBinding.training.hybrid-workflow",
    ]


def test_the_state_machine_comes_after_what_its_runs_releases_need(built):
    """The release service account, the Role that creates TrainJobs, the release program and the held jobs' admission
    policy: a run started as soon as the state machine exists finds them (the workflow's own JobSequence here; the
    stack's in KubeflowTraining)."""
    stack, workflow, template = built
    needed = workflow.jobs.release_prerequisites("training", "trainjob")
    machine = template.to_json()["Resources"][logical_id(stack, workflow.state_machine)]
    applied = [
        resource
        for chart in needed
        for resource in chart.node.find_all()
        if isinstance(resource, cdk.CfnResource) and resource.cfn_resource_type.startswith("Custom::AWSCDK-EKS")
    ]
    assert len(applied) >= 3
    for resource in applied:
        assert stack.get_logical_id(resource) in machine["DependsOn"], resource.node.path
    assert {chart.chart.__class__.__name__ for chart in needed} == {
        "JobReleaseAccessChart",
        "JobReleaseCreatorChart",
        "ReleaseProgramChart",
        "HeldJobAdmissionChart",
        "PeersPolicyAdmissionChart",
    }


def test_sagemaker_security_group_is_admitted_by_efs_and_by_itself(built):
    stack, workflow, template = built
    group = stack.get_logical_id(workflow.sagemaker_security_group.node.default_child)
    efs_group = stack.get_logical_id(stack.node.find_child("Efs").security_group.node.default_child)
    rules = [r["Properties"] for r in resources_of(template, "AWS::EC2::SecurityGroupIngress").values()]
    assert {
        "IpProtocol": "tcp",
        "FromPort": 2049,
        "ToPort": 2049,
        "GroupId": {"Fn::GetAtt": [efs_group, "GroupId"]},
        "SourceSecurityGroupId": {"Fn::GetAtt": [group, "GroupId"]},
        "Description": "NFS clients of the EFS file system (TCP 2049)",
    } in rules
    peers = [r for r in rules if r["GroupId"] == {"Fn::GetAtt": [group, "GroupId"]}]
    assert len(peers) == 1 and peers[0]["IpProtocol"] == "-1"
    assert peers[0]["SourceSecurityGroupId"] == {"Fn::GetAtt": [group, "GroupId"]}


def test_output_bucket_is_encrypted_tls_only_private_and_retained(built):
    stack, workflow, template = built
    bucket = template.to_json()["Resources"][logical_id(stack, workflow.output_bucket)]
    assert bucket["DeletionPolicy"] == "Retain" and bucket["UpdateReplacePolicy"] == "Retain"
    props = bucket["Properties"]
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"] == [
        {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
    ]
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    policy = only(template, "AWS::S3::BucketPolicy")["Properties"]["PolicyDocument"]["Statement"]
    assert any(s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in policy)


def test_state_machine_logs_everything_and_traces(built):
    stack, workflow, template = built
    props = state_machines(template)["run"]["Properties"]
    assert props["StateMachineType"] == "STANDARD"
    assert props["TracingConfiguration"] == {"Enabled": True}
    logging = props["LoggingConfiguration"]
    assert logging["Level"] == "ALL" and logging["IncludeExecutionData"] is True
    log_group = template.to_json()["Resources"][stack.get_logical_id(workflow.log_group.node.default_child)]
    assert log_group["Properties"]["RetentionInDays"] == 365 and log_group["DeletionPolicy"] == "Retain"


def test_a_private_only_cluster_is_refused():
    with pytest.raises(ConfigurationError) as raised:
        workflow_stack(endpoint_access=eks.EndpointAccess.PRIVATE)
    (problem,) = raised.value.problems
    assert "a cluster with a public API endpoint" in problem and "connect-eks.html" in problem


def test_an_imported_cluster_needs_its_endpoint_access_and_endpoint():
    app = new_app()
    stack = cdk.Stack(app, "S", env=ENV)
    network, cluster = imported_cluster(stack)
    efs = EfsStorage(stack, "Efs", vpc=network.vpc)
    with pytest.raises(ConfigurationError) as raised:
        HybridTrainingWorkflow(
            stack,
            "Workflow",
            cluster=cluster,
            train_job=train_job(),
            image_repository=ecr.Repository(stack, "Repository"),
            efs=efs,
            vpc=network.vpc,
            subnets=list(network.vpc.private_subnets),
        )
    problems = raised.value.problems
    assert any("a cluster with cluster_endpoint" in p for p in problems)
    assert any("a cluster with cluster_certificate_authority_data" in p for p in problems)
    assert any(p.startswith("endpoint_access=None: the imported cluster's eks.EndpointAccess") for p in problems)


def test_every_bad_input_is_reported_in_one_error():
    app = new_app()
    other = cdk.Stack(app, "Other", env=ENV)
    foreign = s3.Bucket(other, "Foreign")
    with pytest.raises(ConfigurationError) as raised:
        workflow_stack(
            train_job=train_job(launcher="torchrun", env={"TRAINING_HYPERPARAMETERS": "{}"}, namespace="jobs"),
            image_repository="cifar10",
            subnets=[],
            data_directory="cifar10",
            sagemaker_instance_type="ml.m5.large",
            sagemaker_instance_count=0,
            volume_size_gib=0,
            max_runtime=cdk.Duration.days(30),
            poll_interval=cdk.Duration.seconds(5),
            output_bucket=foreign,
            output_prefix="s3://elsewhere/models",
            default_runtime="slurm",
            network_isolation="yes",
            kubernetes_group="system:masters",
            apply_after="namespace",
        )
    problems = "\n".join(raised.value.problems)
    for expected in (
        "launcher='direct'",
        "a TrainJob without the env TRAINING_HYPERPARAMETERS",
        "a TrainJob in the namespace 'training'",
        "image_repository='cifar10': an ecr.IRepository or the ecr_assets.DockerImageAsset",
        "subnets=[]: a non-empty list of ec2.ISubnet with EFS mount targets",
        "data_directory='cifar10'",
        "sagemaker_instance_type='ml.m5.large': a SageMaker training type (ml.*) of the catalog",
        "sagemaker_instance_count=0",
        "volume_size_gib=0",
        "max_runtime='30 days'",
        "poll_interval='5 seconds'",
        "output_bucket=",
        "output_prefix='s3://elsewhere/models': a key prefix inside the stack's bucket",
        "default_runtime='slurm': one of kubernetes, sagemaker",
        "network_isolation='yes'",
        "kubernetes_group='system:masters'",
        "apply_after='namespace'",
    ):
        assert expected in problems, f"{expected!r} not in:\n{problems}"
    assert len(raised.value.problems) == 17


def test_a_poll_interval_that_would_overflow_the_execution_history_is_refused():
    with pytest.raises(ConfigurationError) as raised:
        workflow_stack(max_runtime=cdk.Duration.days(7), poll_interval=cdk.Duration.seconds(60))
    (problem,) = raised.value.problems
    assert problem.startswith("poll_interval='60 s': at least 245 s with max_runtime 604800 s")


def cluster_stack(endpoint_access: eks.EndpointAccess = eks.EndpointAccess.PUBLIC_AND_PRIVATE):
    app = new_app()
    stack = cdk.Stack(app, "KubeflowTraining", env=ENV)
    network = TrainingNetwork(stack, "Network", node_az_id="usw2-az4")
    cluster = TrainingCluster(
        stack,
        "Cluster",
        vpc=network.vpc,
        efs_csi_driver=True,
        endpoint_access=endpoint_access,
        admin_role_arn="arn:aws:iam::123456789012:role/Admin",
    )
    efs = EfsStorage(stack, "Efs", vpc=network.vpc, client_security_groups=[cluster.cluster.cluster_security_group])
    images = TrainingImageRepository(stack, "Images", image_directory=str(REPO / "images" / "cifar10-ddp"))
    workflow = HybridTrainingWorkflow(
        stack,
        "Workflow",
        cluster=cluster,
        train_job=train_job(image=images.image_uri),
        image_repository=images.image_asset,
        efs=efs,
        vpc=network.vpc,
        subnets=list(network.vpc.private_subnets),
    )
    return app, stack, workflow


@pytest.fixture(scope="module")
def real_cluster():
    return cluster_stack()


def test_on_a_training_cluster_the_endpoint_is_read_and_the_asset_repository_granted(real_cluster):
    _, stack, workflow = real_cluster
    template = assertions.Template.from_stack(stack)
    statements = [normalized(s) for s in statements_of(template, stack, workflow.sagemaker_role)]
    pull = next(s for s in statements if "ecr:BatchGetImage" in s["Action"])
    assert pull["Resource"] == [
        "arn:aws:ecr:us-west-2:123456789012:repository/cdk-hnb659fds-container-assets-123456789012-us-west-2"
    ], "a DockerImageAsset lives in the bootstrap's asset repository"
    (run,) = walk(definition_of(template), {"training_runtime": "sagemaker"})
    image = run["calls"][0]["arguments"]["AlgorithmSpecification"]["TrainingImage"]
    assert image.startswith("123456789012.dkr.ecr.us-west-2.") and "/cdk-hnb659fds-container-assets-" in image


def test_a_private_training_cluster_is_refused_and_restricted_cidrs_warn():
    with pytest.raises(ConfigurationError) as raised:
        cluster_stack(eks.EndpointAccess.PRIVATE)
    assert "a cluster with a public API endpoint" in raised.value.problems[0]
    _, stack, _ = cluster_stack(eks.EndpointAccess.PUBLIC_AND_PRIVATE.only_from("203.0.113.0/24"))
    warnings = assertions.Annotations.from_stack(stack).find_warning("*", assertions.Match.string_like_regexp(".*"))
    assert any("admits only 203.0.113.0/24" in str(w.entry.data) for w in warnings)


def test_cfn_lint_finds_no_errors(real_cluster, tmp_path):
    app, stack, _ = real_cluster
    path = tmp_path / "template.json"
    path.write_text(json.dumps(assertions.Template.from_stack(stack).to_json()))
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "cfn-lint"),
            "--regions",
            "us-west-2",
            "--ignore-checks",
            "W3005",
            "--",
            str(path),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[:4000]


def test_cdk_nag_has_no_unacknowledged_finding():
    app, _, workflow = cluster_stack()
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    try:
        app.synth()
    except RuntimeError as error:
        report = Path(app.outdir, "validation-report.json")
        pytest.fail(f"cdk-nag findings: {error}\n{report.read_text() if report.exists() else ''}")
    reasons = [
        entry.data
        for construct in workflow.node.find_all()
        for entry in construct.node.metadata
        if entry.type == cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY
    ]
    assert reasons and all(len(reason) >= 80 for data in reasons for reason in data.values())


def test_uuid_execution_names_give_distinct_job_names(definition):
    names = [uuid.uuid4() for _ in range(3)]
    runs = [walk(definition, {"training_runtime": "kubernetes"}, execution=str(name))[0] for name in names]
    jobs = [run["vars"]["job_name"] for run in runs]
    assert jobs == [f"cifar10-ddp-{hashlib.sha256(str(name).encode()).hexdigest()[:10]}" for name in names]
    (odd,) = walk(definition, {"training_runtime": "kubernetes"}, execution="___")
    assert odd["vars"]["job_name"] == f"cifar10-ddp-{hashlib.sha256(b'___').hexdigest()[:10]}", "no letters needed"


def test_a_trainjob_ends_by_itself_at_the_workflows_max_runtime(definition, tmp_path):
    (run,) = walk(definition, {"training_runtime": "kubernetes"})
    job = held_job(run["calls"][0]["arguments"]["RequestBody"])
    assert job["spec"]["activeDeadlineSeconds"] == 86400, "the Trainer fails it and deletes its JobSet then"
    validate_objects([job], tmp_path)
    _, _, template = workflow_stack(max_runtime=cdk.Duration.hours(2))
    (run,) = walk(definition_of(template), {"training_runtime": "kubernetes"})
    release = run["calls"][0]["arguments"]["RequestBody"]
    assert held_job(release)["spec"]["activeDeadlineSeconds"] == 7200
    assert release["spec"]["activeDeadlineSeconds"] == 7200 + 26400 + 600


@pytest.fixture(scope="module")
def cleanup(template) -> Dict[str, Any]:
    return definition_of(template, "cleanup")


def ended(status: str, error: str = "", execution: str = EXECUTION) -> Dict[str, Any]:
    """A "Step Functions Execution Status Change" event of the workflow (Step Functions developer guide,
    cw-events.html: ``detail`` carries the execution's ARN, name, status, error and cause)."""
    detail = {"executionArn": execution_arn(execution), "name": execution, "status": status}
    return {
        "detail-type": "Step Functions Execution Status Change",
        "detail": detail | ({"error": error} if error else {}),
    }


def release_of(execution: str) -> Dict[str, Any]:
    """The answer of a GET of a release Job created by ``execution``."""
    return {
        "StatusCode": 200,
        "ResponseBody": {"metadata": {"annotations": {"trainium-eks/execution": execution_arn(execution)}}},
    }


DELETED = {"ResponseBody": {"status": "Success"}, "StatusCode": 200}

CONFIRM = "Confirm the run ended badly"


@pytest.fixture(scope="module")
def workflow_arn(built) -> str:
    """The workflow's ARN as the cleanup's definition names it (its ``Ref``, as :func:`flatten` writes one)."""
    stack, workflow, _ = built
    return f"<Ref:{logical_id(stack, workflow.state_machine)}>"


def described(workflow_arn: str, status: str, error: str = "") -> Dict[str, Any]:
    """Step Functions' answer to DescribeExecution of a workflow execution (camelCase, as its API names the fields)."""
    return {"status": status, "stateMachineArn": workflow_arn} | ({"error": error} if error else {})


def test_a_run_that_ended_badly_has_its_release_deleted_with_its_trainjob_jobset_and_pods(cleanup, workflow_arn):
    for event in (ended("TIMED_OUT"), ended("ABORTED"), ended("FAILED", "EKS.403"), ended("FAILED", "States.ALL")):
        detail = event["detail"]
        results = {
            CONFIRM: [described(workflow_arn, detail["status"], detail.get("error", ""))],
            "Read release of the run": [release_of(EXECUTION)],
            "Delete release of the run": [DELETED],
        }
        (run,) = walk(cleanup, event, results=results)
        assert run["end"] == "Succeed" and run["steps"][-1] == "Deleted", event
        confirm, read, delete = run["calls"]
        assert confirm["arguments"] == {"ExecutionArn": execution_arn(EXECUTION)}
        path = f"/apis/batch/v1/namespaces/training/jobs/{JOB}-release"
        assert read["arguments"]["Method"] == "GET" and read["arguments"]["Path"] == path
        arguments = delete["arguments"]
        assert arguments["Method"] == "DELETE" and arguments["ClusterName"] == "existing"
        assert arguments["Endpoint"] == ENDPOINT and arguments["Path"] == path
        assert arguments["QueryParameters"] == {"propagationPolicy": ["Background"]}


def test_the_cleanup_deletes_only_the_release_its_own_execution_created(definition, cleanup, workflow_arn):
    """Should a release of the run's name exist already (another execution's, should their digests agree, or one made
    by hand), the run's create fails, and its cleanup must leave that release (and its TrainJob) alone."""
    first, second = "exp-1-lr0001", "exp1lr0001"
    (run,) = walk(definition, {"training_runtime": "kubernetes"}, execution=first)
    job = run["calls"][0]["arguments"]["RequestBody"]
    assert job["metadata"]["annotations"]["trainium-eks/execution"] == execution_arn(first)
    results = {
        CONFIRM: [described(workflow_arn, "FAILED", "EKS.409")],
        "Read release of the run": [release_of(first)],
        "Delete release of the run": [DELETED],
    }
    (kept,) = walk(cleanup, ended("FAILED", "EKS.409", execution=second), results=results)
    assert kept["steps"][-1] == "Release of another run kept" and len(kept["calls"]) == 2
    assert kept["output"]["created_by"] == execution_arn(first)
    unannotated = {"StatusCode": 200, "ResponseBody": {"metadata": {"name": job["metadata"]["name"]}}}
    results["Read release of the run"] = [unannotated]
    (kept,) = walk(cleanup, ended("ABORTED", execution=second), results=results)
    assert kept["steps"][-1] == "Release of another run kept", "a Job made by hand is not the run's"


def test_the_cleanup_computes_the_same_job_name_as_the_run(definition, cleanup, workflow_arn):
    execution = str(uuid.uuid4())
    (run,) = walk(definition, {"training_runtime": "kubernetes"}, execution=execution)
    created = run["calls"][0]["arguments"]["RequestBody"]["metadata"]["name"]
    results = {
        CONFIRM: [described(workflow_arn, "ABORTED")],
        "Read release of the run": [release_of(execution)],
        "Delete release of the run": [DELETED],
    }
    (deletion,) = walk(cleanup, ended("ABORTED", execution=execution), results=results)
    assert deletion["calls"][-1]["arguments"]["Path"].endswith(f"/jobs/{created}")


def test_a_failed_trainjob_or_release_is_kept_for_its_logs_and_nothing_to_delete_is_no_error(cleanup, workflow_arn):
    for error in ("TrainJobFailed", "ReleaseFailed"):
        results = {CONFIRM: [described(workflow_arn, "FAILED", error)]}
        (kept,) = walk(cleanup, ended("FAILED", error), results=results)
        assert kept["end"] == "Succeed" and kept["steps"][-1] == "Release kept for its logs"
        assert [call["state"] for call in kept["calls"]] == [CONFIRM], "nothing read, nothing deleted"
    missing = {"Error": "EKS.404", "Cause": '{"StatusCode": 404, "StatusText": "Not Found"}'}
    results = {CONFIRM: [described(workflow_arn, "FAILED", "States.TaskFailed")], "Read release of the run": [missing]}
    (sagemaker_run,) = walk(cleanup, ended("FAILED", "States.TaskFailed"), results=results)
    assert sagemaker_run["end"] == "Succeed" and sagemaker_run["steps"][-1] == "Nothing deleted"
    assert sagemaker_run["output"]["Error"] == "EKS.404" and len(sagemaker_run["calls"]) == 2


def test_a_cleanup_started_by_hand_deletes_nothing_of_a_running_run_and_keeps_by_the_real_error(cleanup, workflow_arn):
    """Anyone allowed to start the cleanup may give it any input: what it deletes and keeps follows what Step
    Functions answers about the execution, not the input."""
    results = {
        CONFIRM: [described(workflow_arn, "RUNNING")],
        "Read release of the run": [release_of(EXECUTION)],
        "Delete release of the run": [DELETED],
    }
    (forged,) = walk(cleanup, ended("ABORTED"), results=results)
    assert forged["steps"][-1] == "Run not ended badly" and forged["output"]["status"] == "RUNNING"
    assert {call["state"] for call in forged["calls"]} == {CONFIRM}, "asked again, never read nor deleted"
    assert forged["steps"].count("Wait for the run's status") == 5, "six looks in all"
    results[CONFIRM] = [described(workflow_arn, "SUCCEEDED")]
    (succeeded,) = walk(cleanup, ended("FAILED"), results=results)
    assert succeeded["steps"][-1] == "Run not ended badly"
    results[CONFIRM] = [described(workflow_arn, "FAILED", "TrainJobFailed")]
    (kept,) = walk(cleanup, ended("FAILED"), results=results)
    assert kept["steps"][-1] == "Release kept for its logs", "the error Step Functions answers, not the input's"
    results[CONFIRM] = [{"status": "FAILED", "stateMachineArn": "arn:aws:states:us-west-2:1:stateMachine:Other"}]
    (other,) = walk(cleanup, ended("FAILED"), results=results)
    assert other["steps"][-1] == "Run not ended badly", "another state machine's execution"


def test_a_status_that_reads_running_just_after_the_event_is_asked_again_until_it_has_ended(cleanup, workflow_arn):
    """DescribeExecution is eventually consistent: right after the event the answer may still say RUNNING."""
    results = {
        CONFIRM: [described(workflow_arn, "RUNNING"), {"Status": "TIMED_OUT", "StateMachineArn": workflow_arn}],
        "Read release of the run": [release_of(EXECUTION)],
        "Delete release of the run": [DELETED],
    }
    (run,) = walk(cleanup, ended("TIMED_OUT"), results=results)
    assert run["steps"][-1] == "Deleted" and run["steps"].count("Wait for the run's status") == 1
    assert [call["state"] for call in run["calls"]][:2] == [CONFIRM, CONFIRM], "PascalCase read as well"


def test_the_cleanup_runs_on_the_workflows_bad_endings_only_as_the_workflows_role_and_logs_everything(built):
    stack, workflow, template = built
    (rule,) = resources_of(template, "AWS::Events::Rule").values()
    machines = state_machines(template)
    ids = {
        which: stack.get_logical_id(machine.node.default_child)
        for which, machine in (("run", workflow.state_machine), ("cleanup", workflow.cleanup.state_machine))
    }
    assert rule["Properties"]["EventPattern"] == {
        "source": ["aws.states"],
        "detail-type": ["Step Functions Execution Status Change"],
        "detail": {"stateMachineArn": [{"Ref": ids["run"]}], "status": ["FAILED", "TIMED_OUT", "ABORTED"]},
    }
    (target,) = rule["Properties"]["Targets"]
    assert target["Arn"] == {"Ref": ids["cleanup"]}
    assert machines["cleanup"]["Properties"]["RoleArn"] == machines["run"]["Properties"]["RoleArn"], (
        "the workflow's access entry may delete releases; no second cluster identity"
    )
    logging = machines["cleanup"]["Properties"]["LoggingConfiguration"]
    assert logging["Level"] == "ALL" and logging["IncludeExecutionData"] is True
    assert machines["cleanup"]["Properties"]["TracingConfiguration"] == {"Enabled": True}
    events_role = next(
        policy
        for policy in resources_of(template, "AWS::IAM::Policy").values()
        if any("states:StartExecution" in json.dumps(s) for s in policy["Properties"]["PolicyDocument"]["Statement"])
    )
    (start,) = events_role["Properties"]["PolicyDocument"]["Statement"]
    assert start["Resource"] == {"Ref": ids["cleanup"]}, "EventBridge may start the cleanup and nothing else"


@pytest.fixture(scope="module")
def staged():
    return workflow_stack(data_job="cifar10-data-0123456789")


def job_reading(*conditions):
    return {"ResponseBody": {"status": {"conditions": list(conditions)}}, "StatusCode": 200}


def test_with_a_data_job_every_run_starts_only_once_the_data_is_staged(staged):
    definition = definition_of(staged[2])
    complete = job_reading({"type": "Complete", "status": "True"})
    running = job_reading()
    failed = job_reading({"type": "Failed", "status": "True"})
    unreadable = {"Error": "EKS.403", "Cause": "forbidden"}
    for request in ({"training_runtime": "kubernetes"}, {"training_runtime": "sagemaker"}):
        ready, waiting, broken, refused = [
            walk(definition, request, results={"Read data job": [reading]})[0]
            for reading in (complete, running, failed, unreadable)
        ]
        read = ready["calls"][0]
        assert read["state"] == "Read data job" and read["arguments"]["Method"] == "GET"
        assert read["arguments"]["Path"] == "/apis/batch/v1/namespaces/training/jobs/cifar10-data-0123456789"
        assert ready["end"] == "Task" and ready["state"] in {"Create release", "Train on SageMaker"}
        for run in (waiting, broken, refused):
            assert run["end"] == "Fail" and run["error"] == "DataNotStaged", run
        assert waiting["cause"].startswith("job/cifar10-data-0123456789, which stages the data set, has not completed")
        assert "(no condition yet)" in waiting["cause"]
        assert "(Failed)" in broken["cause"]
        assert refused["cause"] == "cannot read job/cifar10-data-0123456789: EKS.403: forbidden"


def test_only_with_a_data_job_does_the_workflow_read_it(built, staged):
    assert "Read data job" in definition_of(staged[2])["States"]
    assert "Read data job" not in definition_of(built[2])["States"]


def test_sagemaker_types_the_image_cannot_run_on_are_refused_at_synth_and_at_run_time(definition):
    with pytest.raises(ConfigurationError) as raised:
        workflow_stack(sagemaker_instance_type="ml.trn1.32xlarge")
    (problem,) = raised.value.problems
    assert problem.startswith("sagemaker_instance_type='ml.trn1.32xlarge'") and "ml.g5.xlarge" in problem
    (run,) = walk(definition, {"training_runtime": "sagemaker", "instance_type": "ml.trn1.32xlarge"})
    assert run["error"] == "InvalidRequest" and "ml.trn1.32xlarge" not in run["cause"].split("; got")[0]
    _, _, template = workflow_stack(image_accelerators=[Accelerator.NEURON], sagemaker_instance_type="ml.trn1.32xlarge")
    (run,) = walk(definition_of(template), {"training_runtime": "sagemaker"})
    assert run["calls"][0]["arguments"]["ResourceConfig"]["InstanceType"] == "ml.trn1.32xlarge"
    assert sagemaker_types_for([Accelerator.NEURON]) and all(
        INSTANCE_CATALOG[name[3:]].accelerator is Accelerator.NEURON
        for name in sagemaker_types_for([Accelerator.NEURON])
    )

"""HybridTrainingWorkflow: one Step Functions state machine that trains on SageMaker or on the EKS cluster, per run."""

from __future__ import annotations

import math
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from aws_cdk import Annotations, ArnFormat, Duration, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct, IConstruct

from trainium_eks.constructs.applied_chart import AppliedChart
from trainium_eks.constructs.cluster import TrainingCluster
from trainium_eks.constructs.efs_storage import EfsStorage
from trainium_eks.constructs.logged_state_machine import logged_state_machine
from trainium_eks.constructs.workflow_run_cleanup import WorkflowRunCleanup
from trainium_eks.core.conventions import DEFAULT_NAMESPACE
from trainium_eks.core.nag import acknowledge
from trainium_eks.core.validation import (
    Problems,
    check_absolute_path,
    check_bool,
    check_cluster,
    check_dns_label,
    check_dns_subdomain,
    check_implements,
    check_instance,
    check_integer,
    check_pattern,
    check_text,
    implements,
)
from trainium_eks.facts.catalog import INSTANCE_CATALOG, SAGEMAKER_TRAINING_TYPES, Accelerator
from trainium_eks.manifests.access.workflow_access import WORKFLOW_GROUP, WorkflowAccessChart, check_workflow_group
from trainium_eks.manifests.addons.training_runtime import TRAINER_API_VERSION
from trainium_eks.manifests.jobs.distributed_workload import Launcher
from trainium_eks.manifests.jobs.train_job import TrainJobChart

RUNTIMES: Tuple[str, ...] = ("kubernetes", "sagemaker")
"""The values of ``training_runtime`` in a run request."""

SAGEMAKER_TRAINING_SYNC = "arn:aws:states:::sagemaker:createTrainingJob.sync"
EKS_CALL = "arn:aws:states:::eks:call"
"""The Step Functions integrations of the two branches. Source: Step Functions developer guide, connect-sagemaker.html
and connect-eks.html."""

KUBERNETES_TRAINING_FAILED = "TrainJobFailed"
"""The error of an execution whose TrainJob failed (its JobSet has ended its pods; the TrainJob stays, for logs)."""

DEFAULT_SAGEMAKER_INSTANCE_TYPE = "ml.m5.xlarge"
"""4 vCPUs, 16 GiB, no accelerator: the CPU twin of the default Kubernetes node group of the Kubeflow system."""

DEFAULT_SAGEMAKER_INSTANCE_COUNT = 2
DEFAULT_VOLUME_SIZE_GIB = 50
"""The training instances' ML storage volume (``/opt/ml``: the model and local checkpoints; the data is read from
EFS, not copied)."""

DEFAULT_MAX_RUNTIME = Duration.hours(24)
MAX_SAGEMAKER_RUNTIME_SECONDS = 28 * 24 * 3600
"""The largest ``StoppingCondition.MaxRuntimeInSeconds``: 28 days. Source: SageMaker API reference,
API_StoppingCondition.html."""

DEFAULT_POLL_INTERVAL = Duration.minutes(1)
"""How often the Kubernetes branch reads the TrainJob's status (``eks:runJob.sync`` would poll every 1 to 5
minutes)."""

HISTORY_EVENT_QUOTA = 25_000
"""Events in one Standard execution's history. Source: Step Functions developer guide, "Step Functions service
quotas" (limits-overview.html), quotas related to state machine executions."""

EVENTS_PER_POLL = 9
"""History events of one round of the Kubernetes polling loop: Wait entered and exited, Task entered, scheduled,
started, succeeded and exited, Choice entered and exited."""

EVENTS_OUTSIDE_POLLING = 1_000
"""History events kept free for the rest of an execution (request checks, the create call, retries, the end)."""

DEFAULT_DATA_DIRECTORY = "/cifar10"
"""The data set's directory on the file system. With the static EFS volume of ``EfsVolumeChart`` the claim mounts
the file system's root, so pods that read ``/data/cifar10`` read ``/cifar10`` on EFS."""

DEFAULT_OUTPUT_PREFIX = "sagemaker"
TRAINING_CHANNEL = "training"
"""The input channel the image's launcher reads (``/opt/ml/input/data/training``)."""

HYPERPARAMETERS_ENV = "TRAINING_HYPERPARAMETERS"
"""Environment variable of the Kubernetes job's trainer: the run's hyperparameters as a JSON object of strings, which
``images/cifar10-ddp/launch.py`` turns into script arguments exactly as it reads SageMaker's hyperparameters.json."""

JOB_NAME_ENV = "TRAINING_JOB_NAME"
"""Environment variable of the Kubernetes job's trainer: the run's job name, for per-run paths in the template's
arguments (``--output-dir /data/output/${TRAINING_JOB_NAME}``: the launch script's shell expands it)."""

MAX_HYPERPARAMETERS = 100
"""SageMaker's limit on the entries of ``HyperParameters`` (API reference, CreateTrainingJob); kept for both
runtimes so that one request is valid on either."""

JOB_SUFFIX_LENGTH = 10
"""Characters of the execution name in a job's name, ``<base>-<last 10 letters and digits of the execution
name, lowercased>``: unique per run for the default execution names (UUIDs), a DNS-1123 label of at most 39
characters and a valid SageMaker training job name."""

EXECUTION_ANNOTATION = "trainium-eks/execution"
"""Annotation of a run's TrainJob: the ARN of the execution that created it. Two executions whose names end in the
same ten letters and digits name the same job; the second one's create then fails (409), and the cleanup of its
failed execution must not delete the first one's TrainJob: it deletes only a TrainJob carrying its own ARN."""

EXECUTION_ARN = "$states.context.Execution.Id"
"""JSONata of the execution's ARN (Step Functions context object)."""

SAGEMAKER_EVENTS_RULE = "StepFunctionsGetEventsForSageMakerTrainingJobsRule"
"""The EventBridge rule Step Functions manages for ``createTrainingJob.sync``. Source: Step Functions developer
guide, "IAM policies for Amazon SageMaker AI" (sagemaker-iam.html)."""

SAGEMAKER_LOG_GROUP = "/aws/sagemaker/TrainingJobs"
SAGEMAKER_METRICS_NAMESPACE = "/aws/sagemaker/TrainingJobs"

SAGEMAKER_VPC_ACTIONS = (
    "ec2:CreateNetworkInterface",
    "ec2:CreateNetworkInterfacePermission",
    "ec2:DeleteNetworkInterface",
    "ec2:DeleteNetworkInterfacePermission",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeVpcs",
    "ec2:DescribeDhcpOptions",
    "ec2:DescribeSubnets",
    "ec2:DescribeSecurityGroups",
)
"""What a training job's role needs to place the job in a VPC. Source: SageMaker developer guide, "CreateTrainingJob
API: Execution Role Permissions" (sagemaker-roles.html), which asks for ``Resource: *`` without conditions."""

_OUTPUT_PREFIX = re.compile(r"[A-Za-z0-9!_.*'()-]+(/[A-Za-z0-9!_.*'()-]+)*")
_EXPRESSION = "{{% {} %}}"


def jsonata(expression: str) -> str:
    """``expression`` as a JSONata field value of Amazon States Language (``{% ... %}``)."""
    return _EXPRESSION.format(expression)


_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\", "'": "\\u0027"}

_SUBSTITUTION = re.compile(r"\$(?=\{[A-Za-z0-9_:.]+\})")
"""A ``$`` that starts ``${NAME}``: CloudFormation reads such a placeholder in a state machine's ``DefinitionString``
as a ``DefinitionSubstitutions`` variable (cfn-lint E1029), so the definition must not contain one literally."""


def _quoted(text: str) -> str:
    """``text`` as a JSONata string literal on one line: single quotes (the expression sits in a JSON string),
    JSON's escapes, ``\\u0027`` for a quote (JSONata has no ``\\'``) and ``\\u0024`` for the ``$`` of a
    ``${NAME}`` placeholder (:data:`_SUBSTITUTION`); CDK tokens (``${Token[...]}``) stay as they are."""
    dollars = {match.start() for match in _SUBSTITUTION.finditer(text)}
    escaped = []
    for index, char in enumerate(text):
        if index in dollars:
            escaped.append("\\u0024")
        elif char in _ESCAPES:
            escaped.append(_ESCAPES[char])
        elif ord(char) < 0x20:
            escaped.append(f"\\u{ord(char):04x}")
        else:
            escaped.append(char)
    return "'" + "".join(escaped) + "'"


class HybridTrainingWorkflow(Construct):
    """A Step Functions state machine (Standard, JSONata) that runs one training request on SageMaker or on the
    cluster, chosen by the request's ``training_runtime``.

    The request (the execution's input)::

        {"training_runtime": "kubernetes" | "sagemaker",
         "hyperparameters": {"epochs": "3", "batch-size": "64"},   # strings, as SageMaker requires
         "node_count": 2,                                          # optional
         "instance_type": "ml.g5.xlarge"}                          # optional, SageMaker only

    A Choice on ``training_runtime``; any other value (or none, without ``default_runtime``) ends in the Fail state
    ``Unknown runtime``, whose cause names the allowed values. Each branch first checks the request (string
    hyperparameters, at most :data:`MAX_HYPERPARAMETERS`, the node count, the instance type) and refuses a bad one
    with every problem in one cause. The job of a run is named ``<train job base name>-<suffix>``
    (:data:`JOB_SUFFIX_LENGTH`), on either runtime.

    **SageMaker branch**: ``arn:aws:states:::sagemaker:createTrainingJob.sync`` as a ``CustomState``, because the L2
    task ``SageMakerCreateTrainingJob`` can express neither a ``FileSystemDataSource`` channel nor
    ``EnableInterContainerTrafficEncryption``. The job runs ``image_uri`` (the stack's own image: SageMaker pulls it
    from the account's private ECR with the job's role), reads the EFS directory ``data_directory`` read-only as the
    channel ``training`` (SageMaker mounts it through the job's network interfaces, so the job runs in ``subnets``
    with a security group the file system admits on TCP 2049), writes the model to ``s3://<output bucket>/<output
    prefix>/<job>/output/``, stops after ``max_runtime``, and by default runs with network isolation and encrypted
    traffic between its instances. A failed job ends in the Fail state ``SageMaker training failed`` with the
    service's error and cause (``DescribeTrainingJob``'s JSON, with ``FailureReason``).

    Network isolation with an EFS channel: the SageMaker API reference (``EnableNetworkIsolation``) says that with a
    VPC configuration "SageMaker downloads and uploads customer data and model artifacts through the specified VPC,
    but the training container does not have network access", and the developer guide ("Run Training and Inference
    Containers in Internet-Free Mode", mkt-algo-model-internet-free.html) keeps traffic between the peers of a
    distributed job. The file system is mounted by SageMaker, not by the container, so the two fit and isolation is
    on by default; no document states the combination explicitly, so ``network_isolation=False`` stays available.
    Whether SageMaker's mount uses TLS is not documented either: an ``EfsStorage`` with ``require_tls`` admits only
    TLS mounts, so a first run that fails to mount points there.

    **Kubernetes branch**: ``eks:call`` (REST) creates the TrainJob rendered by ``train_job`` with the run's name,
    node count, ``TRAINING_HYPERPARAMETERS`` and ``TRAINING_JOB_NAME`` (for per-run paths in the template's
    arguments, such as ``--output-dir /data/output/${TRAINING_JOB_NAME}``); a Wait loop reads it every
    ``poll_interval`` and ends in ``Kubernetes training succeeded`` on the condition ``Complete``, in ``Kubernetes
    training failed`` with the ``Failed`` condition's reason and message, or deletes the TrainJob and fails once
    ``max_runtime`` is spent. Why not ``eks:runJob.sync``: it runs only ``batch/v1`` Jobs, so a TrainJob would need
    a submitter Job with kubectl, a service account allowed to create TrainJobs and one more image to pin; it polls
    every 1 to 5 minutes; and the TrainJob's failure reason would only be in the submitter's logs (Step Functions
    developer guide, connect-eks.html, which points to ``eks:call`` for more control over polling). The EKS
    integration reaches only a public API endpoint (same page): a private-only cluster is refused at synth.

    **Access**: the state machine's role has the SageMaker statements of Step Functions' own policy template
    (sagemaker-iam.html) scoped to jobs named ``<base>-*``, ``iam:PassRole`` of the job role to SageMaker only, and
    in the cluster one EKS access entry with the Kubernetes group ``kubernetes_group`` and no access policy, bound by
    :class:`~trainium_eks.manifests.access.workflow_access.WorkflowAccessChart` to create, get and delete TrainJobs in
    ``namespace``. The job's role may pull the image, write its logs and metrics, place network interfaces and put
    objects under the output prefix. The state machine logs every event to a log group (one year; CloudWatch Logs
    encrypts it) and traces with X-Ray.

    **No run outlives its execution**: a TrainJob carries ``activeDeadlineSeconds`` of ``max_runtime`` (the Trainer
    then fails it and deletes its JobSet: kubeflow/trainer v2.3.0 ``pkg/controller/trainjob_controller.go``
    ``reconcileDeadline``), and an execution that fails for another reason than a failed TrainJob, times out or is
    stopped has its TrainJob deleted by :class:`~trainium_eks.constructs.workflow_run_cleanup.WorkflowRunCleanup`
    (an EventBridge rule on the execution's status and an Express state machine); a failed TrainJob is kept for its
    logs (its JobSet has already deleted its running Jobs). A SageMaker job of a stopped execution is stopped by
    Step Functions itself (``.sync`` integrations).

    **Data first**: with ``data_job`` (the Job that stages the data set onto the file system), every run first reads
    that Job and fails with ``DataNotStaged`` unless it has completed, on either runtime.

    Outputs: :attr:`state_machine`, :attr:`role` (the state machine's), :attr:`sagemaker_role`,
    :attr:`output_bucket`, :attr:`sagemaker_security_group`, :attr:`access_entry`, :attr:`access` (the applied
    RBAC chart), :attr:`log_group`.

    :param cluster: A ``TrainingCluster`` or an ``eks.ICluster`` with a kubectl provider, endpoint and certificate
        authority data. Required.
    :param train_job: The TrainJob template of the Kubernetes branch, in ``namespace``, started with the image's own
        launcher (``launcher="direct"``: it reads ``TRAINING_HYPERPARAMETERS`` and the Trainer's node count); the
        workflow never applies it as it is. Required.
    :param image_repository: Where SageMaker pulls ``image_uri`` from: an ``ecr.IRepository``, or the
        ``DockerImageAsset`` that builds the image (then the CDK bootstrap's asset repository). Required.
    :param efs: The file system of the data. Required.
    :param vpc: The VPC of the file system. Required.
    :param subnets: Subnets of the SageMaker jobs, with EFS mount targets. Required, at least one.
    :param image_uri: The SageMaker job's image. Default: the train job's image (one image, both runtimes).
    :param endpoint_access: The cluster's API endpoint access. Default: read from the cluster when it is defined in
        this app; required for an imported cluster.
    :param data_directory: The data's directory on the file system. Default: :data:`DEFAULT_DATA_DIRECTORY`.
    :param data_job: Name of the batch/v1 Job in ``namespace`` that stages the data (``DatasetStagingChart.job_name``),
        or None. Default: None.
    :param image_accelerators: What the image runs on: SageMaker types of other accelerators are refused (a CUDA
        PyTorch image trains on GPU and CPU instances, not on Trainium, which needs the Neuron SDK).
        Default: NVIDIA and CPU.
    :param sagemaker_instance_type: Default: :data:`DEFAULT_SAGEMAKER_INSTANCE_TYPE`.
    :param sagemaker_instance_count: Default: :data:`DEFAULT_SAGEMAKER_INSTANCE_COUNT`.
    :param volume_size_gib: Default: :data:`DEFAULT_VOLUME_SIZE_GIB`.
    :param max_runtime: Longest training on either runtime. Default: :data:`DEFAULT_MAX_RUNTIME`.
    :param poll_interval: Default: :data:`DEFAULT_POLL_INTERVAL`.
    :param output_bucket: A bucket of this stack for the SageMaker models. Default: a new bucket, S3-managed
        encryption, TLS only, public access blocked, retained.
    :param output_prefix: Key prefix of the models in the bucket. Default: :data:`DEFAULT_OUTPUT_PREFIX`.
    :param server_access_logs_bucket: Where the new output bucket logs requests. Default: no access logs (the bucket
        is written by the job role only; CloudTrail data events are the audit trail).
    :param default_runtime: The runtime of requests without ``training_runtime``, or None to require it.
        Default: None (each run says where it runs, and so what it costs).
    :param namespace: The TrainJobs' namespace. Default: ``training``.
    :param network_isolation: Default: true.
    :param inter_container_encryption: Default: true.
    :param kubernetes_group: Kubernetes group of the state machine's role. Default: ``trainium-eks:workflow``.
    :param apply_after: What the RBAC objects are applied after (the namespace's chart). Default: nothing.
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        cluster: Union[TrainingCluster, eks.ICluster],
        train_job: TrainJobChart,
        image_repository: Union[ecr.IRepository, ecr_assets.DockerImageAsset],
        efs: EfsStorage,
        vpc: ec2.IVpc,
        subnets: Sequence[ec2.ISubnet],
        image_uri: Optional[str] = None,
        endpoint_access: Optional[eks.EndpointAccess] = None,
        data_directory: str = DEFAULT_DATA_DIRECTORY,
        data_job: Optional[str] = None,
        image_accelerators: Sequence[Accelerator] = (Accelerator.NVIDIA, Accelerator.NONE),
        sagemaker_instance_type: str = DEFAULT_SAGEMAKER_INSTANCE_TYPE,
        sagemaker_instance_count: int = DEFAULT_SAGEMAKER_INSTANCE_COUNT,
        volume_size_gib: int = DEFAULT_VOLUME_SIZE_GIB,
        max_runtime: Duration = DEFAULT_MAX_RUNTIME,
        poll_interval: Duration = DEFAULT_POLL_INTERVAL,
        output_bucket: Optional[s3.Bucket] = None,
        output_prefix: str = DEFAULT_OUTPUT_PREFIX,
        server_access_logs_bucket: Optional[s3.IBucket] = None,
        default_runtime: Optional[str] = None,
        namespace: str = DEFAULT_NAMESPACE,
        network_isolation: bool = True,
        inter_container_encryption: bool = True,
        kubernetes_group: str = WORKFLOW_GROUP,
        apply_after: Sequence[IConstruct] = (),
    ) -> None:
        super().__init__(scope, id_)
        problems = Problems(self.node.path)
        eks_cluster = cluster.cluster if isinstance(cluster, TrainingCluster) else cluster
        if check_cluster(problems, "cluster", eks_cluster, "kubectl_provider"):
            _check_endpoint(self, problems, eks_cluster, endpoint_access)
        if check_instance(problems, "train_job", train_job, TrainJobChart, "a TrainJobChart (the TrainJob template)"):
            _check_train_job(problems, train_job, namespace)
        if not isinstance(image_repository, ecr_assets.DockerImageAsset):
            check_implements(
                problems,
                "image_repository",
                image_repository,
                ecr.IRepository,
                "an ecr.IRepository or the ecr_assets.DockerImageAsset of the image",
            )
        if image_uri is not None:
            check_text(problems, "image_uri", image_uri, allowed="a container image URI in the account's ECR")
        check_instance(problems, "efs", efs, EfsStorage, "an EfsStorage (the file system of the data)")
        check_implements(problems, "vpc", vpc, ec2.IVpc, "an ec2.IVpc")
        if (
            not isinstance(subnets, (list, tuple))
            or not subnets
            or not all(implements(s, ec2.ISubnet) for s in subnets)
        ):
            problems.add(
                "subnets",
                subnets,
                "a non-empty list of ec2.ISubnet with EFS mount targets: SageMaker mounts an EFS channel only from "
                "inside the VPC",
            )
        check_absolute_path(problems, "data_directory", data_directory)
        if data_job is not None:
            check_dns_subdomain(problems, "data_job", data_job)
        if not isinstance(image_accelerators, (list, tuple)) or not all(
            isinstance(item, Accelerator) for item in image_accelerators
        ):
            problems.add("image_accelerators", image_accelerators, "a list of Accelerator")
            image_accelerators = ()
        allowed_types = sagemaker_types_for(image_accelerators)
        if sagemaker_instance_type not in allowed_types:
            problems.add(
                "sagemaker_instance_type",
                sagemaker_instance_type,
                f"a SageMaker training type (ml.*) of the catalog the image runs on: {', '.join(allowed_types)}",
            )
        check_integer(problems, "sagemaker_instance_count", sagemaker_instance_count, minimum=1)
        check_integer(problems, "volume_size_gib", volume_size_gib, minimum=1)
        runtime_seconds = _whole_seconds(
            problems, "max_runtime", max_runtime, 60, MAX_SAGEMAKER_RUNTIME_SECONDS, "SageMaker's 28 days"
        )
        poll_seconds = _whole_seconds(problems, "poll_interval", poll_interval, 10, 3600, "one hour")
        if runtime_seconds and poll_seconds:
            _check_history_budget(problems, runtime_seconds, poll_seconds)
        if output_bucket is not None and not (
            isinstance(output_bucket, s3.Bucket) and Stack.of(output_bucket) is Stack.of(self)
        ):
            problems.add(
                "output_bucket",
                output_bucket,
                "an s3.Bucket defined in this stack (the stack owns the models: encrypted, retained); the default "
                "creates one",
            )
        check_pattern(
            problems,
            "output_prefix",
            output_prefix,
            _OUTPUT_PREFIX,
            "a key prefix inside the stack's bucket, such as sagemaker or models/cifar10 (not an S3 URL, no leading "
            "or trailing '/')",
        )
        if server_access_logs_bucket is not None:
            if output_bucket is not None:
                problems.add(
                    "server_access_logs_bucket",
                    server_access_logs_bucket,
                    "only with the default output bucket (configure logging on your own bucket)",
                )
            else:
                check_implements(
                    problems, "server_access_logs_bucket", server_access_logs_bucket, s3.IBucket, "an s3.IBucket"
                )
        if default_runtime is not None and default_runtime not in RUNTIMES:
            problems.add("default_runtime", default_runtime, f"one of {', '.join(RUNTIMES)}, or None to require it")
        check_dns_label(problems, "namespace", namespace)
        check_bool(problems, "network_isolation", network_isolation)
        check_bool(problems, "inter_container_encryption", inter_container_encryption)
        check_workflow_group(problems, "kubernetes_group", kubernetes_group)
        if not isinstance(apply_after, (list, tuple)) or not all(implements(item, IConstruct) for item in apply_after):
            problems.add("apply_after", apply_after, "a list of constructs")
        problems.raise_if_any()

        stack = Stack.of(self)
        self.train_job = train_job
        self.job_base_name: str = train_job.component
        """The base of every job's name: ``<base>-<suffix>``."""
        self.namespace = namespace
        self.default_runtime = default_runtime
        self.output_prefix = output_prefix
        self.max_polls = math.ceil(runtime_seconds / poll_seconds)

        self.output_bucket: s3.Bucket = output_bucket or self._new_output_bucket(server_access_logs_bucket)
        self.sagemaker_security_group = ec2.SecurityGroup(
            self,
            "SageMakerSecurityGroup",
            vpc=vpc,
            description="SageMaker training jobs of the hybrid workflow: EFS client, peers of one distributed job",
            allow_all_outbound=True,
        )
        self.sagemaker_security_group.add_ingress_rule(
            self.sagemaker_security_group,
            ec2.Port.all_traffic(),
            "Instances of one training job: torch rendezvous and collectives, IPsec (UDP 500, ESP) when encrypted",
        )
        efs.allow_clients(self.sagemaker_security_group)

        self.sagemaker_role = self._new_sagemaker_role(image_repository)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal(
                "states.amazonaws.com", conditions={"StringEquals": {"aws:SourceAccount": stack.account}}
            ),
            description="Hybrid training workflow: SageMaker training jobs and TrainJobs of the cluster",
        )
        self._grant_sagemaker_jobs()

        self.access_entry = eks.CfnAccessEntry(
            self,
            "AccessEntry",
            cluster_name=eks_cluster.cluster_name,
            principal_arn=self.role.role_arn,
            kubernetes_groups=[kubernetes_group],
            type="STANDARD",
        )
        self.access_chart = WorkflowAccessChart(
            group=kubernetes_group, namespace=namespace, read_jobs=data_job is not None
        )
        self.access = AppliedChart(
            self, "Access", cluster=eks_cluster, chart=self.access_chart, after=list(apply_after)
        )

        start = _chain(
            self,
            cluster=eks_cluster,
            train_job=train_job,
            namespace=namespace,
            default_runtime=default_runtime,
            sagemaker_arguments=self._sagemaker_arguments(
                image_uri=image_uri or train_job.workload.image,
                efs=efs,
                subnets=subnets,
                data_directory=data_directory,
                volume_size_gib=volume_size_gib,
                runtime_seconds=runtime_seconds,
                network_isolation=network_isolation,
                inter_container_encryption=inter_container_encryption,
            ),
            sagemaker_defaults=(sagemaker_instance_type, sagemaker_instance_count),
            allowed_instance_types=allowed_types,
            poll_seconds=poll_seconds,
            max_polls=self.max_polls,
            deadline_seconds=runtime_seconds,
            data_job=data_job,
        )
        self.log_group, self.state_machine = logged_state_machine(
            self,
            start=start,
            state_machine_type=sfn.StateMachineType.STANDARD,
            role=self.role,
            comment="Train on SageMaker or on the EKS cluster, chosen by the request's training_runtime",
        )
        self.cleanup = WorkflowRunCleanup(
            self,
            "Cleanup",
            workflow=self.state_machine,
            role=self.role,
            cluster=eks_cluster,
            trainjobs_path=f"/apis/{TRAINER_API_VERSION}/namespaces/{namespace}/trainjobs",
            job_name=lambda execution_name: job_name_expression(self.job_base_name, execution_name),
            keep_on_error=KUBERNETES_TRAINING_FAILED,
            owner_annotation=EXECUTION_ANNOTATION,
        )
        self._acknowledge()

    # --- resources --------------------------------------------------------------------------------------------

    def _new_output_bucket(self, access_logs: Optional[s3.IBucket]) -> s3.Bucket:
        bucket = s3.Bucket(
            self,
            "Output",
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            server_access_logs_bucket=access_logs,
            server_access_logs_prefix="hybrid-workflow-output/" if access_logs is not None else None,
            removal_policy=RemovalPolicy.RETAIN,
        )
        if access_logs is None:
            acknowledge(
                bucket,
                "AwsSolutions-S1",
                "The output bucket receives only the model artifacts that SageMaker uploads with the training job's "
                "role; CloudTrail data events audit it, and a log bucket would itself need a log bucket. Pass "
                "server_access_logs_bucket to log requests.",
            )
        return bucket

    def _new_sagemaker_role(self, repository: Union[ecr.IRepository, ecr_assets.DockerImageAsset]) -> iam.Role:
        stack = Stack.of(self)
        self._output_objects_arn = self.output_bucket.arn_for_objects(f"{self.output_prefix}/*")
        role = iam.Role(
            self,
            "SageMakerRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description="Training jobs of the hybrid workflow: pull the image, write logs, metrics and the model",
        )
        image_repository = repository.repository if isinstance(repository, ecr_assets.DockerImageAsset) else repository
        image_repository.grant_pull(role)
        self._log_group_arn = stack.format_arn(
            service="logs",
            resource="log-group",
            resource_name=f"{SAGEMAKER_LOG_GROUP}:*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="TrainingLogs",
                actions=[
                    "logs:CreateLogGroup",
                    "logs:CreateLogStream",
                    "logs:DescribeLogStreams",
                    "logs:PutLogEvents",
                ],
                resources=[self._log_group_arn],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="TrainingMetrics",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": SAGEMAKER_METRICS_NAMESPACE}},
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(sid="TrainingNetworkInterfaces", actions=list(SAGEMAKER_VPC_ACTIONS), resources=["*"])
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ModelOutput",
                actions=["s3:PutObject", "s3:AbortMultipartUpload"],
                resources=[self._output_objects_arn],
            )
        )
        return role

    def _grant_sagemaker_jobs(self) -> None:
        stack = Stack.of(self)
        self._training_jobs_arn = stack.format_arn(
            service="sagemaker", resource="training-job", resource_name=f"{self.job_base_name}-*"
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="TrainingJobs",
                actions=["sagemaker:CreateTrainingJob", "sagemaker:DescribeTrainingJob", "sagemaker:StopTrainingJob"],
                resources=[self._training_jobs_arn],
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(sid="TrainingJobTags", actions=["sagemaker:ListTags"], resources=["*"])
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="PassJobRole",
                actions=["iam:PassRole"],
                resources=[self.sagemaker_role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="TrainingJobEvents",
                actions=["events:PutTargets", "events:PutRule", "events:DescribeRule"],
                resources=[stack.format_arn(service="events", resource="rule", resource_name=SAGEMAKER_EVENTS_RULE)],
            )
        )

    def _sagemaker_arguments(
        self,
        *,
        image_uri: str,
        efs: EfsStorage,
        subnets: Sequence[ec2.ISubnet],
        data_directory: str,
        volume_size_gib: int,
        runtime_seconds: int,
        network_isolation: bool,
        inter_container_encryption: bool,
    ) -> Dict[str, Any]:
        """``CreateTrainingJob``'s request, with JSONata where the run decides."""
        return {
            "TrainingJobName": jsonata("$job_name"),
            "RoleArn": self.sagemaker_role.role_arn,
            "AlgorithmSpecification": {"TrainingImage": image_uri, "TrainingInputMode": "File"},
            "HyperParameters": jsonata("$hyperparameters"),
            "InputDataConfig": [
                {
                    "ChannelName": TRAINING_CHANNEL,
                    "InputMode": "File",
                    "DataSource": {
                        "FileSystemDataSource": {
                            "FileSystemId": efs.file_system_id,
                            "FileSystemType": "EFS",
                            "FileSystemAccessMode": "ro",
                            "DirectoryPath": data_directory,
                        }
                    },
                }
            ],
            "OutputDataConfig": {"S3OutputPath": f"s3://{self.output_bucket.bucket_name}/{self.output_prefix}/"},
            "ResourceConfig": {
                "InstanceType": jsonata("$instance_type"),
                "InstanceCount": jsonata("$node_count"),
                "VolumeSizeInGB": volume_size_gib,
            },
            "VpcConfig": {
                "SecurityGroupIds": [self.sagemaker_security_group.security_group_id],
                "Subnets": [subnet.subnet_id for subnet in subnets],
            },
            "StoppingCondition": {"MaxRuntimeInSeconds": runtime_seconds},
            "EnableNetworkIsolation": network_isolation,
            "EnableInterContainerTrafficEncryption": inter_container_encryption,
        }

    def _acknowledge(self) -> None:
        stack = Stack.of(self)
        acknowledge(
            self.role,
            "AwsSolutions-IAM5",
            "Actions without resource-level permissions: sagemaker:ListTags (in Step Functions' own policy for "
            "createTrainingJob.sync, sagemaker-iam.html), the log delivery actions of Step Functions logging "
            "(cw-logs.html) and the X-Ray trace actions (xray-iam.html), all of which the service requires on '*'.",
            "Resource::*",
        )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5",
            "Training job names are decided per run (<base>-<suffix of the execution name>); the role may create, "
            "describe and stop only jobs of this workflow's base name.",
            _resource_finding(stack, self._training_jobs_arn),
        )
        acknowledge(
            self.sagemaker_role,
            "AwsSolutions-IAM5",
            "ecr:GetAuthorizationToken, cloudwatch:PutMetricData (limited to SageMaker's training namespace) and the "
            "network-interface actions SageMaker needs to place a job in the VPC have no resource-level permissions; "
            "the SageMaker developer guide (sagemaker-roles.html) lists them for '*' and warns that resource filters "
            "or conditions on the network-interface actions make the job's validation fail.",
            "Resource::*",
        )
        acknowledge(
            self.sagemaker_role,
            "AwsSolutions-IAM5",
            "SageMaker names each training job's log streams (<job>/algo-<n>-<time>) inside its log group "
            f"{SAGEMAKER_LOG_GROUP}; the role writes nowhere else.",
            _resource_finding(stack, self._log_group_arn),
        )
        acknowledge(
            self.sagemaker_role,
            "AwsSolutions-IAM5",
            "SageMaker uploads each job's model under <output prefix>/<job name>/ of the stack's bucket; the job "
            "names are decided per run, the prefix is fixed.",
            _resource_finding(stack, self._output_objects_arn),
        )


def _chain(
    scope: Construct,
    *,
    cluster: eks.ICluster,
    train_job: TrainJobChart,
    namespace: str,
    default_runtime: Optional[str],
    sagemaker_arguments: Mapping[str, Any],
    sagemaker_defaults: Tuple[str, int],
    allowed_instance_types: Sequence[str],
    poll_seconds: int,
    max_polls: int,
    deadline_seconds: int,
    data_job: Optional[str],
) -> sfn.IChainable:
    """The states of the workflow, wired from the request's reading to every end."""
    base = train_job.component
    trainjobs = f"/apis/{TRAINER_API_VERSION}/namespaces/{namespace}/trainjobs"
    cluster_arguments = {
        "ClusterName": cluster.cluster_name,
        "CertificateAuthority": cluster.cluster_certificate_authority_data,
        "Endpoint": cluster.cluster_endpoint,
    }
    default = _quoted(default_runtime) if default_runtime else "null"
    read = sfn.Pass.jsonata(
        scope,
        "Read request",
        assign={
            "runtime": jsonata(f"$exists($states.input.training_runtime) ? $states.input.training_runtime : {default}"),
            "hyperparameters": jsonata("$exists($states.input.hyperparameters) ? $states.input.hyperparameters : {}"),
            "node_count": jsonata("$exists($states.input.node_count) ? $states.input.node_count : null"),
            "instance_type": jsonata("$exists($states.input.instance_type) ? $states.input.instance_type : null"),
            "job_name": jsonata(job_name_expression(base)),
            "polls": 0,
        },
    )
    allowed = ", ".join(RUNTIMES)
    unknown = sfn.Fail.jsonata(
        scope,
        "Unknown runtime",
        error="UnknownRuntime",
        cause=jsonata(
            f"'training_runtime must be one of {allowed}; got ' & ($runtime = null ? 'none' : $string($runtime))"
        ),
    )
    refuse = sfn.Fail.jsonata(scope, "Refuse request", error="InvalidRequest", cause=jsonata("$join($problems, '; ')"))
    call_failed = sfn.Fail.jsonata(
        scope,
        "Kubernetes call failed",
        error=jsonata("$states.input.Error"),
        cause=jsonata("$states.input.Cause"),
    )

    instance_type, instance_count = sagemaker_defaults
    check_sagemaker = sfn.Pass.jsonata(
        scope,
        "Check SageMaker request",
        assign={
            "problems": jsonata(
                request_problems(
                    max_nodes=None,
                    instance_types=allowed_instance_types,
                    kubernetes_instance_type=None,
                )
            ),
            "node_count": jsonata(f"$node_count = null ? {instance_count} : $node_count"),
            "instance_type": jsonata(f"$instance_type = null ? {_quoted(instance_type)} : $instance_type"),
        },
    )
    train_sagemaker = sfn.CustomState(
        scope,
        "Train on SageMaker",
        state_json={
            "Type": "Task",
            "Resource": SAGEMAKER_TRAINING_SYNC,
            "Arguments": dict(sagemaker_arguments),
            "Output": jsonata(
                "{'runtime': 'sagemaker', 'job_name': $states.result.TrainingJobName, "
                "'status': $states.result.TrainingJobStatus, "
                "'model_artifacts': $states.result.ModelArtifacts.S3ModelArtifacts}"
            ),
        },
    )
    sagemaker_failed = sfn.Fail.jsonata(
        scope,
        "SageMaker training failed",
        error=jsonata("$states.input.Error"),
        cause=jsonata("$states.input.Cause"),
    )
    train_sagemaker.add_catch(sagemaker_failed, errors=["States.ALL"])
    sagemaker_done = sfn.Succeed.jsonata(scope, "SageMaker training succeeded")

    group = train_job.workload.node_group
    check_kubernetes = sfn.Pass.jsonata(
        scope,
        "Check Kubernetes request",
        assign={
            "problems": jsonata(
                request_problems(
                    max_nodes=group.max_nodes,
                    instance_types=(),
                    kubernetes_instance_type=group.instance_type,
                )
            ),
            "node_count": jsonata(f"$node_count = null ? {train_job.nodes} : $node_count"),
        },
    )
    create = sfn.CustomState(
        scope,
        "Create TrainJob",
        state_json={
            "Type": "Task",
            "Resource": EKS_CALL,
            "Arguments": {
                **cluster_arguments,
                "Method": "POST",
                "Path": trainjobs,
                "RequestBody": trainjob_template(train_job, deadline_seconds),
            },
            "Output": jsonata("$states.input"),
        },
    )
    create.add_catch(call_failed, errors=["States.ALL"])
    wait = sfn.Wait.jsonata(scope, "Wait for TrainJob", time=sfn.WaitTime.duration(Duration.seconds(poll_seconds)))
    status = sfn.CustomState(
        scope,
        "Read TrainJob",
        state_json={
            "Type": "Task",
            "Resource": EKS_CALL,
            "Arguments": {
                **cluster_arguments,
                "Method": "GET",
                "Path": jsonata(f"{_quoted(trainjobs + '/')} & $job_name"),
            },
            "Assign": {
                "polls": jsonata("$polls + 1"),
                "conditions": jsonata("($c := $states.result.ResponseBody.status.conditions; $exists($c) ? $c : [])"),
            },
            "Output": jsonata("$states.input"),
        },
    )
    status.add_retry(errors=["States.ALL"], interval=Duration.seconds(10), max_attempts=3, backoff_rate=2)
    status.add_catch(call_failed, errors=["States.ALL"])
    succeeded = sfn.Succeed.jsonata(
        scope,
        "Kubernetes training succeeded",
        outputs=jsonata(
            f"{{'runtime': 'kubernetes', 'job_name': $job_name, 'namespace': {_quoted(namespace)}, "
            "'conditions': $conditions}"
        ),
    )
    failed = sfn.Fail.jsonata(
        scope,
        "Kubernetes training failed",
        error=KUBERNETES_TRAINING_FAILED,
        cause=jsonata(
            "($c := $conditions[type = 'Failed' and status = 'True'][0]; "
            "'TrainJob ' & $job_name & ': ' & $c.reason & ': ' & $c.message)"
        ),
    )
    delete = sfn.CustomState(
        scope,
        "Delete TrainJob",
        state_json={
            "Type": "Task",
            "Resource": EKS_CALL,
            "Arguments": {
                **cluster_arguments,
                "Method": "DELETE",
                "Path": jsonata(f"{_quoted(trainjobs + '/')} & $job_name"),
            },
            "Output": jsonata("$states.input"),
        },
    )
    delete.add_catch(call_failed, errors=["States.ALL"])
    timed_out = sfn.Fail.jsonata(
        scope,
        "Kubernetes training timed out",
        error="MaxRuntimeExceeded",
        cause=jsonata(
            f"'TrainJob ' & $job_name & ' did not finish within {max_polls * poll_seconds} seconds; it was deleted'"
        ),
    )
    finished = (
        sfn.Choice.jsonata(scope, "TrainJob finished?")
        .when(sfn.Condition.jsonata(jsonata(_has_condition("Complete"))), succeeded)
        .when(sfn.Condition.jsonata(jsonata(_has_condition("Failed"))), failed)
        .when(sfn.Condition.jsonata(jsonata(f"$polls >= {max_polls}")), delete.next(timed_out))
        .otherwise(wait)
    )
    kubernetes = (
        sfn.Choice.jsonata(scope, "Kubernetes request valid?")
        .when(sfn.Condition.jsonata(jsonata("$count($problems) > 0")), refuse)
        .otherwise(create.next(wait).next(status).next(finished))
    )
    sagemaker = (
        sfn.Choice.jsonata(scope, "SageMaker request valid?")
        .when(sfn.Condition.jsonata(jsonata("$count($problems) > 0")), refuse)
        .otherwise(train_sagemaker.next(sagemaker_done))
    )
    choose = (
        sfn.Choice.jsonata(scope, "Choose runtime")
        .when(sfn.Condition.jsonata(jsonata("$runtime = 'sagemaker'")), check_sagemaker.next(sagemaker))
        .when(sfn.Condition.jsonata(jsonata("$runtime = 'kubernetes'")), check_kubernetes.next(kubernetes))
        .otherwise(unknown)
    )
    if data_job is None:
        return read.next(choose)
    return read.next(_data_check(scope, cluster_arguments, namespace, data_job, then=choose))


def _data_check(
    scope: Construct, cluster_arguments: Mapping[str, Any], namespace: str, data_job: str, *, then: sfn.IChainable
) -> sfn.IChainable:
    """Read the Job that stages the data; go on to ``then`` once it has completed, else fail with DataNotStaged."""
    path = f"/apis/batch/v1/namespaces/{namespace}/jobs/{data_job}"
    not_staged = sfn.Fail.jsonata(
        scope,
        "Data not staged",
        error="DataNotStaged",
        cause=jsonata(
            f"'job/{data_job}, which stages the data set, has not completed ('"
            " & ($true := $data_conditions[status = 'True'].type;"
            " $count($true) > 0 ? $join($true, ', ') : 'no condition yet')"
            " & '): run again once kubectl get job -n " + namespace + " " + data_job + " says Complete'"
        ),
    )
    unreadable = sfn.Fail.jsonata(
        scope,
        "Data job not readable",
        error="DataNotStaged",
        cause=jsonata(f"'cannot read job/{data_job}: ' & $states.input.Error & ': ' & $states.input.Cause"),
    )
    read = sfn.CustomState(
        scope,
        "Read data job",
        state_json={
            "Type": "Task",
            "Resource": EKS_CALL,
            "Arguments": {**cluster_arguments, "Method": "GET", "Path": path},
            "Assign": {
                "data_conditions": jsonata(
                    "($c := $states.result.ResponseBody.status.conditions; $exists($c) ? $c : [])"
                )
            },
            "Output": jsonata("$states.input"),
        },
    )
    read.add_retry(errors=["States.ALL"], interval=Duration.seconds(5), max_attempts=2, backoff_rate=2)
    read.add_catch(unreadable, errors=["States.ALL"])
    staged = (
        sfn.Choice.jsonata(scope, "Data staged?")
        .when(sfn.Condition.jsonata(jsonata("$exists($data_conditions[type = 'Complete' and status = 'True'])")), then)
        .otherwise(not_staged)
    )
    return read.next(staged)


def _resource_finding(stack: Stack, arn: str) -> str:
    """The id cdk-nag gives a finding on the IAM resource ``arn``: its CloudFormation form flattened, references as
    ``<Id>`` and attributes as ``<Id.Attribute>``."""

    def text(value: Any) -> str:
        if isinstance(value, str):
            return value
        if "Fn::Join" in value:
            separator, parts = value["Fn::Join"]
            return separator.join(text(part) for part in parts)
        if "Ref" in value:
            return f"<{value['Ref']}>"
        if "Fn::GetAtt" in value:
            return f"<{'.'.join(value['Fn::GetAtt'])}>"
        raise ValueError(f"no cdk-nag form for {value!r}")

    return "Resource::" + text(stack.resolve(arn))


def _has_condition(kind: str) -> str:
    return f"$exists($conditions[type = {_quoted(kind)} and status = 'True'])"


def job_name_expression(base: str, execution_name: str = "$states.context.Execution.Name") -> str:
    """JSONata of a run's job name: ``<base>-`` and the last :data:`JOB_SUFFIX_LENGTH` letters and digits of the
    execution's name (the JSONata ``execution_name``), lowercased (``run`` if it has none)."""
    suffix = f"$substring($lowercase($replace({execution_name}, /[^A-Za-z0-9]/, '')), -{JOB_SUFFIX_LENGTH})"
    return f"($s := {suffix}; {_quoted(base + '-')} & ($s = '' ? 'run' : $s))"


def request_problems(
    *, max_nodes: Optional[int], instance_types: Sequence[str], kubernetes_instance_type: Optional[str]
) -> str:
    """JSONata of the request's problems (a list of sentences, empty when the request is valid)."""
    not_strings = "$keys($hyperparameters)[$type($lookup($hyperparameters, $)) != 'string']"
    upper = f" and $node_count <= {max_nodes}" if max_nodes is not None else ""
    nodes = f"at least 1{f' and at most {max_nodes}' if max_nodes is not None else ''}"
    checks = [
        "$type($hyperparameters) != 'object' ? 'hyperparameters must be an object of string values'",
        f"$type($hyperparameters) = 'object' and $count({not_strings}) > 0 ? "
        f"'hyperparameters must be strings (as SageMaker requires): ' & $join({not_strings}, ', ')",
        f"$type($hyperparameters) = 'object' and $count($keys($hyperparameters)) > {MAX_HYPERPARAMETERS} ? "
        f"'at most {MAX_HYPERPARAMETERS} hyperparameters'",
        f"$node_count != null and $not($type($node_count) = 'number' ? "
        f"($node_count = $floor($node_count) and $node_count >= 1{upper}) : false) ? "
        f"'node_count must be an integer of {nodes}; got ' & $string($node_count)",
    ]
    if kubernetes_instance_type is not None:
        checks.append(
            "$instance_type != null ? 'instance_type is a SageMaker setting; the Kubernetes job runs on the node "
            f"group of {kubernetes_instance_type}'"
        )
    else:
        listed = ", ".join(_quoted(name) for name in instance_types)
        checks.append(
            f"$instance_type != null and $not($instance_type in [{listed}]) ? "
            f"'instance_type must be one of {', '.join(instance_types)}; got ' & $string($instance_type)"
        )
    return "[" + ", ".join(checks) + "]"


def trainjob_template(train_job: TrainJobChart, deadline_seconds: int) -> Dict[str, Any]:
    """The TrainJob of ``train_job`` with the run's name, node count, hyperparameters (:data:`HYPERPARAMETERS_ENV`)
    and job name (:data:`JOB_NAME_ENV`) as JSONata, the execution that created it (:data:`EXECUTION_ANNOTATION`),
    ending after ``deadline_seconds`` (``activeDeadlineSeconds``).

    Strings that a JSONata state cannot hold as plain literals in the validator's reading (empty, multi-line, or
    starting with ``{%``) become JSONata string literals, which evaluate to the same string."""
    (manifest,) = train_job.manifests()
    manifest = _literals(manifest)
    metadata = manifest["metadata"]
    metadata["name"] = jsonata("$job_name")
    metadata["annotations"] = {**(metadata.get("annotations") or {}), EXECUTION_ANNOTATION: jsonata(EXECUTION_ARN)}
    labels = metadata.get("labels") or {}
    if "app.kubernetes.io/instance" in labels:
        labels["app.kubernetes.io/instance"] = jsonata("$job_name")
    trainer = manifest["spec"]["trainer"]
    trainer["numNodes"] = jsonata("$node_count")
    trainer["env"] = [
        *trainer.get("env", []),
        {"name": HYPERPARAMETERS_ENV, "value": jsonata("$string($hyperparameters)")},
        {"name": JOB_NAME_ENV, "value": jsonata("$job_name")},
    ]
    manifest["spec"]["activeDeadlineSeconds"] = deadline_seconds
    return manifest


def sagemaker_types_for(accelerators: Sequence[Accelerator]) -> List[str]:
    """The SageMaker training types of the catalog whose instances have one of ``accelerators``."""
    return [
        name
        for name in SAGEMAKER_TRAINING_TYPES
        if INSTANCE_CATALOG[name.removeprefix("ml.")].accelerator in tuple(accelerators)
    ]


def _literals(value: Any) -> Any:
    """``value`` with every string a state machine definition cannot hold as a plain JSONata-template literal turned
    into a JSONata string literal of the same value: the empty string, multi-line strings and strings starting with
    ``{%`` (asl-validator 4.0.0 reads a literal as a non-empty single line not starting with ``{% ``), and strings
    with a ``${NAME}`` placeholder (:data:`_SUBSTITUTION`)."""
    if isinstance(value, dict):
        return {key: _literals(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_literals(item) for item in value]
    if isinstance(value, str) and (
        value == "" or value.startswith("{%") or _MULTI_LINE.search(value) or _SUBSTITUTION.search(value)
    ):
        return jsonata(_quoted(value))
    return value


_MULTI_LINE = re.compile("[\n\r\u2028\u2029]")


def _check_train_job(problems: Problems, train_job: TrainJobChart, namespace: str) -> None:
    if train_job.workload.launcher is not Launcher.DIRECT:
        problems.add(
            "train_job",
            train_job.component,
            "a TrainJob started by the image's own launcher (launcher='direct'), which reads TRAINING_HYPERPARAMETERS "
            f"and the node count of the run; {train_job.workload.launcher.value} would ignore them",
        )
    for variable in (HYPERPARAMETERS_ENV, JOB_NAME_ENV):
        if variable in train_job.workload.env:
            problems.add(
                "train_job",
                train_job.component,
                f"a TrainJob without the env {variable} (the workflow sets it for each run)",
            )
    if train_job.namespace_name != namespace:
        problems.add(
            "train_job",
            train_job.component,
            f"a TrainJob in the namespace {namespace!r} (where the workflow may create TrainJobs), not "
            f"{train_job.namespace_name!r}",
        )


def _check_endpoint(
    scope: Construct, problems: Problems, cluster: eks.ICluster, endpoint_access: Optional[eks.EndpointAccess]
) -> None:
    """Refuse a cluster whose API endpoint is private only (Step Functions' EKS integration reaches public endpoints
    only: Step Functions developer guide, connect-eks.html), and one without the endpoint and certificate data."""
    for attribute, hint in (
        ("cluster_endpoint", "cluster_endpoint="),
        ("cluster_certificate_authority_data", "cluster_certificate_authority_data="),
    ):
        try:
            present = getattr(cluster, attribute) is not None
        except RuntimeError:
            present = False
        if not present:
            problems.add(
                "cluster",
                f"<cluster without {attribute}>",
                f"a cluster with {attribute} (eks:call needs it): import it with "
                f"eks.Cluster.from_cluster_attributes(..., {hint})",
            )
    cidrs: Optional[List[str]] = None
    if endpoint_access is not None:
        if not isinstance(endpoint_access, eks.EndpointAccess):
            problems.add("endpoint_access", endpoint_access, "an eks.EndpointAccess")
            return
        public = endpoint_access.__jsii_ref__.ref != eks.EndpointAccess.PRIVATE.__jsii_ref__.ref
    else:
        config = _vpc_config(cluster)
        if config is None:
            problems.add(
                "endpoint_access",
                None,
                "the imported cluster's eks.EndpointAccess (PUBLIC or PUBLIC_AND_PRIVATE): Step Functions reaches "
                "only a public API endpoint",
            )
            return
        public = bool(config.endpoint_public_access) if config.endpoint_public_access is not None else True
        cidrs = list(config.public_access_cidrs or [])
    if not public:
        problems.add(
            "cluster",
            "endpoint access PRIVATE",
            "a cluster with a public API endpoint (eks.EndpointAccess.PUBLIC_AND_PRIVATE or PUBLIC): Step Functions' "
            "EKS integration (eks:call) supports only Kubernetes APIs with public endpoint access (Step Functions "
            "developer guide, connect-eks.html); a private-only cluster cannot run the Kubernetes branch",
        )
    elif cidrs and "0.0.0.0/0" not in cidrs:
        Annotations.of(scope).add_warning_v2(
            "trainium-eks:workflowEndpointCidrs",
            f"The cluster's public endpoint admits only {', '.join(cidrs)}: Step Functions calls it from AWS's own "
            "addresses, so the Kubernetes branch fails with a connection error unless those ranges are admitted.",
        )


def _vpc_config(cluster: eks.ICluster) -> Optional[Any]:
    """The ``ResourcesVpcConfig`` of a cluster defined in this app, or None for an imported one."""
    child = cluster.node.default_child
    return child.resources_vpc_config if isinstance(child, eks.CfnCluster) else None


def _whole_seconds(
    problems: Problems, setting: str, value: Any, minimum: int, maximum: int, maximum_name: str
) -> Optional[int]:
    """``value`` (a Duration) in whole seconds, within bounds; None (with a problem) otherwise."""
    allowed = f"a Duration of whole seconds, from {minimum} s to {maximum} s ({maximum_name})"
    if not isinstance(value, Duration):
        problems.add(setting, value, allowed)
        return None
    seconds = value.to_seconds(integral=False)
    if seconds != int(seconds) or not minimum <= seconds <= maximum:
        problems.add(setting, value.to_human_string(), allowed)
        return None
    return int(seconds)


def _check_history_budget(problems: Problems, runtime_seconds: int, poll_seconds: int) -> None:
    """The Kubernetes polling loop must fit in one execution's history (:data:`HISTORY_EVENT_QUOTA`)."""
    polls = math.ceil(runtime_seconds / poll_seconds)
    budget = (HISTORY_EVENT_QUOTA - EVENTS_OUTSIDE_POLLING) // EVENTS_PER_POLL
    if polls > budget:
        shortest = math.ceil(runtime_seconds / budget)
        problems.add(
            "poll_interval",
            f"{poll_seconds} s",
            f"at least {shortest} s with max_runtime {runtime_seconds} s: {polls} polls of {EVENTS_PER_POLL} events "
            f"would pass the {HISTORY_EVENT_QUOTA} events of one execution's history (Step Functions quotas)",
        )

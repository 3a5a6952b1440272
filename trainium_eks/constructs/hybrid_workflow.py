"""HybridTrainingWorkflow: one Step Functions state machine that trains on SageMaker or on the EKS cluster, per run."""

from __future__ import annotations

import math
import re
from typing import Optional, Sequence, Union

from aws_cdk import ArnFormat, Duration, RemovalPolicy, Stack
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
from trainium_eks.constructs.job_sequence import JobSequence
from trainium_eks.constructs.logged_state_machine import logged_state_machine, state_machine_arn
from trainium_eks.constructs.private.release_template import release_name_expression, waiting_seconds
from trainium_eks.constructs.private.sagemaker_training import (
    MAX_SAGEMAKER_RUNTIME_SECONDS,
    SAGEMAKER_ENI_ACTIONS,
    SAGEMAKER_ENI_PERMISSION_ACTIONS,
    SAGEMAKER_EVENTS_RULE,
    SAGEMAKER_LOG_GROUP,
    SAGEMAKER_METRICS_NAMESPACE,
    SAGEMAKER_VPC_ACTIONS,
    SAGEMAKER_VPC_DESCRIBE_ACTIONS,
    TRAINING_CHANNEL,
    sagemaker_types_for,
    training_job_request,
)
from trainium_eks.constructs.private.trainjob_template import (
    EXECUTION_ANNOTATION,
    HYPERPARAMETERS_ENV,
    JOB_NAME_ENV,
    RUN_ID_ENV,
    check_train_job,
)
from trainium_eks.constructs.private.workflow_checks import check_endpoint, check_history_budget, whole_seconds
from trainium_eks.constructs.private.workflow_definition import (
    JOB_SUFFIX_LENGTH,
    KUBERNETES_TRAINING_FAILED,
    MAX_HYPERPARAMETERS,
    RELEASE_FAILED,
    RUNTIMES,
    TRAINJOB_GONE,
    job_name_expression,
    workflow_definition,
)
from trainium_eks.constructs.workflow_run_cleanup import WorkflowRunCleanup
from trainium_eks.core.cfn_text import cfn_text
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
    nearest,
)
from trainium_eks.facts.catalog import Accelerator
from trainium_eks.manifests.access.workflow_access import WORKFLOW_GROUP, WorkflowAccessChart, check_workflow_group
from trainium_eks.manifests.jobs.train_job import TrainJobChart
from trainium_eks.moved import moved_names

__all__ = [
    "DEFAULT_DATA_DIRECTORY",
    "DEFAULT_MAX_RUNTIME",
    "DEFAULT_OUTPUT_PREFIX",
    "DEFAULT_POLL_INTERVAL",
    "DEFAULT_SAGEMAKER_INSTANCE_COUNT",
    "DEFAULT_SAGEMAKER_INSTANCE_TYPE",
    "DEFAULT_SAGEMAKER_MAX_INSTANCE_COUNT",
    "DEFAULT_VOLUME_SIZE_GIB",
    "EXECUTION_ANNOTATION",
    "HYPERPARAMETERS_ENV",
    "JOB_NAME_ENV",
    "JOB_SUFFIX_LENGTH",
    "KUBERNETES_TRAINING_FAILED",
    "MAX_HYPERPARAMETERS",
    "RELEASE_FAILED",
    "RUNTIMES",
    "RUN_ID_ENV",
    "TRAINJOB_GONE",
    "SAGEMAKER_VPC_ACTIONS",
    "TRAINING_CHANNEL",
    "HybridTrainingWorkflow",
    "sagemaker_types_for",
]


DEFAULT_SAGEMAKER_INSTANCE_TYPE = "ml.m5.xlarge"
"""4 vCPUs, 16 GiB, no accelerator: the CPU twin of the default Kubernetes node group of the Kubeflow system."""

DEFAULT_SAGEMAKER_INSTANCE_COUNT = 2
DEFAULT_VOLUME_SIZE_GIB = 50
"""The training instances' ML storage volume (``/opt/ml``: the model and local checkpoints; the data is read from
EFS, not copied)."""

DEFAULT_SAGEMAKER_MAX_INSTANCE_COUNT = 4
"""The most instances a run may ask SageMaker for (``node_count``), by default: a request is the only thing between
whoever may start an execution and that many instances of the largest allowed type for ``max_runtime``."""

DEFAULT_MAX_RUNTIME = Duration.hours(24)

DEFAULT_POLL_INTERVAL = Duration.minutes(1)
"""How often the Kubernetes branch reads the TrainJob's status (``eks:runJob.sync`` would poll every 1 to 5
minutes)."""


DEFAULT_DATA_DIRECTORY = "/cifar10"
"""The data set's directory on the file system. With the static EFS volume of ``EfsVolumeChart`` the claim mounts
the file system's root, so pods that read ``/data/cifar10`` read ``/cifar10`` on EFS."""

DEFAULT_OUTPUT_PREFIX = "sagemaker"


CLEANUP_ID = "Cleanup"
"""Construct id of the :class:`WorkflowRunCleanup`, whose state machine shares the workflow's role."""

_OUTPUT_PREFIX = re.compile(r"[A-Za-z0-9!_.*'()-]+(/[A-Za-z0-9!_.*'()-]+)*")


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

    **Kubernetes branch**: every run's gang gets all its nodes or holds none, as the stacks' own gangs do:
    ``eks:call`` (REST) creates the run's release Job
    (:class:`~trainium_eks.manifests.jobs.job_release.JobReleaseChart`'s Job, rendered with the run's names:
    :func:`~trainium_eks.constructs.private.release_template.release_template`), which holds the gang's nodes with
    capacity Jobs, then creates the TrainJob rendered by ``train_job`` with the run's name, node count,
    ``TRAINING_HYPERPARAMETERS``, ``TRAINING_JOB_NAME`` (for per-run paths in the template's arguments, such as
    ``--output-dir /data/output/${TRAINING_JOB_NAME}``) and ``TRAINING_RUN_ID`` (the execution's ARN), and watches
    it, holding its nodes again when a restart stalls
    (:class:`~trainium_eks.manifests.jobs.job_release_program.GangWatch`). Without the release, a run whose gang fits
    in part on warm nodes would wait for the rest until its deadline: Volcano marks the placed pods ``Schedulable``
    and Karpenter provisions only for ``Unschedulable`` ones. A Wait loop reads the TrainJob every ``poll_interval``
    (a list by name, keeping only the one this execution's release created and that is not being deleted) and ends in
    ``Kubernetes training succeeded`` on the condition ``Complete``, in ``Kubernetes training failed`` with the
    ``Failed`` condition's reason and message, in ``Kubernetes release failed`` (:data:`RELEASE_FAILED`, saying
    whether the TrainJob had run) when the release failed, in ``Kubernetes training gone`` (:data:`TRAINJOB_GONE`)
    when the TrainJob was deleted by someone else after its release ended, or deletes the release (and with it the
    TrainJob) and fails once ``max_runtime`` of TrainJob time is spent, or once the release has gone without a
    TrainJob for longer than its capacity settings allow
    (:func:`~trainium_eks.constructs.private.release_template.waiting_seconds`: every capacity attempt and pause, for
    the first start and each restart; 7 h 20 min by default). ``max_runtime`` counts only while the TrainJob exists,
    as its ``activeDeadlineSeconds`` does; the release's deadline covers both. The releases' service account,
    Roles and program come from ``jobs`` (applied once per namespace, shared with the stack's own jobs), and the
    state machine is created after them. Why not ``eks:runJob.sync``: it runs only ``batch/v1`` Jobs and waits for
    their end, so the TrainJob's status and failure reason would only be in the release's logs; it polls every 1 to
    5 minutes (Step Functions developer guide, connect-eks.html, which points to ``eks:call`` for more control over
    polling). The EKS integration reaches only a public API endpoint (same page): a private-only cluster is refused
    at synth.

    **Access**: the state machine's role has the SageMaker statements of Step Functions' own policy template
    (sagemaker-iam.html) scoped to jobs named ``<base>-*``, ``iam:PassRole`` of the job role to SageMaker only, and in
    the cluster one EKS access entry with the Kubernetes group ``kubernetes_group`` and no access policy, bound by
    :class:`~trainium_eks.manifests.access.workflow_access.WorkflowAccessChart` to create, get and delete Jobs and to
    list TrainJobs in ``namespace``. The job's role may pull the image, write its logs and metrics, place network
    interfaces in the stack's VPC (``ec2:Vpc``) and put objects under the output prefix. Trust: the state machine's role
    only by the two state machines that use it (the workflow's and the cleanup's, ``aws:SourceArn`` by the names
    :func:`~trainium_eks.constructs.logged_state_machine.state_machine_name` gives them, no reference to them) of the
    stack's account; the job's role only by SageMaker of the stack's account and region (``aws:SourceAccount``,
    ``aws:SourceArn`` like ``arn:...:sagemaker:<region>:<account>:*``: SageMaker developer guide,
    security-confused-deputy-prevention.html). The state machine logs every event to a log group (one year; CloudWatch
    Logs encrypts it) and traces with X-Ray.

    **No run outlives its execution**: a TrainJob carries ``activeDeadlineSeconds`` of ``max_runtime`` (the Trainer then
    fails it and deletes its JobSet: kubeflow/trainer v2.3.0 ``pkg/controller/trainjob_controller.go``
    ``reconcileDeadline``), and an execution that fails for another reason than a failed TrainJob, times out or is
    stopped has its release deleted, and with it the TrainJob, by
    :class:`~trainium_eks.constructs.workflow_run_cleanup.WorkflowRunCleanup` (an EventBridge rule on the execution's
    status and an Express state machine); a failed TrainJob, or a failed release, is kept for its logs (its JobSet has
    already deleted its running Jobs; a failed release has given back the nodes it held). A SageMaker job of a stopped
    execution is stopped by Step Functions itself (``.sync`` integrations).

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
    :param sagemaker_max_instance_count: The most instances a run may ask for; a request for more is refused.
        Default: :data:`DEFAULT_SAGEMAKER_MAX_INSTANCE_COUNT`.
    :param sagemaker_instance_types: The SageMaker types a run may ask for (``instance_type``), among those the image
        runs on; ``sagemaker_instance_type`` must be one. Default: every type of the catalog the image runs on.
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
    :param jobs: The ``JobSequence`` whose release service account, Roles and program the runs' releases use (the
        stack's own, so that each is applied once per namespace). Default: a sequence of the workflow's own, applied
        after ``apply_after``.
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
        sagemaker_max_instance_count: int = DEFAULT_SAGEMAKER_MAX_INSTANCE_COUNT,
        sagemaker_instance_types: Optional[Sequence[str]] = None,
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
        jobs: Optional[JobSequence] = None,
    ) -> None:
        super().__init__(scope, id_)
        problems = Problems(self.node.path)
        eks_cluster = cluster.cluster if isinstance(cluster, TrainingCluster) else cluster
        if check_cluster(problems, "cluster", eks_cluster, "kubectl_provider"):
            check_endpoint(self, problems, eks_cluster, endpoint_access)
        if check_instance(problems, "train_job", train_job, TrainJobChart, "a TrainJobChart (the TrainJob template)"):
            check_train_job(problems, train_job, namespace)
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
        if sagemaker_instance_types is not None:
            if not isinstance(sagemaker_instance_types, (list, tuple)) or not sagemaker_instance_types:
                problems.add("sagemaker_instance_types", sagemaker_instance_types, "a non-empty list of types, or None")
            else:
                for name in sagemaker_instance_types:
                    if name not in allowed_types:
                        problems.add(
                            "sagemaker_instance_types",
                            name,
                            f"a SageMaker training type (ml.*) of the catalog the image runs on"
                            f"{nearest(name, allowed_types)}: {', '.join(allowed_types)}",
                        )
                allowed_types = [name for name in allowed_types if name in sagemaker_instance_types]
        if sagemaker_instance_type not in allowed_types:
            problems.add(
                "sagemaker_instance_type",
                sagemaker_instance_type,
                f"a SageMaker training type (ml.*) of the catalog the image runs on"
                f"{nearest(sagemaker_instance_type, allowed_types)}: {', '.join(allowed_types)}",
            )
        if check_integer(problems, "sagemaker_instance_count", sagemaker_instance_count, minimum=1):
            check_integer(
                problems,
                "sagemaker_max_instance_count",
                sagemaker_max_instance_count,
                minimum=sagemaker_instance_count,
            )
        check_integer(problems, "volume_size_gib", volume_size_gib, minimum=1)
        runtime_seconds = whole_seconds(
            problems, "max_runtime", max_runtime, 60, MAX_SAGEMAKER_RUNTIME_SECONDS, "SageMaker's 28 days"
        )
        poll_seconds = whole_seconds(problems, "poll_interval", poll_interval, 10, 3600, "one hour")
        waiting = waiting_seconds(train_job.manifest) if isinstance(train_job, TrainJobChart) else 0
        if runtime_seconds and poll_seconds:
            check_history_budget(problems, runtime_seconds, poll_seconds, waiting)
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
        if jobs is not None:
            check_instance(problems, "jobs", jobs, JobSequence, "a JobSequence of the same cluster, or None")
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

        self.sagemaker_role = self._new_sagemaker_role(image_repository, vpc)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal(
                "states.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnEquals": {
                        "aws:SourceArn": [
                            state_machine_arn(stack, self.node.path),
                            state_machine_arn(stack, f"{self.node.path}/{CLEANUP_ID}"),
                        ]
                    },
                },
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
        self.access_chart = WorkflowAccessChart(group=kubernetes_group, namespace=namespace)
        self.access = AppliedChart(
            self, "Access", cluster=eks_cluster, chart=self.access_chart, after=list(apply_after)
        )

        start = workflow_definition(
            self,
            cluster=eks_cluster,
            train_job=train_job,
            namespace=namespace,
            default_runtime=default_runtime,
            sagemaker_arguments=training_job_request(
                role_arn=self.sagemaker_role.role_arn,
                image_uri=image_uri or train_job.workload.image,
                security_group_id=self.sagemaker_security_group.security_group_id,
                output_path=f"s3://{self.output_bucket.bucket_name}/{self.output_prefix}/",
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
            sagemaker_max_nodes=sagemaker_max_instance_count,
            poll_seconds=poll_seconds,
            max_polls=self.max_polls,
            deadline_seconds=runtime_seconds,
            waiting_seconds=waiting,
            data_job=data_job,
        )
        self.log_group, self.state_machine = logged_state_machine(
            self,
            start=start,
            state_machine_type=sfn.StateMachineType.STANDARD,
            role=self.role,
            comment="Train on SageMaker or on the EKS cluster, chosen by the request's training_runtime",
        )
        if jobs is None:
            jobs = JobSequence(self, "Releases", cluster=eks_cluster, prerequisites=list(apply_after))
        self.jobs = jobs
        self.state_machine.node.add_dependency(*jobs.release_prerequisites(namespace, "trainjob"))
        self.cleanup = WorkflowRunCleanup(
            self,
            CLEANUP_ID,
            workflow=self.state_machine,
            role=self.role,
            cluster=eks_cluster,
            jobs_path=f"/apis/batch/v1/namespaces/{namespace}/jobs",
            release_name=lambda execution_name: release_name_expression(
                f"({job_name_expression(self.job_base_name, execution_name)})"
            ),
            keep_on_error=[KUBERNETES_TRAINING_FAILED, RELEASE_FAILED],
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

    def _new_sagemaker_role(
        self, repository: Union[ecr.IRepository, ecr_assets.DockerImageAsset], vpc: ec2.IVpc
    ) -> iam.Role:
        stack = Stack.of(self)
        self._output_objects_arn = self.output_bucket.arn_for_objects(f"{self.output_prefix}/*")
        role = iam.Role(
            self,
            "SageMakerRole",
            assumed_by=iam.ServicePrincipal(
                "sagemaker.amazonaws.com", conditions=sagemaker_trust_conditions(stack.account, self._sagemaker_arns())
            ),
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
            iam.PolicyStatement(
                sid="TrainingNetworkInterfaces",
                actions=list(SAGEMAKER_ENI_ACTIONS),
                resources=["*"],
                conditions={"ArnEquals": {"ec2:Vpc": self._vpc_arn(vpc)}},
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="TrainingNetworkDescriptions",
                actions=list(SAGEMAKER_ENI_PERMISSION_ACTIONS + SAGEMAKER_VPC_DESCRIBE_ACTIONS),
                resources=["*"],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ModelOutput",
                actions=["s3:PutObject", "s3:AbortMultipartUpload"],
                resources=[self._output_objects_arn],
            )
        )
        return role

    def _sagemaker_arns(self) -> str:
        """``arn:<partition>:sagemaker:<region>:<account>:*``: the SageMaker resources of this account and region."""
        return Stack.of(self).format_arn(service="sagemaker", resource="*", arn_format=ArnFormat.NO_RESOURCE_NAME)

    def _vpc_arn(self, vpc: ec2.IVpc) -> str:
        return Stack.of(self).format_arn(service="ec2", resource="vpc", resource_name=vpc.vpc_id)

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
            "ecr:GetAuthorizationToken, cloudwatch:PutMetricData (limited to SageMaker's training namespace by "
            "cloudwatch:namespace) and the ec2:Describe* calls SageMaker makes to place a job in the VPC have no "
            "resource-level permissions (Service Authorization Reference, Amazon EC2); creating and deleting network "
            "interfaces have, with generated interface ids, so they are on '*' limited by the ec2:Vpc condition to "
            "the stack's VPC (the condition key of the network-interface, subnet and security-group resource types); "
            "the interface-permission actions stay on '*' without it (not every resource type they authorize on is "
            "known to carry ec2:Vpc, and a condition on a missing key would deny them).",
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


def sagemaker_trust_conditions(account: str, source_arn: str) -> dict:
    """The confused-deputy conditions of a role SageMaker assumes: ``aws:SourceAccount`` the stack's account and
    ``aws:SourceArn`` like ``source_arn``. Source: SageMaker developer guide, "Cross-service confused deputy prevention"
    (security-confused-deputy-prevention.html: both global keys in the trust policy, with wildcards for the parts of
    the ARN that are not known, the account ID in both the same)."""
    return {"StringEquals": {"aws:SourceAccount": account}, "ArnLike": {"aws:SourceArn": source_arn}}


def _resource_finding(stack: Stack, arn: str) -> str:
    """The id cdk-nag gives a finding on the IAM resource ``arn``: ``Resource::`` and its CloudFormation form as text
    (:func:`~trainium_eks.core.cfn_text.cfn_text`)."""
    return "Resource::" + cfn_text(stack.resolve(arn))


__getattr__ = moved_names(
    __name__,
    {
        **{
            name: f"trainium_eks.constructs.private.workflow_definition.{name}"
            for name in ("EKS_CALL", "SAGEMAKER_TRAINING_SYNC", "request_problems")
        },
        **{
            name: f"trainium_eks.constructs.private.workflow_checks.{name}"
            for name in ("EVENTS_OUTSIDE_POLLING", "EVENTS_PER_POLL", "HISTORY_EVENT_QUOTA")
        },
        "EXECUTION_ARN": "trainium_eks.constructs.private.trainjob_template.EXECUTION_ARN",
        "trainjob_template": "trainium_eks.constructs.private.trainjob_template.trainjob_template",
        "jsonata": "trainium_eks.constructs.private.jsonata.jsonata",
    },
)

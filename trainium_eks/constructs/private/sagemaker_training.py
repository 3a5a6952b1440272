"""The SageMaker side of the hybrid workflow: the ``CreateTrainingJob`` request, the training types an image may run
on, and the AWS names the job's role and the state machine's role are scoped to."""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

from aws_cdk import aws_ec2 as ec2

from trainium_eks.constructs.efs_storage import EfsStorage
from trainium_eks.constructs.private.jsonata import jsonata
from trainium_eks.facts.catalog import INSTANCE_CATALOG, SAGEMAKER_TRAINING_TYPES, Accelerator

MAX_SAGEMAKER_RUNTIME_SECONDS = 28 * 24 * 3600
"""The largest ``StoppingCondition.MaxRuntimeInSeconds``: 28 days. Source: SageMaker API reference,
API_StoppingCondition.html."""

TRAINING_CHANNEL = "training"
"""The input channel the image's launcher reads (``/opt/ml/input/data/training``)."""

SAGEMAKER_EVENTS_RULE = "StepFunctionsGetEventsForSageMakerTrainingJobsRule"
"""The EventBridge rule Step Functions manages for ``createTrainingJob.sync``. Source: Step Functions developer
guide, "IAM policies for Amazon SageMaker AI" (sagemaker-iam.html)."""

SAGEMAKER_LOG_GROUP = "/aws/sagemaker/TrainingJobs"

SAGEMAKER_METRICS_NAMESPACE = "/aws/sagemaker/TrainingJobs"

SAGEMAKER_ENI_ACTIONS = ("ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface")
"""The network-interface actions that authorize on the interface (and, to create one, its subnet and security
groups), resource types with the ``ec2:Vpc`` condition key (Service Authorization Reference, Amazon EC2), so the job's
role is limited to interfaces in the stack's VPC."""

SAGEMAKER_ENI_PERMISSION_ACTIONS = ("ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterfacePermission")
"""The interface-permission actions of :data:`SAGEMAKER_VPC_ACTIONS`, on ``*`` without a condition: whether each
of their resource types carries ``ec2:Vpc`` is not verified, and a condition on a key a request lacks denies it (the
job would fail to start, or leave its interfaces behind)."""

SAGEMAKER_VPC_DESCRIBE_ACTIONS = (
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeVpcs",
    "ec2:DescribeDhcpOptions",
    "ec2:DescribeSubnets",
    "ec2:DescribeSecurityGroups",
)
"""The describe actions of :data:`SAGEMAKER_VPC_ACTIONS`: no resource-level permissions (Service Authorization
Reference, Amazon EC2), so on ``*``."""

SAGEMAKER_VPC_ACTIONS = SAGEMAKER_ENI_ACTIONS + SAGEMAKER_ENI_PERMISSION_ACTIONS + SAGEMAKER_VPC_DESCRIBE_ACTIONS
"""What a training job's role needs to place the job in a VPC. Source: SageMaker developer guide, "CreateTrainingJob
API: Execution Role Permissions" (sagemaker-roles.html), which lists these actions (on ``Resource: *``; the library
adds the ``ec2:Vpc`` condition to :data:`SAGEMAKER_ENI_ACTIONS`)."""


def training_job_request(
    *,
    role_arn: str,
    image_uri: str,
    efs: EfsStorage,
    subnets: Sequence[ec2.ISubnet],
    security_group_id: str,
    output_path: str,
    data_directory: str,
    volume_size_gib: int,
    runtime_seconds: int,
    network_isolation: bool,
    inter_container_encryption: bool,
) -> Dict[str, Any]:
    """``CreateTrainingJob``'s request, with JSONata where the run decides (name, hyperparameters, instance type and
    count): the EFS directory ``data_directory`` read-only as the channel :data:`TRAINING_CHANNEL`, the model under
    ``output_path`` (an ``s3://`` URL ending in ``/``)."""
    return {
        "TrainingJobName": jsonata("$job_name"),
        "RoleArn": role_arn,
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
        "OutputDataConfig": {"S3OutputPath": output_path},
        "ResourceConfig": {
            "InstanceType": jsonata("$instance_type"),
            "InstanceCount": jsonata("$node_count"),
            "VolumeSizeInGB": volume_size_gib,
        },
        "VpcConfig": {"SecurityGroupIds": [security_group_id], "Subnets": [subnet.subnet_id for subnet in subnets]},
        "StoppingCondition": {"MaxRuntimeInSeconds": runtime_seconds},
        "EnableNetworkIsolation": network_isolation,
        "EnableInterContainerTrafficEncryption": inter_container_encryption,
    }


def sagemaker_types_for(accelerators: Sequence[Accelerator]) -> List[str]:
    """The SageMaker training types of the catalog whose instances have one of ``accelerators``."""
    return [
        name
        for name in SAGEMAKER_TRAINING_TYPES
        if INSTANCE_CATALOG[name.removeprefix("ml.")].accelerator in tuple(accelerators)
    ]

"""Preflight: the stack's checks of quotas, offerings, capacity and addresses, run first in the deploy by a Lambda."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from aws_cdk import Aws, CustomResource, Duration, RemovalPolicy, Stack, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from trainium_eks.constructs.cluster import TrainingCluster
from trainium_eks.constructs.efa_layout import EfaLayout
from trainium_eks.constructs.efs_storage import EfsStorage
from trainium_eks.constructs.lustre_storage import LustreStorage
from trainium_eks.constructs.node_capacity import CapacityKind, NodeCapacity
from trainium_eks.constructs.training_node_group import TrainingNodeGroup
from trainium_eks.constructs.training_node_pool import TrainingNodePool
from trainium_eks.core.lambda_sources import ASSET_EXCLUDE, lambda_constants, lambda_source
from trainium_eks.core.nag import acknowledge
from trainium_eks.core.own_resources import own_resources
from trainium_eks.core.validation import Problems, check_instance
from trainium_eks.facts.catalog import INSTANCE_CATALOG, InstanceFacts

SOURCE = "preflight"
"""The handler's folder, ``lambda/preflight``: ``index.handler`` answers CloudFormation, ``preflight_checks`` holds
the checks that the command line (``python -m trainium_eks preflight``) runs too."""

RESOURCE_TYPE = "Custom::TrainiumEksPreflight"

DEFAULT_TIMEOUT = Duration.minutes(2)
"""How long the function may run. Default of :class:`Preflight`: the checks take seconds; the handler stops
starting checks 20 seconds before the end and answers CloudFormation in any case."""

RUNTIME = lambda_.Runtime.PYTHON_3_14
"""The newest Python runtime of aws-cdk-lib 2.275; it includes boto3, the checks' only dependency (Lambda developer
guide, "Lambda runtimes")."""

_CAPACITY_TYPES = {
    CapacityKind.ON_DEMAND: "on-demand",
    CapacityKind.CAPACITY_BLOCK: "capacity-block",
    CapacityKind.CAPACITY_RESERVATION: "reservation",
}


@dataclass(frozen=True)
class PlannedNodes:
    """A group of instances the stack launches, as the preflight checks it.

    :param name: The group's construct id (``SystemNodes`` for the cluster's system node group).
    :param instance: The instance type's facts.
    :param count: Nodes at most (a node group's maximum size, a Karpenter pool's node limit).
    :param availability_zone_id: The AZ ID they launch in, or None (several AZs: the system nodes).
    :param subnet_id: The subnet's ID when it exists before the deploy (a subnet the stack creates is None).
    :param subnet_created: Whether the stack itself creates the subnet (not another stack, nor before the deploy).
    :param ip_interfaces: Network interfaces per node that take an IPv4 address of the subnet.
    :param efa_interfaces: EFA devices per node.
    :param capacity: How the instances are bought.
    :param provisioning: ``karpenter`` (launched when pods need them) or ``node-group`` (launched by the deploy).
    """

    name: str
    instance: InstanceFacts
    count: int
    availability_zone_id: Optional[str]
    subnet_id: Optional[str]
    subnet_created: bool
    ip_interfaces: int
    efa_interfaces: int
    capacity: NodeCapacity
    provisioning: str

    def manifest(self) -> Dict[str, Any]:
        """The entry of the plan's ``nodes`` (``lambda/preflight/preflight_checks/__init__.py`` documents the plan)."""
        return {
            "name": self.name,
            "instanceType": self.instance.name,
            "count": self.count,
            "availabilityZoneId": self.availability_zone_id,
            "subnetId": self.subnet_id,
            "subnetCreated": self.subnet_created,
            "ipInterfaces": self.ip_interfaces,
            "efaInterfaces": self.efa_interfaces,
            "capacityReservationId": self.capacity.reservation_id,
            "capacityType": _CAPACITY_TYPES[self.capacity.kind],
            "provisioning": self.provisioning,
        }


class Preflight(Construct):
    """Checks, first in the deploy, what would otherwise fail 20 to 30 minutes into it: the On-Demand vCPU quotas of
    the instance families the stack launches against their use, each instance type's offering in its AZ ID and its
    EFA, a Capacity Block's or reservation's type, AZ, size and state, the free addresses of an existing node subnet,
    the Kubernetes version in the region, and the storage quotas the API exposes. The checks are those of
    ``lambda/preflight/preflight_checks/``, which ``python -m trainium_eks preflight`` runs from the user's
    credentials before a deploy.

    Build it last in a stack: it reads the plan from the library's constructs already in the stack
    (:class:`TrainingCluster`, :class:`TrainingNodePool`, :class:`TrainingNodeGroup`, :class:`LustreStorage`,
    :class:`EfsStorage`), and makes every other resource of the stack depend on its custom resource
    (``Custom::TrainiumEksPreflight``). Nothing comes before it but its own function, role and log group, so a failed
    check fails the deploy within about a minute, with one message naming each failed check and what to do, and the
    rollback has nothing else to delete. A check that could not be made (a missing permission, an API the partition
    lacks) is reported and never fails the deploy alone.

    The custom resource holds the plan as one JSON property (``Plan``): it runs on create and whenever the plan
    changes (an update compares the quota needs with the previous plan's, since the stack's running instances are
    already in the use), and does nothing on delete.

    The function's role may call exactly the read-only actions the checks make (``preflight_checks.IAM_ACTIONS``),
    on every resource: none of them has resource-level permissions (Service Authorization Reference: Amazon EC2,
    Service Quotas, CloudWatch, Amazon EKS, Amazon FSx, Amazon EFS); and ``cloudformation:DescribeStacks`` on its own
    stack (``AWS::StackId``, the ARN the request names), to answer an update during a rollback without checking
    (``HANDLER_IAM_ACTIONS``), so that a rollback never fails on the checks of the plan it returns to.

    :param timeout: How long the function may run, 1 to 5 minutes. Default: 2 minutes.
    :param log_retention: Retention of the function's log group, which outlives the stack (retained, as every log
        group of the library: a deploy's record is not deleted with it). Default: one year.
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        timeout: Duration = DEFAULT_TIMEOUT,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
    ) -> None:
        super().__init__(scope, id_)
        problems = Problems(self.node.path)
        if check_instance(problems, "timeout", timeout, Duration, "a Duration"):
            if not 60 <= timeout.to_seconds() <= 300:
                problems.add("timeout", timeout.to_human_string(), "from 1 to 5 minutes")
        check_instance(problems, "log_retention", log_retention, logs.RetentionDays, "a logs.RetentionDays")
        problems.raise_if_any()
        stack = Stack.of(self)
        checks = {
            **lambda_constants(SOURCE, "preflight_checks/plan", "PLAN_VERSION"),
            **lambda_constants(SOURCE, "preflight_checks/aws_context", "IAM_ACTIONS", "HANDLER_IAM_ACTIONS"),
        }
        self.plan: Dict[str, Any] = plan_of(stack, checks["PLAN_VERSION"])
        """The plan the checks read (JSON form), from the library's constructs in the stack."""
        self.log_group = logs.LogGroup(self, "Logs", retention=log_retention, removal_policy=RemovalPolicy.RETAIN)
        # One inline policy: the function waits for its role only, not for a separate policy resource.
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"The preflight checks of {stack.stack_name}: read-only calls",
            inline_policies={
                "Checks": iam.PolicyDocument(
                    statements=[
                        iam.PolicyStatement(
                            actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                            resources=[self.log_group.log_group_arn],
                        ),
                        iam.PolicyStatement(actions=sorted(checks["IAM_ACTIONS"]), resources=["*"]),
                        iam.PolicyStatement(actions=list(checks["HANDLER_IAM_ACTIONS"]), resources=[Aws.STACK_ID]),
                    ]
                )
            },
        )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5",
            "The preflight's calls are read-only Describe/Get actions without resource-level permissions (Service "
            "Authorization Reference of EC2, Service Quotas, CloudWatch, EKS, FSx and EFS), so they name every "
            "resource.",
            "Resource::*",
        )
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            handler="index.handler",
            code=lambda_.Code.from_asset(str(lambda_source(SOURCE)), exclude=list(ASSET_EXCLUDE)),
            timeout=timeout,
            memory_size=256,
            role=self.role,
            log_group=self.log_group,
            description=f"trainium-eks preflight of {stack.stack_name}",
        )
        self.resource = CustomResource(
            self,
            "Checks",
            service_token=self.function.function_arn,
            resource_type=RESOURCE_TYPE,
            properties={"Plan": json.dumps(self.plan, sort_keys=True, separators=(",", ":"))},
        )
        _gate(stack, self)


def plan_of(stack: Stack, version: int) -> Dict[str, Any]:
    """The plan of what ``stack`` launches, from the library's constructs in it: the cluster's Kubernetes version and
    system nodes, every training node pool and group, the file systems. Values the deploy decides (a subnet the
    stack creates, a region-agnostic stack's region, a capacity reservation or AZ ID that is a token) are None, so that
    the plan refers to no resource of the stack."""
    nodes: List[PlannedNodes] = []
    file_systems: List[Dict[str, Any]] = []
    kubernetes_version: Optional[str] = None
    for construct in stack.node.find_all():
        if isinstance(construct, TrainingCluster):
            kubernetes_version = construct.kubernetes_version
            nodes.append(
                PlannedNodes(
                    name="SystemNodes",
                    instance=INSTANCE_CATALOG[construct.system_instance_type],
                    count=construct.system_node_count,
                    availability_zone_id=None,
                    subnet_id=None,
                    subnet_created=False,
                    ip_interfaces=1,
                    efa_interfaces=0,
                    capacity=NodeCapacity.on_demand(),
                    provisioning="node-group",
                )
            )
        elif isinstance(construct, (TrainingNodePool, TrainingNodeGroup)):
            nodes.append(_planned_training_nodes(construct))
        elif isinstance(construct, LustreStorage):
            file_systems.append(
                {
                    "kind": "lustre",
                    "name": construct.node.path.removeprefix(f"{stack.node.path}/"),
                    "storageGib": construct.storage_capacity_gib,
                    "deploymentType": construct.deployment_type.name,
                    "throughputPerUnitStorage": construct.throughput_per_tib,
                }
            )
        elif isinstance(construct, EfsStorage):
            file_systems.append({"kind": "efs"})
    return {
        "version": version,
        "stack": stack.stack_name,
        "region": stack.region if not Token.is_unresolved(stack.region) else None,
        "kubernetesVersion": kubernetes_version,
        "nodes": [planned.manifest() for planned in nodes],
        "fileSystems": file_systems,
    }


def _planned_training_nodes(nodes: Any) -> PlannedNodes:
    instance: InstanceFacts = nodes.instance
    count = nodes.max_nodes if isinstance(nodes, TrainingNodePool) else nodes.max_size
    if instance.efa_interfaces and nodes.efa_layout is EfaLayout.ALL_EFA:
        ip_interfaces = nodes.efa_interfaces
    else:
        ip_interfaces = 1
    subnet_id = nodes.subnet.subnet_id
    capacity = nodes.capacity
    if capacity.reservation_id is not None and Token.is_unresolved(capacity.reservation_id):
        # A reservation the stack itself makes: nothing to check before the deploy, and a reference to it would put
        # it before the preflight, which comes first.
        capacity = NodeCapacity(capacity.kind)
    zone = nodes.availability_zone_id
    return PlannedNodes(
        name=nodes.node.id,
        instance=instance,
        count=count,
        availability_zone_id=None if zone is None or Token.is_unresolved(zone) else zone,
        subnet_id=None if Token.is_unresolved(subnet_id) else subnet_id,
        subnet_created=bool(own_resources(Stack.of(nodes), [subnet_id], [ec2.CfnSubnet])),
        ip_interfaces=ip_interfaces,
        efa_interfaces=nodes.efa_interfaces,
        capacity=capacity,
        provisioning="karpenter" if isinstance(nodes, TrainingNodePool) else "node-group",
    )


def _gate(stack: Stack, preflight: Preflight) -> None:
    """Make every resource of ``stack`` outside ``preflight`` depend on its custom resource: each other top-level
    construct of the stack depends on it, which CDK turns into a ``DependsOn`` of each of their resources (one call
    per top-level construct instead of one per resource; the templates are the same)."""
    for child in stack.node.children:
        if child is not preflight:
            child.node.add_dependency(preflight.resource)

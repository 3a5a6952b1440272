"""KarpenterController: Karpenter on the system nodes, with its IAM, its interruption queue and its node role."""

from __future__ import annotations

from typing import Dict, List, Sequence

from aws_cdk import Aws, Duration, Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from constructs import Construct, IConstruct

from trainium_eks.constructs.cluster_addons import helm_timeout
from trainium_eks.constructs.node_role import NodeRole
from trainium_eks.constructs.pod_identity_role import PodIdentityRole
from trainium_eks.core.conventions import SYSTEM_NODE_LABELS
from trainium_eks.core.nag import acknowledge
from trainium_eks.core.validation import Problems, check_cluster, implements
from trainium_eks.facts import versions

KARPENTER_NAMESPACE = "kube-system"
"""Where Karpenter runs, as in its getting-started guide (``KARPENTER_NAMESPACE=kube-system``)."""

KARPENTER_SERVICE_ACCOUNT = "karpenter"
"""The chart's service account (its fullname, ``karpenter``, for the release name ``karpenter``)."""

INTERRUPTION_EVENTS: Dict[str, Sequence[str]] = {
    "ScheduledChange": ("aws.health", "AWS Health Event"),
    "SpotInterruption": ("aws.ec2", "EC2 Spot Instance Interruption Warning"),
    "Rebalance": ("aws.ec2", "EC2 Instance Rebalance Recommendation"),
    "InstanceStateChange": ("aws.ec2", "EC2 Instance State-change Notification"),
    "CapacityReservationInterruption": ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"),
}
"""The EventBridge rules of Karpenter's reference CloudFormation for v1.14 (rule -> event source and detail type;
aws/karpenter-provider-aws v1.14.1, website/content/en/docs/getting-started/getting-started-with-karpenter/
cloudformation.yaml): health events, Spot interruptions and rebalance recommendations, instance state changes, and
the two-minute interruption warning of an interruptible On-Demand Capacity Reservation (not a Capacity Block's end,
which the AWS provider acts on without an event: its capacity reservation expiration controller deletes a NodeClaim
40 minutes before its block ends, ``pkg/controllers/capacityreservation/expiration/controller.go``)."""

INTERRUPTION_RETENTION = Duration.minutes(5)
"""The queue's message retention (the reference template's ``MessageRetentionPeriod: 300``): a warning older than
that is past acting on."""

CONTROLLER_RESOURCES = {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}}
"""Requests of each of the two controller replicas on the system nodes (the chart sets none; Karpenter's docs size
the controller by cluster, and a cluster of a few NodePools is small)."""


class KarpenterController(Construct):
    """Karpenter (the official chart at :data:`~trainium_eks.facts.versions.KARPENTER`) in ``kube-system`` on the
    system nodes, with everything its reference CloudFormation for that version creates, scoped to this cluster:

    - the CRDs from the ``karpenter-crd`` chart (:data:`~trainium_eks.facts.versions.KARPENTER_CRD`; no pods, so it
      is installed as soon as the cluster exists, beside the system nodes), so that a new pin upgrades the CRDs too,
      then the controller chart, asked to skip its CRDs (``skip_crds=True``; aws-eks-v2's Helm handler in
      aws-cdk-lib 2.275.0 does not pass ``--skip-crds`` on, ``helm/__init__.py``, so Helm installs the chart's
      ``crds/`` where they are missing: none are, as the CRD release comes first; ``tests/e2e/test_deploy.py``); two
      replicas (the chart's
      hostname anti-affinity puts them on the two system nodes), ``settings.clusterName``,
      ``settings.interruptionQueue`` and ``AWS_REGION`` (:func:`controller_env`: IMDS is out of its pods' reach);
    - the controller's role through EKS Pod Identity (``kube-system/karpenter``), with the statements of the
      reference's six policies (node lifecycle, IAM integration, EKS integration, interruption, zonal shift, resource
      discovery). The reference scopes by the tag key ``kubernetes.io/cluster/<name>``; here the cluster name is a
      CloudFormation token, which cannot be part of a policy's condition key, so the same statements are scoped by
      the value of the ``eks:eks-cluster-name`` tag, which Karpenter puts on every instance, launch template, volume,
      interface and instance profile it creates (the reference requires it on creation);
    - the interruption queue (SQS-managed encryption, TLS only, 5 minutes retention) and the five EventBridge rules
      of :data:`INTERRUPTION_EVENTS`, each allowed to send to it;
    - the node role (:class:`NodeRole`, the managed node groups' policies: no CNI policy, no SSM; aws-node has its own
      role) with an EKS access entry of type
      ``EC2_LINUX``, which lets the kubelets of Karpenter's nodes join (a managed node group's role gets its entry
      from EKS; this role is the nodes' own, so that the two entries never collide).

    The pools themselves are :class:`~trainium_eks.constructs.training_node_pool.TrainingNodePool`; each applies its
    objects after :attr:`ready` and so is deleted before the controller, which then still terminates the nodes (the
    EC2NodeClass's finalizer holds ``kubectl delete`` until its NodeClaims are gone).

    :param cluster: The cluster (``aws_eks_v2``), with its kubectl provider. Required.
    :param after: What the controller is installed after (the system node group it runs on, the Pod Identity agent).
        Default: nothing.
    :param node_repair: Whether Karpenter replaces its nodes that report themselves unhealthy (Karpenter's node
        repair, the alpha feature gate ``NodeRepair``, which the chart leaves off: ``settings.featureGates``). With it,
        the controller deletes the NodeClaim of a node whose condition has been unhealthy for the AWS provider's
        toleration (aws/karpenter-provider-aws v1.14.1 ``pkg/cloudprovider/cloudprovider.go`` ``RepairPolicies``:
        ``AcceleratedHardwareReady`` False for 10 minutes; ``Ready`` False or Unknown, ``StorageReady``,
        ``NetworkingReady``, ``KernelReady``, ``ContainerRuntimeReady`` False for 30 minutes; the EKS node
        monitoring agent, a cluster add-on, sets all but ``Ready`` from the node's logs, Neuron errors included: EKS
        user guide, node-health.html), unless more than 20 % of its NodePool's nodes (rounded
        up: one of a pool of up to five) are unhealthy at once (kubernetes-sigs/karpenter v1.14.1
        ``pkg/controllers/node/health/controller.go``). The repair sets the NodeClaim's termination deadline to the
        moment it acts, so the node's pods get no grace period: Karpenter deletes them with a second's grace
        (``pkg/controllers/node/termination/terminator/terminator.go``) and terminates the instance, or, when the
        provider no longer finds the instance of a node that is not ready, removes the node without draining it
        (``termination/controller.go``), and the pod garbage collector fails its pods 40 to 80 s later; the gang that
        ran there restarts on a new node. The conditions and their durations are the provider's code, not settings.
        Default: ``True``.
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        cluster: eks.ICluster,
        after: Sequence[IConstruct] = (),
        node_repair: bool = True,
    ) -> None:
        super().__init__(scope, id_)
        problems = Problems(self.node.path)
        check_cluster(problems, "cluster", cluster, "kubectl_provider", "cluster_name", "cluster_arn")
        if not isinstance(after, (list, tuple)) or not all(implements(a, IConstruct) for a in after):
            problems.add("after", after, "a list of constructs (the system node group)")
        if not isinstance(node_repair, bool):
            problems.add("node_repair", node_repair, "True or False")
        problems.raise_if_any()
        self.cluster = cluster

        self.interruption_queue = sqs.Queue(
            self,
            "InterruptionQueue",
            retention_period=INTERRUPTION_RETENTION,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )
        acknowledge(
            self.interruption_queue,
            "AwsSolutions-SQS3",
            "Karpenter's interruption queue carries EC2 and Health warnings that are useless after a few minutes "
            "(5 minutes retention, as in Karpenter's reference template); a dead-letter queue would keep stale "
            "warnings.",
        )
        self.interruption_rules: List[events.Rule] = []
        for name, (source, detail_type) in INTERRUPTION_EVENTS.items():
            rule = events.Rule(
                self,
                f"{name}Rule",
                description=f"Karpenter interruption handling: {detail_type}",
                event_pattern=events.EventPattern(source=[source], detail_type=[detail_type]),
            )
            rule.add_target(targets.SqsQueue(self.interruption_queue))
            self.interruption_rules.append(rule)

        self.node_role = NodeRole(self, "NodeRole").role
        self.node_access = eks.AccessEntry(
            self,
            "NodeAccess",
            cluster=cluster,
            principal=self.node_role.role_arn,
            access_entry_type=eks.AccessEntryType.EC2_LINUX,
            access_policies=[],
        )

        self.role = PodIdentityRole(
            self,
            "ControllerRole",
            cluster=cluster,
            namespace=KARPENTER_NAMESPACE,
            service_account=KARPENTER_SERVICE_ACCOUNT,
            description=f"Karpenter controller ({KARPENTER_NAMESPACE}/{KARPENTER_SERVICE_ACCOUNT})",
        ).role
        # The statements go in the role's default AWS::IAM::Policy; the release (and through it every NodePool and
        # EC2NodeClass, applied after it) depends on that policy, so that a destroy, or a switch to node groups,
        # deletes the policy only after the controller has run the finalizers that need it (terminating instances,
        # deleting instance profiles: aws/karpenter-provider-aws v1.14.1 pkg/controllers/nodeclass/controller.go).
        self.controller_policy = [
            self.role.add_to_principal_policy(statement).policy_dependable
            for statement in controller_statements(
                cluster_name=cluster.cluster_name,
                cluster_arn=cluster.cluster_arn,
                node_role_arn=self.node_role.role_arn,
                queue_arn=self.interruption_queue.queue_arn,
            )
        ][0]
        acknowledge(
            self.role,
            "AwsSolutions-IAM5",
            "Karpenter's reference policies for v1.14: EC2 and instance-profile resources are created at run time with "
            "generated ids, so their ARNs are wildcards scoped by the eks:eks-cluster-name and karpenter.sh tags; "
            "Describe* and pricing:GetProducts have no resource-level permissions; SSM reads only public "
            "/aws/service/* parameters (the AMI of the pinned alias).",
            "Resource::*",
            "Resource::arn:<AWS::Partition>:ec2:<AWS::Region>::image/*",
            "Resource::arn:<AWS::Partition>:ec2:<AWS::Region>::snapshot/*",
            *(
                f"Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:*:{kind}/*"
                for kind in (
                    "security-group",
                    "subnet",
                    "capacity-reservation",
                    "placement-group",
                    "launch-template",
                    "fleet",
                    "instance",
                    "volume",
                    "network-interface",
                    "spot-instances-request",
                )
            ),
            "Resource::arn:<AWS::Partition>:iam::<AWS::AccountId>:instance-profile/*",
            "Resource::arn:<AWS::Partition>:ssm:<AWS::Region>::parameter/aws/service/*",
        )
        self.association = eks.CfnPodIdentityAssociation(
            self,
            "PodIdentity",
            cluster_name=cluster.cluster_name,
            namespace=KARPENTER_NAMESPACE,
            service_account=KARPENTER_SERVICE_ACCOUNT,
            role_arn=self.role.role_arn,
        )

        self.crds = eks.HelmChart(
            self,
            "Crds",
            cluster=cluster,
            repository=versions.KARPENTER_CRD.repository,
            chart=versions.KARPENTER_CRD.chart,
            version=versions.KARPENTER_CRD.version,
            release="karpenter-crd",
            namespace=KARPENTER_NAMESPACE,
            wait=True,
            timeout=helm_timeout(versions.KARPENTER_CRD),
        )
        self.release = eks.HelmChart(
            self,
            "Release",
            cluster=cluster,
            repository=versions.KARPENTER.repository,
            chart=versions.KARPENTER.chart,
            version=versions.KARPENTER.version,
            release="karpenter",
            namespace=KARPENTER_NAMESPACE,
            skip_crds=True,
            wait=True,
            timeout=helm_timeout(versions.KARPENTER),
            values={
                "settings": {
                    "clusterName": cluster.cluster_name,
                    "interruptionQueue": self.interruption_queue.queue_name,
                    "featureGates": {"nodeRepair": node_repair},
                },
                "serviceAccount": {"name": KARPENTER_SERVICE_ACCOUNT},
                "nodeSelector": {"kubernetes.io/os": "linux", **SYSTEM_NODE_LABELS},
                "controller": {
                    "image": {
                        "repository": versions.KARPENTER_CONTROLLER.repository,
                        "tag": versions.KARPENTER_CONTROLLER.tag,
                        "digest": versions.KARPENTER_CONTROLLER.digest,
                    },
                    "resources": CONTROLLER_RESOURCES,
                    "env": controller_env(Stack.of(self).region),
                },
            },
        )
        self.release.node.add_dependency(self.crds, self.association, self.node_access, self.controller_policy, *after)
        for rule in self.interruption_rules:
            self.release.node.add_dependency(rule)
        self.ready: List[IConstruct] = [self.release]
        """What a NodePool's objects are applied after: the controller, running (Helm waited for it)."""


def controller_env(region: str) -> List[Dict[str, str]]:
    """The controller's ``AWS_REGION``: Karpenter reads the region from IMDS when the SDK finds none
    (aws/karpenter-provider-aws v1.14.1 ``pkg/operator/operator.go``, ``NewOperator``: "retrieving region from IMDS",
    and it exits when that fails), and its pods (``hostNetwork: false``, charts/karpenter/values.yaml) cannot reach
    IMDS with the nodes' hop limit of 1 (:data:`~trainium_eks.core.conventions.IMDS_HOP_LIMIT`); the chart's
    ``controller.env`` sets it (values.yaml shows ``AWS_REGION`` as its example). The cluster endpoint is found with
    ``eks:DescribeCluster`` through Pod Identity, not IMDS."""
    return [{"name": "AWS_REGION", "value": region}]


def controller_statements(
    *, cluster_name: str, cluster_arn: str, node_role_arn: str, queue_arn: str
) -> List[iam.PolicyStatement]:
    """The statements of Karpenter's reference controller policies for v1.14 (aws/karpenter-provider-aws v1.14.1,
    website/content/en/docs/getting-started/getting-started-with-karpenter/cloudformation.yaml), each with the
    reference's Sid, scoped by ``eks:eks-cluster-name`` = ``cluster_name`` (see :class:`KarpenterController`)."""
    arn = f"arn:{Aws.PARTITION}:ec2:{Aws.REGION}"
    created = [
        f"{arn}:*:{kind}/*"
        for kind in ("fleet", "instance", "volume", "network-interface", "launch-template", "spot-instances-request")
    ]
    owned = {"StringEquals": {"aws:ResourceTag/eks:eks-cluster-name": cluster_name}}
    in_pool = {"aws:ResourceTag/karpenter.sh/nodepool": "*"}
    request = {"aws:RequestTag/eks:eks-cluster-name": cluster_name}
    profile = f"arn:{Aws.PARTITION}:iam::{Aws.ACCOUNT_ID}:instance-profile/*"
    region_tag = {"aws:RequestTag/topology.kubernetes.io/region": Aws.REGION}
    return [
        iam.PolicyStatement(
            sid="AllowScopedEC2InstanceAccessActions",
            actions=["ec2:RunInstances", "ec2:CreateFleet"],
            resources=[
                f"{arn}::image/*",
                f"{arn}::snapshot/*",
                *(
                    f"{arn}:*:{kind}/*"
                    for kind in ("security-group", "subnet", "capacity-reservation", "placement-group")
                ),
            ],
        ),
        iam.PolicyStatement(
            sid="AllowScopedEC2LaunchTemplateAccessActions",
            actions=["ec2:RunInstances", "ec2:CreateFleet"],
            resources=[f"{arn}:*:launch-template/*"],
            conditions={**owned, "StringLike": in_pool},
        ),
        iam.PolicyStatement(
            sid="AllowScopedEC2InstanceActionsWithTags",
            actions=["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
            resources=created,
            conditions={"StringEquals": request, "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"}},
        ),
        iam.PolicyStatement(
            sid="AllowScopedResourceCreationTagging",
            actions=["ec2:CreateTags"],
            resources=created,
            conditions={
                "StringEquals": {
                    **request,
                    "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"],
                },
                "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
            },
        ),
        iam.PolicyStatement(
            sid="AllowScopedResourceTagging",
            actions=["ec2:CreateTags"],
            resources=[f"{arn}:*:instance/*"],
            conditions={
                **owned,
                "StringLike": in_pool,
                "StringEqualsIfExists": request,
                "ForAllValues:StringEquals": {
                    "aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]
                },
            },
        ),
        iam.PolicyStatement(
            sid="AllowScopedDeletion",
            actions=["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
            resources=[f"{arn}:*:instance/*", f"{arn}:*:launch-template/*"],
            conditions={**owned, "StringLike": in_pool},
        ),
        iam.PolicyStatement(
            sid="AllowPassingInstanceRole",
            actions=["iam:PassRole"],
            resources=[node_role_arn],
            conditions={"StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}},
        ),
        iam.PolicyStatement(
            sid="AllowScopedInstanceProfileCreationActions",
            actions=["iam:CreateInstanceProfile"],
            resources=[profile],
            conditions={
                "StringEquals": {**request, **region_tag},
                "StringLike": {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"},
            },
        ),
        iam.PolicyStatement(
            sid="AllowScopedInstanceProfileTagActions",
            actions=["iam:TagInstanceProfile"],
            resources=[profile],
            conditions={
                "StringEquals": {
                    "aws:ResourceTag/eks:eks-cluster-name": cluster_name,
                    "aws:ResourceTag/topology.kubernetes.io/region": Aws.REGION,
                    **request,
                    **region_tag,
                },
                "StringLike": {
                    "aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*",
                    "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*",
                },
            },
        ),
        iam.PolicyStatement(
            sid="AllowScopedInstanceProfileActions",
            actions=["iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"],
            resources=[profile],
            conditions={
                "StringEquals": {
                    "aws:ResourceTag/eks:eks-cluster-name": cluster_name,
                    "aws:ResourceTag/topology.kubernetes.io/region": Aws.REGION,
                },
                "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"},
            },
        ),
        iam.PolicyStatement(
            sid="AllowAPIServerEndpointDiscovery", actions=["eks:DescribeCluster"], resources=[cluster_arn]
        ),
        iam.PolicyStatement(
            sid="AllowInterruptionQueueActions",
            actions=["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
            resources=[queue_arn],
        ),
        iam.PolicyStatement(
            sid="AllowZonalShiftStatusReadOnly",
            actions=["arc-zonal-shift:GetManagedResource"],
            resources=["*"],
            conditions={"StringEquals": {"arc-zonal-shift:ResourceIdentifier": cluster_arn}},
        ),
        iam.PolicyStatement(
            sid="AllowRegionalReadActions",
            actions=[
                "ec2:DescribeCapacityReservations",
                "ec2:DescribeImages",
                "ec2:DescribeInstances",
                "ec2:DescribeInstanceStatus",
                "ec2:DescribeInstanceTypeOfferings",
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeLaunchTemplates",
                "ec2:DescribePlacementGroups",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSpotPriceHistory",
                "ec2:DescribeSubnets",
            ],
            resources=["*"],
            conditions={"StringEquals": {"aws:RequestedRegion": Aws.REGION}},
        ),
        iam.PolicyStatement(
            sid="AllowSSMReadActions",
            actions=["ssm:GetParameter"],
            resources=[f"arn:{Aws.PARTITION}:ssm:{Aws.REGION}::parameter/aws/service/*"],
        ),
        iam.PolicyStatement(sid="AllowPricingReadActions", actions=["pricing:GetProducts"], resources=["*"]),
        iam.PolicyStatement(
            sid="AllowUnscopedInstanceProfileListAction", actions=["iam:ListInstanceProfiles"], resources=["*"]
        ),
        iam.PolicyStatement(
            sid="AllowInstanceProfileReadActions", actions=["iam:GetInstanceProfile"], resources=[profile]
        ),
    ]

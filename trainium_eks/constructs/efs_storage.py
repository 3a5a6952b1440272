"""EfsStorage: a shared Amazon EFS file system for training pods (and any other NFS client of the VPC)."""

from __future__ import annotations

from typing import List, Mapping, Optional, Sequence, Set

from aws_cdk import RemovalPolicy, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_efs as efs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from trainium_eks.constructs.security_group_rules import allow_ingress, check_client_groups, check_client_name
from trainium_eks.core.conventions import EfsVolumeSource
from trainium_eks.core.cost import CostLine, priced, stack_region
from trainium_eks.core.validation import Problems, check_bool, check_implements, implements
from trainium_eks.facts.pricing import efs_standard_usd_per_hour

NFS_PORT = ec2.Port.tcp(efs.FileSystem.DEFAULT_PORT)
"""NFS, the only port a client needs to reach a mount target. Source: Amazon EFS user guide, "Using VPC security
groups" (https://docs.aws.amazon.com/efs/latest/ug/network-access.html): the mount targets' security group must
allow inbound TCP 2049 from the clients."""

DEFAULT_TRANSITION_TO_IA = efs.LifecyclePolicy.AFTER_30_DAYS
"""Files not read for 30 days move to Infrequent Access (old checkpoints, finished runs), and back to Standard on
their first access: the Amazon EFS console's default lifecycle. Source: Amazon EFS user guide, "Managing storage
lifecycle" (https://docs.aws.amazon.com/efs/latest/ug/lifecycle-management-efs.html)."""

CLIENT_ACTIONS = (
    "elasticfilesystem:ClientMount",
    "elasticfilesystem:ClientWrite",
    "elasticfilesystem:ClientRootAccess",
)
"""What an NFS client may do on the file system: mount, write, and act as root (the default file system policy
grants all three to every client). Source: Amazon EFS user guide, "Using IAM to control access to file systems"
(https://docs.aws.amazon.com/efs/latest/ug/iam-access-control-nfs-efs.html)."""


class EfsStorage(Construct):
    """A shared Amazon EFS file system: encrypted, elastic, backed up, reachable from the given security groups only.

    - encrypted at rest (the account's ``aws/elasticfilesystem`` key, or ``kms_key``): cdk-nag AwsSolutions-EFS1;
    - performance mode General Purpose, throughput mode Elastic (throughput follows the workload, no provisioning;
      Elastic requires General Purpose). Source: Amazon EFS user guide, "Amazon EFS performance specifications"
      (https://docs.aws.amazon.com/efs/latest/ug/performance.html);
    - automatic backups (AWS Backup, the default EFS backup plan: daily, kept 35 days). Source: Amazon EFS user
      guide, "Automatic backups" (https://docs.aws.amazon.com/efs/latest/ug/automatic-backups.html);
    - optionally, files not read for a while move to Infrequent Access and come back on first access
      (:data:`DEFAULT_TRANSITION_TO_IA`);
    - one mount target in each private subnet of the VPC (or in each of ``subnets``): EFS allows one mount target
      per Availability Zone, and a client reaches the mount target of its own AZ through the file system's DNS name,
      so a node in any subnet of a covered AZ (the accelerated subnet included) mounts without crossing AZs;
    - its own security group, which admits NFS (TCP 2049) from the client security groups and nothing else, and
      allows no outbound traffic (:meth:`allow_clients` explains why one direction is enough);
    - a file system policy that admits clients through a mount target over TLS only (``require_tls``). The EFS CSI
      driver mounts with TLS by default (``encryptInTransit``). The policy also replaces the one the CDK writes when
      ``@aws-cdk/aws-efs:denyAnonymousAccess`` is on: that one withholds ``ClientMount`` from clients that do not
      mount with IAM authorization, and the EFS CSI driver's node plugin does not (aws/aws-cdk#36224;
      kubernetes-sigs/aws-efs-csi-driver#1759: the managed add-on has no Pod Identity for the node plugin);
    - removal policy RETAIN: deleting the stack, or replacing the resource, never deletes the data. The logical ID
      and the replacement-causing properties (``Encrypted``, ``KmsKeyId``, ``PerformanceMode``) depend only on this
      construct's own settings.

    The EFS CSI driver (managed add-on ``aws-efs-csi-driver``) needs no permission on this file system beyond its
    managed policy ``AmazonEFSCSIDriverPolicy``: that policy already allows describing file systems and mount targets
    and creating, tagging and deleting access points on every file system (``Resource: *``, conditions on the
    ``efs.csi.aws.com/cluster`` tag), and the nodes mount without IAM authorization, admitted by the file system
    policy. Source: EKS user guide, "Amazon EFS CSI driver"
    (https://docs.aws.amazon.com/eks/latest/userguide/add-ons-aws-efs-csi-driver.html); AWS managed policy reference,
    AmazonEFSCSIDriverPolicy.

    :param vpc: Required.
    :param subnets: Subnets of the mount targets, at most one per Availability Zone. Default: the VPC's private
        subnets, one per AZ (a VPC without private subnets is refused unless ``subnets`` is given).
    :param client_security_groups: Security groups of the clients (node groups, the cluster security group).
        Default: none; add with :meth:`allow_clients`.
    :param kms_key: Customer managed key for data at rest. Default: the account's ``aws/elasticfilesystem`` key.
        Choose it before the first deploy: changing it later replaces the file system (the old one is retained), and
        the update then fails at the PersistentVolume and the StorageClass that name it, which Kubernetes does not
        let change (kubernetes ``pkg/apis/core/validation/validation.go``, ``ValidatePersistentVolumeUpdate``;
        ``pkg/apis/storage/validation/validation.go``, ``ValidateStorageClassUpdate``: "updates to parameters are
        forbidden").
    :param transition_to_ia: When files not read move to Infrequent Access, or None to keep every file in
        Standard. Default: :data:`DEFAULT_TRANSITION_TO_IA`.
    :param require_tls: Admit only clients that mount with TLS. Set it to false for clients that cannot (a plain
        ``mount -t nfs4``). Default: true.
    :param setting_names: Names of the settings in error messages. Default: the parameter names.
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        vpc: ec2.IVpc,
        subnets: Optional[Sequence[ec2.ISubnet]] = None,
        client_security_groups: Sequence[ec2.ISecurityGroup] = (),
        kms_key: Optional[kms.IKey] = None,
        transition_to_ia: Optional[efs.LifecyclePolicy] = DEFAULT_TRANSITION_TO_IA,
        require_tls: bool = True,
        setting_names: Optional[Mapping[str, str]] = None,
    ) -> None:
        super().__init__(scope, id_)
        problems = Problems(self.node.path, setting_names=setting_names)
        if check_implements(problems, "vpc", vpc, ec2.IVpc, "an ec2.IVpc"):
            subnets = _check_subnets(problems, vpc, subnets)
        check_client_groups(problems, "client_security_groups", client_security_groups)
        if kms_key is not None:
            check_implements(problems, "kms_key", kms_key, kms.IKey, "a kms.IKey")
        if transition_to_ia is not None and not isinstance(transition_to_ia, efs.LifecyclePolicy):
            problems.add("transition_to_ia", transition_to_ia, "an efs.LifecyclePolicy, or None for never")
        check_bool(problems, "require_tls", require_tls)
        problems.raise_if_any()

        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="Amazon EFS mount targets: NFS (TCP 2049) from the clients of the file system only",
            allow_all_outbound=False,
        )
        self._clients: List[ec2.ISecurityGroup] = []
        self._client_names: Set[str] = set()
        self.allow_clients(*client_security_groups)

        conditions = {"elasticfilesystem:AccessedViaMountTarget": "true"}
        if require_tls:
            conditions["aws:SecureTransport"] = "true"
        self.file_system = efs.FileSystem(
            self,
            "FileSystem",
            vpc=vpc,
            vpc_subnets=ec2.SubnetSelection(subnets=list(subnets)),
            security_group=self.security_group,
            encrypted=True,
            kms_key=kms_key,
            performance_mode=efs.PerformanceMode.GENERAL_PURPOSE,
            throughput_mode=efs.ThroughputMode.ELASTIC,
            enable_automatic_backups=True,
            lifecycle_policy=transition_to_ia,
            out_of_infrequent_access_policy=(
                efs.OutOfInfrequentAccessPolicy.AFTER_1_ACCESS if transition_to_ia is not None else None
            ),
            allow_anonymous_access=True,  # the policy below replaces the CDK's (see the class docstring)
            file_system_policy=iam.PolicyDocument(
                statements=[
                    iam.PolicyStatement(
                        sid="ClientsThroughMountTargets",
                        principals=[iam.AnyPrincipal()],
                        actions=list(CLIENT_ACTIONS),
                        conditions={"Bool": conditions},
                    )
                ]
            ),
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.file_system_id: str = self.file_system.file_system_id
        self.file_system_arn: str = self.file_system.file_system_arn
        self.volume_source = EfsVolumeSource(file_system_id=self.file_system_id)
        region = stack_region(self)
        self.usd_per_gb_hour: Optional[float] = priced(
            self, "Amazon EFS Standard storage", efs_standard_usd_per_hour(region, 1) if region else None
        )
        """USD per hour of each GB stored in Standard (EFS bills what is stored, not a size; Infrequent Access,
        throughput and backups excluded), or None where the library has no verified price."""

    def cost_line(self, stored_gb: float) -> CostLine:
        """The file system holding ``stored_gb`` GB as a line of the stack's idle cost."""
        usd = None if self.usd_per_gb_hour is None else self.usd_per_gb_hour * stored_gb
        return CostLine("Amazon EFS", f"{stored_gb:g} GB stored in Standard", usd, idle=True)

    def allow_clients(self, *security_groups: ec2.ISecurityGroup, name: Optional[str] = None) -> None:
        """Let the instances of ``security_groups`` mount the file system: NFS (TCP 2049) into the mount targets.

        One direction is enough: an NFS client opens every connection and the mount targets never open one to a
        client (unlike FSx for Lustre servers), and security groups are stateful, so the replies of an admitted
        connection pass whatever the rules. The clients' groups need outbound TCP 2049 (EKS node groups and the
        cluster security group allow all outbound). Source: Amazon EFS user guide, "Using VPC security groups"
        (https://docs.aws.amazon.com/efs/latest/ug/network-access.html). The rules are created in this construct
        (the storage's stack) or, when a client group belongs to a later stack, in that stack
        (:func:`~trainium_eks.constructs.security_group_rules.allow_ingress`), so no stack refers to a later one.

        Each client's rule is named by its position (``FromClient<n>``, counting the constructor's clients first), so
        add clients in the same order on every deploy, and give a client that some deploys have and others do not a
        ``name``: removing or inserting a client before another renames that one's rule, and CloudFormation creates
        the renamed rule before it deletes the old one, which EC2 refuses as a duplicate
        (``InvalidPermission.Duplicate``), failing the update.

        :param name: The name of the rule of the one group given (``From<name>``: letters and digits, starting with a
            letter), which no other client's position changes. Default: none (named by position).
        """
        problems = Problems(f"{self.node.path}.allow_clients")
        check_client_groups(problems, "security_groups", security_groups)
        check_client_name(problems, name, security_groups, self._client_names)
        problems.raise_if_any()
        if name is not None:
            self._client_names.add(name)
        for client in security_groups:
            label = name
            if label is None:
                label = f"Client{len(self._clients)}"
                self._clients.append(client)
            allow_ingress(
                self,
                f"From{label}",
                group=self.security_group,
                peer=client,
                port=NFS_PORT,
                description="NFS clients of the EFS file system (TCP 2049)",
            )


def _check_subnets(problems: Problems, vpc: ec2.IVpc, subnets: Optional[Sequence[ec2.ISubnet]]) -> List[ec2.ISubnet]:
    """The mount targets' subnets: ``subnets``, or the VPC's private subnets (the first of each AZ); a problem is
    recorded when there are none, when one is not a subnet, or when two share an AZ (EFS allows one mount target per
    AZ: CreateMountTarget fails with MountTargetConflict)."""
    if subnets is None:
        chosen = list(vpc.select_subnets(subnets=list(vpc.private_subnets), one_per_az=True).subnets)
        if not chosen:
            problems.add(
                "vpc",
                vpc.node.path,
                "a VPC with private subnets (the mount targets go there); give `subnets` to place them elsewhere",
            )
        return chosen
    if not isinstance(subnets, (list, tuple)) or not subnets or not all(implements(s, ec2.ISubnet) for s in subnets):
        problems.add("subnets", subnets, "a non-empty list of ec2.ISubnet, at most one per Availability Zone")
        return []
    zones = [_availability_zone(subnet) for subnet in subnets]
    known = [zone for zone in zones if zone is not None and not Token.is_unresolved(zone)]
    shared = sorted({zone for zone in known if known.count(zone) > 1})
    if shared:
        problems.add("subnets", shared, "at most one subnet per Availability Zone (EFS: one mount target per AZ)")
    return list(subnets)


def _availability_zone(subnet: ec2.ISubnet) -> Optional[str]:
    """The subnet's AZ, or None when an imported subnet was given without one (reading it raises inside jsii)."""
    try:
        return subnet.availability_zone
    except RuntimeError:
        return None

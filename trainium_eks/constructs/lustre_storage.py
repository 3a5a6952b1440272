"""LustreStorage: the shared FSx for Lustre file system of the training nodes."""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence, Set

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from trainium_eks.constructs.security_group_rules import (
    allow_ingress,
    check_client_groups,
    check_client_name,
    latest_stack,
)
from trainium_eks.core.conventions import LustreVolumeSource
from trainium_eks.core.cost import CostLine, priced, stack_region
from trainium_eks.core.own_resources import own_resources
from trainium_eks.core.validation import (
    Problems,
    check_absolute_path,
    check_implements,
    check_instance,
    check_key_prefix,
    is_concrete,
    is_integer,
)
from trainium_eks.facts.pricing import lustre_usd_per_hour

DEFAULT_STORAGE_CAPACITY_GIB = 1200
"""Smallest size of a PERSISTENT_2 file system; the tutorial's claim was 1200 GiB too."""

MAX_STORAGE_CAPACITY_GIB = 2_147_483_647
"""Upper bound of ``StorageCapacity`` in the FSx API (CreateFileSystem, "Valid Range: Minimum value of 0. Maximum
value of 2147483647"); the account's service quota for Lustre storage is usually lower, and FSx refuses a larger
file system at deploy time."""

DEFAULT_THROUGHPUT_PER_TIB = 250
"""MB/s per TiB of storage: 300 MB/s on 1.2 TiB, enough to read the phase-1 shards and write checkpoints."""

DEFAULT_BUCKET_PATH = "/bucket"
"""Where the data bucket's import prefix appears in the file system (at ``/data/bucket`` in the training pods)."""

DEFAULT_EXPORT_PATH = "/export"
"""Where the data bucket's export prefix appears in the file system (at ``/data/export`` in the training pods)."""

DEFAULT_BACKUP_RETENTION = Duration.days(7)
"""Daily automatic backups kept for a week."""

LUSTRE_PORTS = (ec2.Port.tcp(988), ec2.Port.tcp_range(1018, 1023))
"""LNET ports a Lustre client and the file system servers must reach. Source: FSx for Lustre user guide,
"File system access control with Amazon VPC" and "Cannot create a file system"
(https://docs.aws.amazon.com/fsx/latest/LustreGuide/cannot-create-fs.html): inbound TCP 988 and 1018-1023."""

ALLOWED_THROUGHPUT_PER_TIB: Mapping[str, Sequence[int]] = {
    "PERSISTENT_1": (50, 100, 200),
    "PERSISTENT_2": (125, 250, 500, 1000),
}
"""PerUnitStorageThroughput on SSD storage. Source: FSx API reference, CreateFileSystemLustreConfiguration."""

IMPORT_EVENTS = ("NEW", "CHANGED", "DELETED")
"""Automatic import of both data repository associations: S3 changes (deletions included) flow into the file
system."""

EXPORT_EVENTS = ("NEW", "CHANGED")
"""Automatic export, of the export association only: files written below the export path flow out to the export
prefix; a deletion on the file system never deletes an object in the bucket. The import association exports nothing,
so no pod can overwrite the data set it was given."""


class LustreStorage(Construct):
    """A shared FSx for Lustre file system for training data, checkpoints and the Neuron compile cache.

    - ``PERSISTENT_2`` on SSD, Lustre 2.15, LZ4 compression, storage size and throughput checked against what FSx
      allows for the deployment type, daily automatic backups;
    - in one subnet (the accelerated nodes' subnet, so reads never cross an AZ);
    - a security group that allows Lustre (TCP 988 and 1018-1023) from itself and from each client security group,
      and on each client group the same ports from the file system's group (:meth:`allow_clients`); the tutorial
      opened 988 one way only, and FSx refuses to create a file system without 1018-1023;
    - optionally the data bucket, import only: a data repository association of ``data_bucket_prefix`` at
      ``bucket_path`` that imports changes (:data:`IMPORT_EVENTS`) and exports nothing, so nothing written on the file
      system reaches the bucket; with ``export_prefix``, a second association of that prefix at ``export_path`` that
      imports and exports new and changed files (:data:`EXPORT_EVENTS`), never deletions. FSx lets two associations
      of one file system share neither a file-system path nor an S3 prefix (CreateDataRepositoryAssociation: "Each
      data repository association must have a unique Amazon FSx file system directory and a unique S3 bucket or
      prefix"; FileSystemPath: "Two data repository associations cannot have overlapping file system paths"); the
      library also refuses nested prefixes, whose objects two associations would both import. Turn on the bucket's
      versioning: an exported file overwrites the object of its key;
    - removal policy RETAIN: deleting the stack, or replacing the resource, never deletes the data. The logical ID
      and the replacement-causing properties (subnet, security group, KMS key) depend only on this construct's own
      settings.

    :param vpc: Required.
    :param subnet: The file system's subnet. Required.
    :param client_security_groups: Security groups of the clients (node groups). Default: none; add with
        :meth:`allow_clients`.
    :param storage_capacity_gib: Default: :data:`DEFAULT_STORAGE_CAPACITY_GIB`.
    :param deployment_type: ``PERSISTENT_2``, ``PERSISTENT_1`` or ``SCRATCH_2``. Default: ``PERSISTENT_2``.
    :param throughput_per_tib: MB/s/TiB. Default: :data:`DEFAULT_THROUGHPUT_PER_TIB` (None for scratch).
    :param data_bucket: S3 bucket to link. Default: none.
    :param data_bucket_prefix: Prefix in the bucket to import. Default: the whole bucket.
    :param bucket_path: Path of the imported prefix in the file system. Default: :data:`DEFAULT_BUCKET_PATH`.
    :param export_prefix: Prefix in the bucket that files written below ``export_path`` are exported to; it must not
        contain, or be inside, ``data_bucket_prefix``. Default: none (nothing is exported).
    :param export_path: Path of the exported prefix in the file system. Default: :data:`DEFAULT_EXPORT_PATH`.
    :param kms_key: Customer managed key for data at rest. Default: the account's ``aws/fsx`` key. Choose it before
        the first deploy: changing it later replaces the file system (the old one is retained), and the update then
        fails at the PersistentVolume, whose volume source Kubernetes does not let change
        (``spec.persistentvolumesource is immutable after creation``: kubernetes
        ``pkg/apis/core/validation/validation.go``, ``ValidatePersistentVolumeUpdate``).
    :param automatic_backup_retention: Default: :data:`DEFAULT_BACKUP_RETENTION` (none for scratch).
    :param setting_names: Names of the settings in error messages. Default: the parameter names.
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        vpc: ec2.IVpc,
        subnet: ec2.ISubnet,
        client_security_groups: Sequence[ec2.ISecurityGroup] = (),
        storage_capacity_gib: int = DEFAULT_STORAGE_CAPACITY_GIB,
        deployment_type: fsx.LustreDeploymentType = fsx.LustreDeploymentType.PERSISTENT_2,
        throughput_per_tib: Optional[int] = DEFAULT_THROUGHPUT_PER_TIB,
        data_bucket: Optional[s3.IBucket] = None,
        data_bucket_prefix: str = "",
        bucket_path: str = DEFAULT_BUCKET_PATH,
        export_prefix: Optional[str] = None,
        export_path: str = DEFAULT_EXPORT_PATH,
        kms_key: Optional[kms.IKey] = None,
        automatic_backup_retention: Duration = DEFAULT_BACKUP_RETENTION,
        setting_names: Optional[Mapping[str, str]] = None,
    ) -> None:
        super().__init__(scope, id_)
        scratch = isinstance(deployment_type, fsx.LustreDeploymentType) and deployment_type.name.startswith("SCRATCH")
        if scratch:
            throughput_per_tib = None
        problems = Problems(self.node.path, setting_names=setting_names)
        check_implements(problems, "vpc", vpc, ec2.IVpc, "an ec2.IVpc")
        check_implements(problems, "subnet", subnet, ec2.ISubnet, "an ec2.ISubnet")
        check_client_groups(problems, "client_security_groups", client_security_groups)
        if data_bucket is not None:
            check_implements(problems, "data_bucket", data_bucket, s3.IBucket, "an s3.IBucket")
        if kms_key is not None:
            check_implements(problems, "kms_key", kms_key, kms.IKey, "a kms.IKey")
        check_instance(problems, "automatic_backup_retention", automatic_backup_retention, Duration, "a Duration")
        check_bucket_prefixes(
            problems,
            data_bucket_prefix=data_bucket_prefix,
            export_prefix=export_prefix,
            bucket_path=bucket_path,
            export_path=export_path,
            has_bucket=data_bucket is not None,
        )
        check_lustre_settings(
            problems,
            storage_capacity_gib=storage_capacity_gib,
            deployment_type=deployment_type,
            throughput_per_tib=throughput_per_tib,
            bucket_path=bucket_path,
        )
        problems.raise_if_any()

        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="FSx for Lustre: LNET (TCP 988, 1018-1023) from the file system and its clients",
            allow_all_outbound=True,
        )
        # LustreFileSystem itself opens TCP 988-1023 between members of this group (the file system's servers).
        self._clients: List[ec2.ISecurityGroup] = []
        self._client_names: Set[str] = set()
        self.allow_clients(*client_security_groups)

        self.file_system = fsx.LustreFileSystem(
            self,
            "FileSystem",
            vpc=vpc,
            vpc_subnet=subnet,
            security_group=self.security_group,
            storage_capacity_gib=storage_capacity_gib,
            file_system_type_version=fsx.FileSystemTypeVersion.V_2_15,
            kms_key=kms_key,
            removal_policy=RemovalPolicy.RETAIN,
            lustre_configuration=fsx.LustreConfiguration(
                deployment_type=deployment_type,
                per_unit_storage_throughput=throughput_per_tib,
                data_compression_type=fsx.LustreDataCompressionType.LZ4,
                automatic_backup_retention=None if scratch else automatic_backup_retention,
                copy_tags_to_backups=None if scratch else True,
            ),
        )
        self._keep_own_rules_with_the_file_system()
        self._keep_its_network(vpc, subnet)
        self.file_system_id = self.file_system.file_system_id
        self.volume_source = LustreVolumeSource(
            file_system_id=self.file_system_id,
            dns_name=self.file_system.dns_name,
            mount_name=self.file_system.mount_name,
            storage_gib=storage_capacity_gib,
        )
        self.bucket_path: Optional[str] = None
        self.export_path: Optional[str] = None
        self.data_repository_association: Optional[fsx.CfnDataRepositoryAssociation] = None
        self.export_association: Optional[fsx.CfnDataRepositoryAssociation] = None
        if data_bucket is not None:
            self.bucket_path = bucket_path
            self.data_repository_association = self._associate(
                "DataRepositoryAssociation", data_bucket, data_bucket_prefix, bucket_path, export=False
            )
            if export_prefix is not None:
                self.export_path = export_path
                self.export_association = self._associate(
                    "ExportAssociation", data_bucket, export_prefix, export_path, export=True
                )
        region = stack_region(self)
        self.storage_capacity_gib = storage_capacity_gib
        self.throughput_per_tib = throughput_per_tib
        self.deployment_type = deployment_type
        self.usd_per_hour: Optional[float] = priced(
            self,
            f"FSx for Lustre {deployment_type.name} with {throughput_per_tib or 'no'} MB/s/TiB",
            lustre_usd_per_hour(region, storage_capacity_gib, throughput_per_tib)
            if region and throughput_per_tib
            else None,
        )
        """USD per hour of the storage (throughput included; backups not), or None where the library has no
        verified price (scratch file systems have none)."""

    def _associate(
        self, id_: str, bucket: s3.IBucket, prefix: str, path: str, *, export: bool
    ) -> fsx.CfnDataRepositoryAssociation:
        """A data repository association of ``prefix`` at ``path``, importing changes and, with ``export``,
        exporting new and changed files; retained with the file system. Without ``export`` the export policy is
        written with no events rather than left out, so that a stack deployed before exports were opt-in has its
        association updated to export nothing (an absent property could leave FSx's current policy as it is)."""
        association = fsx.CfnDataRepositoryAssociation(
            self,
            id_,
            file_system_id=self.file_system_id,
            file_system_path=path,
            data_repository_path=f"s3://{bucket.bucket_name}/{prefix}",
            batch_import_meta_data_on_create=True,
            s3=fsx.CfnDataRepositoryAssociation.S3Property(
                auto_import_policy=fsx.CfnDataRepositoryAssociation.AutoImportPolicyProperty(
                    events=list(IMPORT_EVENTS)
                ),
                auto_export_policy=fsx.CfnDataRepositoryAssociation.AutoExportPolicyProperty(
                    events=list(EXPORT_EVENTS) if export else []
                ),
            ),
        )
        association.apply_removal_policy(RemovalPolicy.RETAIN)
        return association

    def _keep_own_rules_with_the_file_system(self) -> None:
        """Create the file system only after the ingress rules of its security group from the group itself, and keep
        the group and those rules when the stack is deleted, as the file system is (``DeletionPolicy: Retain``): the
        file system's network interfaces stay in the group, so EC2 would refuse to delete it
        (``DependencyViolation``), and without the rules its servers could not reach each other.

        FSx checks at ``CreateFileSystem`` that the file system's security groups admit LNET (TCP 988 and 1018-1023)
        from themselves (the file servers talk to each other) and fails with ``InvalidNetworkSettings`` otherwise
        (FSx for Lustre user guide, limit-access-security-groups.html and cannot-create-fs.html;
        aws-parallelcluster#6181). ``LustreFileSystem`` makes that self rule a separate
        ``AWS::EC2::SecurityGroupIngress``, which CloudFormation would otherwise create in parallel with the file
        system. The clients' rules are not checked then, and the file system does not wait for them (one refers to
        the cluster's security group, which would hold the file system back until the control plane exists).
        """
        stack = Stack.of(self)
        own = stack.resolve(self.security_group.security_group_id)
        for child in self.security_group.node.find_all():
            if (
                isinstance(child, ec2.CfnSecurityGroupIngress)
                and stack.resolve(child.group_id) == own
                and stack.resolve(child.source_security_group_id) == own
            ):
                self.file_system.node.add_dependency(child)
                child.apply_removal_policy(RemovalPolicy.RETAIN)
        self.security_group.apply_removal_policy(RemovalPolicy.RETAIN)

    def _keep_its_network(self, vpc: ec2.IVpc, subnet: ec2.ISubnet) -> None:
        """Keep the file system's subnet and VPC when the stack is deleted (``DeletionPolicy: Retain``) where they are
        resources of this stack (a :class:`~trainium_eks.constructs.network.TrainingNetwork`, or your own
        ``ec2.Vpc``): the retained file system keeps its network interfaces in the subnet, and EC2 refuses to delete a
        subnet that holds interfaces, or a VPC that holds a subnet (``DependencyViolation``), which would fail the
        destroy. Neither costs anything while it stays; delete them once the file system is gone (``aws ec2
        delete-subnet``, ``aws ec2 delete-vpc``). A subnet or VPC imported, or of another stack, is not this stack's
        to delete: nothing changes for it."""
        for child in own_resources(Stack.of(self), [subnet.subnet_id, vpc.vpc_id], [ec2.CfnSubnet, ec2.CfnVPC]):
            child.apply_removal_policy(RemovalPolicy.RETAIN)

    @property
    def cost_line(self) -> CostLine:
        """The file system as a line of the stack's idle cost."""
        quantity = f"{self.storage_capacity_gib} GiB at {self.throughput_per_tib or 'scratch'} MB/s/TiB"
        return CostLine("FSx for Lustre", quantity, self.usd_per_hour, idle=True)

    @property
    def file_system_arn(self) -> str:
        """The ARN of the file system."""
        return Stack.of(self).format_arn(service="fsx", resource="file-system", resource_name=self.file_system_id)

    def allow_clients(self, *security_groups: ec2.ISecurityGroup, name: Optional[str] = None) -> None:
        """Let the instances of ``security_groups`` mount the file system: LNET (TCP 988 and 1018-1023) both ways.

        The file system's group admits each client group, and each client group admits the file system's group: the
        FSx for Lustre user guide ("File system access control with Amazon VPC", Lustre client VPC security group
        rules) requires clients to allow inbound LNET traffic from the file system, whose servers open connections to
        clients too. The rules are created in this construct (the storage's stack) or, when a client group belongs to
        a later stack, in that stack (:func:`~trainium_eks.constructs.security_group_rules.allow_ingress`), so no stack
        refers to a later one.

        Each client's rules are named by its position (``FromClient<n>Port<m>``, ``ToClient<n>Port<m>``, counting the
        constructor's clients first), so add clients in the same order on every deploy, and give a client that some
        deploys have and others do not a ``name``: removing or inserting a client before another renames that one's
        rules, and CloudFormation creates the renamed rules before it deletes the old ones, which EC2 refuses as
        duplicates (``InvalidPermission.Duplicate``), failing the update.

        :param name: The name of the rules of the one group given (``From<name>Port<m>``, ``To<name>Port<m>``:
            letters and digits, starting with a letter), which no other client's position changes. Default: none
            (named by position).
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
            for number, port in enumerate(LUSTRE_PORTS):
                allow_ingress(
                    self,
                    f"From{label}Port{number}",
                    group=self.security_group,
                    peer=client,
                    port=port,
                    description=f"Lustre clients (LNET {port.to_string()})",
                )
                allow_ingress(
                    self,
                    f"To{label}Port{number}",
                    group=client,
                    peer=self.security_group,
                    port=port,
                    description=f"Lustre file system servers to their clients (LNET {port.to_string()})",
                )

    def grant_csi_driver(self, role: iam.IRole) -> None:
        """Allow the FSx CSI controller's ``role`` to resize this file system (PersistentVolumeClaim expansion).

        The statement goes into the role's own policy or, when this file system belongs to a later stack than the role
        (storage built after the cluster, in its own stack), into a policy of this construct attached to the role, so
        that the cluster's stack never refers to the file system of a later stack
        (:func:`~trainium_eks.constructs.security_group_rules.latest_stack`).

        :raises ConfigurationError: when ``role`` is not an IAM role, as ``TrainingCluster.fsx_csi_driver_role`` is
            None for a cluster built without the driver (``TrainingCluster(fsx_csi_driver=True)`` installs it)."""
        problems = Problems(f"{self.node.path}.grant_csi_driver")
        check_implements(
            problems,
            "role",
            role,
            iam.IRole,
            "the FSx CSI driver's IAM role: TrainingCluster.fsx_csi_driver_role, which a cluster has only when it "
            "installs the driver (TrainingCluster(fsx_csi_driver=True))",
        )
        problems.raise_if_any()
        statement = iam.PolicyStatement(actions=["fsx:UpdateFileSystem"], resources=[self.file_system_arn])
        if latest_stack(self, role) is Stack.of(role):
            role.add_to_principal_policy(statement)
        else:
            iam.Policy(self, "CsiDriverGrant", roles=[role], statements=[statement])


def check_lustre_settings(
    problems: Problems,
    *,
    storage_capacity_gib: int,
    deployment_type: fsx.LustreDeploymentType = fsx.LustreDeploymentType.PERSISTENT_2,
    throughput_per_tib: Optional[int] = DEFAULT_THROUGHPUT_PER_TIB,
    bucket_path: str = DEFAULT_BUCKET_PATH,
) -> None:
    """Record every problem of the file-system settings in ``problems``.

    Allowed sizes (FSx API reference, CreateFileSystem StorageCapacity, SSD): SCRATCH_1 1200, 2400 or a multiple of
    3600 GiB; SCRATCH_2, PERSISTENT_1 and PERSISTENT_2 1200 or a multiple of 2400 GiB.
    """
    if not isinstance(deployment_type, fsx.LustreDeploymentType):
        problems.add("deployment_type", deployment_type, "an fsx.LustreDeploymentType")
        return
    kind = deployment_type.name
    if storage_capacity_gib is None or is_concrete(storage_capacity_gib):
        step = 3600 if kind == "SCRATCH_1" else 2400
        valid = (
            is_integer(storage_capacity_gib)
            and 0 < storage_capacity_gib <= MAX_STORAGE_CAPACITY_GIB
            and (storage_capacity_gib in (1200, 2400) or storage_capacity_gib % step == 0)
        )
        if not valid:
            problems.add(
                "storage_capacity_gib",
                storage_capacity_gib,
                f"{kind} allows 1200, 2400 or a multiple of {step} GiB up to {MAX_STORAGE_CAPACITY_GIB} "
                f"({_neighbours(storage_capacity_gib, step)})",
            )
    allowed: List[int] = list(ALLOWED_THROUGHPUT_PER_TIB.get(kind, ()))
    if allowed and throughput_per_tib not in allowed:
        problems.add("throughput_per_tib", throughput_per_tib, f"{kind} allows {', '.join(map(str, allowed))} MB/s/TiB")
    check_absolute_path(problems, "bucket_path", bucket_path)


def check_bucket_prefixes(
    problems: Problems,
    *,
    data_bucket_prefix: Any,
    export_prefix: Any,
    bucket_path: Any = DEFAULT_BUCKET_PATH,
    export_path: Any = DEFAULT_EXPORT_PATH,
    has_bucket: bool = True,
) -> None:
    """Record the problems of the data bucket's prefixes in ``problems``: key prefixes without a leading '/', an
    export prefix that is not empty, only with a bucket, and neither prefix inside the other (the whole bucket,
    ``""``, contains every prefix); and an export path that neither contains nor lies in the bucket path."""
    imported = check_key_prefix(problems, "data_bucket_prefix", data_bucket_prefix)
    if export_prefix is None or not check_key_prefix(problems, "export_prefix", export_prefix, empty=False):
        return
    if not has_bucket:
        problems.add("export_prefix", export_prefix, "set only with a data bucket to export to")
        return
    if imported and _nested(data_bucket_prefix, export_prefix):
        problems.add(
            "export_prefix",
            export_prefix,
            f"a prefix outside the imported one ({data_bucket_prefix or 'the whole bucket'}; import the data set's own "
            "prefix): FSx links a prefix to one data repository association, and both would import it",
        )
    if check_absolute_path(problems, "export_path", export_path) and isinstance(bucket_path, str):
        if _nested(bucket_path.rstrip("/") + "/", export_path + "/"):
            problems.add(
                "export_path",
                export_path,
                f"a path outside {bucket_path} (FSx: two data repository associations cannot have overlapping file "
                "system paths)",
            )


def _nested(one: str, other: str) -> bool:
    return one.startswith(other) or other.startswith(one)


def _neighbours(value, step: int) -> str:
    if not is_integer(value) or value <= 2400 or value > MAX_STORAGE_CAPACITY_GIB:
        return "e.g. 1200 or 2400"
    lower = value // step * step
    return f"nearest: {lower} or {lower + step}"

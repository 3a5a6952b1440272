"""The preflight checks: what a stack launches, compared with what the account and the region offer, before the deploy.

One module per kind of check: :mod:`.offerings` (AZ, instance type, offering), :mod:`.capacity_reservations`,
:mod:`.subnet_addresses`, :mod:`.quotas` (EC2 On-Demand vCPUs, with :mod:`.service_quotas`), :mod:`.versions`
(Kubernetes), :mod:`.file_systems`, :mod:`.updates` (what an update cannot change in place); :mod:`.plan` is what a
stack asks, :mod:`.aws_context` the calls, :mod:`.running` the one entry point (:func:`run_checks`), :mod:`.reports`
what a run says. Modules import each other relatively, so the package is the same whether Lambda imports it as
``preflight_checks`` or the command line loads it by path.

The stack builds a *plan* at synth (``trainium_eks.constructs.preflight.plan_of``) and passes it, as one JSON string,
to the custom resource of ``index.py``; ``python -m trainium_eks preflight`` loads this package by path and runs the
same checks from the user's credentials. So this package imports only the standard library, boto3 and botocore.

The plan (``PLAN_VERSION`` 1)::

    {"version": 1, "stack": "TrainiumEks", "region": "us-west-2" | null,
     "kubernetesVersion": "1.36" | null,
     "nodes": [{"name": "AcceleratedNodes", "instanceType": "trn1.32xlarge",
                "count": 2,                           # nodes at most (Karpenter: the pool's limit)
                "availabilityZoneId": "usw2-az4" | null,   # null: several AZs (the system nodes)
                "subnetId": "subnet-..." | null,      # null: the stack creates the subnet
                "subnetCreated": true | false,        # optional: the stack itself creates the subnet
                "ipInterfaces": 1,                    # interfaces per node that take an IPv4 address
                "efaInterfaces": 8,                   # EFA devices per node
                "capacityReservationId": "cr-..." | null,   # null: none, or one the stack makes (unchecked)
                "capacityType": "on-demand" | "capacity-block" | "reservation",
                "provisioning": "karpenter" | "node-group"}],   # optional: how the nodes are launched
     "fileSystems": [{"kind": "lustre", "name": "Storage", "storageGib": 1200,   # name: optional
                      "deploymentType": "PERSISTENT_2", "throughputPerUnitStorage": 125}, {"kind": "efs"}]}

Each check gives a :class:`CheckResult` whose status is ``pass``, ``fail`` or ``unknown``. Only what AWS answered
makes a check fail; a check that cannot be made (a refused permission, an API, value or endpoint the partition or
region lacks, a timeout) is ``unknown``, with the call, the IAM action and the reason, and never fails the deploy.

Every client retries throttling and transient errors (botocore's ``standard`` retry mode with ``max_attempts`` 8,
which botocore reads as 8 retries after the first attempt: ``botocore.config.Config``, ``retries``)."""

from .aws_context import CLIENT_CONFIG, HANDLER_IAM_ACTIONS, IAM_ACTIONS, AwsContext
from .capacity_reservations import check_capacity_reservation, check_gang_capacity
from .file_systems import EFS_FILE_SYSTEMS_QUOTA, LUSTRE_QUOTAS, check_efs_file_systems, check_lustre_quotas
from .offerings import check_availability_zone, check_instance_type, check_offering, region_of_zone_id
from .plan import PLAN_VERSION, check_plan
from .quotas import ON_DEMAND_QUOTAS, check_on_demand_vcpus, quota_family
from .reports import failure_message, format_table
from .results import FAIL, PASS, UNKNOWN, CannotCheck, CheckResult
from .running import RESERVE_SECONDS, guarded, planned_checks, run_checks
from .service_quotas import capacity_verdict
from .subnet_addresses import check_subnet_addresses
from .updates import check_lustre_growth, check_zone_move
from .versions import check_kubernetes_version

__all__ = [
    "AwsContext",
    "CLIENT_CONFIG",
    "CannotCheck",
    "CheckResult",
    "EFS_FILE_SYSTEMS_QUOTA",
    "FAIL",
    "HANDLER_IAM_ACTIONS",
    "IAM_ACTIONS",
    "LUSTRE_QUOTAS",
    "ON_DEMAND_QUOTAS",
    "PASS",
    "PLAN_VERSION",
    "RESERVE_SECONDS",
    "UNKNOWN",
    "capacity_verdict",
    "check_availability_zone",
    "check_capacity_reservation",
    "check_efs_file_systems",
    "check_gang_capacity",
    "check_instance_type",
    "check_kubernetes_version",
    "check_lustre_growth",
    "check_lustre_quotas",
    "check_offering",
    "check_on_demand_vcpus",
    "check_plan",
    "check_subnet_addresses",
    "check_zone_move",
    "failure_message",
    "format_table",
    "guarded",
    "planned_checks",
    "quota_family",
    "region_of_zone_id",
    "run_checks",
]

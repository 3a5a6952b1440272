"""What an update cannot change in place: a zone move of nodes in the stack's own subnets, a smaller Lustre, another
Lustre deployment type."""

from __future__ import annotations

from tests.support.preflight_aws import node as _node
from tests.support.preflight_aws import plan as _plan


def _context(checks, session, plan, previous=None, forward=True):
    """An update going forward from ``previous`` to ``plan`` (a first deploy without ``previous``)."""
    return checks.AwsContext(session, "us-west-2", plan, previous=previous, forward=forward)


def _own(**overrides):
    """Nodes in a subnet the stack itself creates (``subnetCreated``)."""
    return _node(subnetCreated=True, **overrides)


G5 = _own(name="AcceleratedNodes", instanceType="g5.12xlarge", availabilityZoneId="usw2-az3", efaInterfaces=0)


def test_nodes_that_stay_in_their_zone_pass_and_a_move_fails_naming_both_zones(checks, mixed):
    cpu = _node(name="CpuNodes", instanceType="m7i.4xlarge", efaInterfaces=0)
    context = _context(checks, mixed, _plan(G5, cpu), previous=_plan(_own(), cpu))
    assert "zone-move/AcceleratedNodes" in [name for name, _ in checks.planned_checks(context)]
    moved = checks.check_zone_move(context, G5)
    assert moved.status == "fail"
    assert moved.message.startswith(
        "AcceleratedNodes would move from usw2-az4 to usw2-az3 (their instance type: g5.12xlarge)"
    )
    assert "InvalidSubnet.Conflict" in moved.message and moved.advice.startswith("keep usw2-az4")
    stayed = _context(checks, mixed, _plan(_own()), previous=_plan(_own(count=4)))
    assert checks.check_zone_move(stayed, _own()).status == "pass"


def test_a_zone_is_not_compared_without_a_previous_deploy_a_subnet_of_the_user_or_the_same_nodes(checks, mixed):
    """Nor in an update not known to go forward: in a rollback the plans are swapped, and the move back must pass."""
    cases = [
        (_plan(_own()), _plan(G5), False),  # a rollback, or an update whose stack status could not be read
        (_plan(G5), None, True),  # a first deploy
        (_plan(dict(G5, subnetCreated=False)), _plan(_node(subnetId="subnet-0")), True),  # the user's subnets
        (_plan(dict(G5, subnetCreated=False)), _plan(_own()), True),  # another stack's subnet now
        (_plan(G5), _plan(_node()), True),  # a plan of an earlier version, which does not say
        (_plan(dict(G5, name="GpuNodes")), _plan(_own()), True),  # other nodes, added beside
        (_plan(_own(name="SystemNodes", availabilityZoneId=None)), _plan(_own(name="SystemNodes")), True),
    ]
    for plan, previous, forward in cases:
        context = _context(checks, mixed, plan, previous, forward)
        assert not [name for name, _ in checks.planned_checks(context) if name.startswith("zone-move/")]


def _lustre(gib: int, name="Storage/Lustre", deployment_type="PERSISTENT_2"):
    file_system = {"kind": "lustre", "storageGib": gib, "deploymentType": deployment_type}
    return dict(file_system, name=name) if name else file_system


def test_a_lustre_file_system_may_grow_and_never_shrink(checks, mixed):
    def lustre(gib: int):
        return _plan(fileSystems=[_lustre(gib)])

    grown = _context(checks, mixed, lustre(2400), previous=lustre(1200))
    assert [name for name, _ in checks.planned_checks(grown)][-1] == "lustre-storage/Storage/Lustre"
    assert checks.check_lustre_growth(grown, "Storage/Lustre").status == "pass"
    shrunk = checks.check_lustre_growth(_context(checks, mixed, lustre(1200), previous=lustre(2400)), "Storage/Lustre")
    assert (shrunk.status, shrunk.message) == (
        "fail",
        "1200 GiB is less than the file system's 2400 GiB: FSx for Lustre storage only grows",
    )
    for context in (_context(checks, mixed, lustre(1200)), _context(checks, mixed, lustre(1200), lustre(2400), False)):
        assert not [name for name, _ in checks.planned_checks(context) if name.startswith("lustre-storage/")]
    assert shrunk.advice == "keep 2400 GiB or more (lustreStorageGiB in the default app)"


def test_a_scratch_1_file_system_keeps_its_size_which_fsx_cannot_change(checks, mixed):
    def scratch(gib: int):
        return _plan(fileSystems=[_lustre(gib, deployment_type="SCRATCH_1")])

    grown = checks.check_lustre_growth(_context(checks, mixed, scratch(2400), previous=scratch(1200)), "Storage/Lustre")
    assert (grown.status, grown.message, grown.advice) == (
        "fail",
        "the storage of a SCRATCH_1 file system cannot change",
        "keep 1200 GiB (lustreStorageGiB in the default app)",
    )
    kept = _context(checks, mixed, scratch(1200), previous=scratch(1200))
    assert checks.check_lustre_growth(kept, "Storage/Lustre").status == "pass"
    persistent = _plan(fileSystems=[_lustre(2400, deployment_type="PERSISTENT_2")])
    retyped = checks.check_lustre_growth(_context(checks, mixed, persistent, previous=scratch(1200)), "Storage/Lustre")
    assert retyped.status == "fail", "the deployed file system's type decides, not the plan's"


def test_a_lustre_file_systems_deployment_type_cannot_change_whatever_its_size(checks, mixed):
    for gib in (1200, 2400):
        plan = _plan(fileSystems=[_lustre(gib, deployment_type="PERSISTENT_2")])
        previous = _plan(fileSystems=[_lustre(1200, deployment_type="SCRATCH_2")])
        retyped = checks.check_lustre_growth(_context(checks, mixed, plan, previous=previous), "Storage/Lustre")
        assert (retyped.status, retyped.message) == (
            "fail",
            "the file system is SCRATCH_2 and the plan makes it PERSISTENT_2: FSx cannot change a Lustre file "
            "system's deployment type (UpdateFileSystem has no DeploymentType)",
        )
        assert retyped.advice.startswith("keep SCRATCH_2; for another type, add a second file system")
    earlier = _plan(fileSystems=[{"kind": "lustre", "storageGib": 1200, "name": "Storage/Lustre"}])
    unknown = _context(checks, mixed, _plan(fileSystems=[_lustre(1200)]), previous=earlier)
    assert checks.check_lustre_growth(unknown, "Storage/Lustre").status == "pass", "a plan that does not say"


def test_fsx_cannot_change_a_lustre_deployment_type_in_place():
    """The claim of the type check: FSx's UpdateFileSystem (botocore's service model, the API's own) takes no
    DeploymentType, which its CreateFileSystem takes; and the registry schema does not make the configuration
    create-only, so CloudFormation calls the update."""
    import botocore.session
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    model = botocore.session.get_session().get_service_model("fsx")
    assert "DeploymentType" not in model.shape_for("UpdateFileSystemLustreConfiguration").members
    assert "DeploymentType" in model.shape_for("CreateFileSystemLustreConfiguration").members
    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", "AWS::FSx::FileSystem").schema
    assert not [p for p in schema["createOnlyProperties"] if p.startswith("/properties/LustreConfiguration")]


def test_file_systems_are_paired_by_name_not_by_position(checks, mixed):
    """A file system added before the one that was there is new: only the one of the same name is compared."""
    previous = _plan(fileSystems=[_lustre(2400, name="Storage/Lustre")])
    plan = _plan(fileSystems=[_lustre(1200, name="Scratch/Lustre"), _lustre(2400, name="Storage/Lustre")])
    context = _context(checks, mixed, plan, previous=previous)
    planned = [name for name, _ in checks.planned_checks(context) if name.startswith("lustre-storage/")]
    assert planned == ["lustre-storage/Storage/Lustre"]
    assert checks.check_lustre_growth(context, "Storage/Lustre").status == "pass"
    renamed = _context(checks, mixed, _plan(fileSystems=[_lustre(1200, name="Data/Lustre")]), previous=previous)
    assert not [name for name, _ in checks.planned_checks(renamed) if name.startswith("lustre-storage/")]


def test_a_plan_of_an_earlier_version_pairs_its_one_file_system_and_no_more(checks, mixed):
    """Plans before the ``name`` key: one file system on each side is the same one; with more, position says
    nothing, and nothing is compared."""
    earlier = _plan(fileSystems=[_lustre(2400, name=None)])
    shrunk = _context(checks, mixed, _plan(fileSystems=[_lustre(1200)]), previous=earlier)
    assert checks.check_lustre_growth(shrunk, "Storage/Lustre").status == "fail"
    two = _plan(fileSystems=[_lustre(2400, name=None), _lustre(2400, name=None)])
    context = _context(checks, mixed, _plan(fileSystems=[_lustre(1200), _lustre(1200, name="Other")]), previous=two)
    assert not [name for name, _ in checks.planned_checks(context) if name.startswith("lustre-storage/")]


def test_storage_capacity_is_changed_in_place_by_cloudformation_so_fsx_rules_decide():
    """The claim of ``check_lustre_growth``: the CloudFormation registry schema (as cfn-lint ships it) does not make
    ``StorageCapacity`` create-only, so a change is an UpdateFileSystem call, not a new file system."""
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", "AWS::FSx::FileSystem").schema
    assert "/properties/StorageCapacity" not in schema["createOnlyProperties"]
    assert "/properties/SubnetIds" in schema["createOnlyProperties"]

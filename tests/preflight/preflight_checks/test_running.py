"""The whole run: the seed plan, the deadline, a check that breaks."""

from __future__ import annotations

from tests.support.preflight_aws import TRN_DIMENSIONS, cluster_versions
from tests.support.preflight_aws import node as _node
from tests.support.preflight_aws import plan as _plan
from tests.support.preflight_aws import quota as _quota


def test_the_seed_plan_passes_every_check_and_says_in_one_line_what_it_cannot_check(checks, aws, mixed):
    plan = _plan(
        _node(),
        _node(name="SystemNodes", instanceType="m7i.xlarge", availabilityZoneId=None, efaInterfaces=0),
        fileSystems=[{"kind": "lustre", "storageGib": 1200, "deploymentType": "PERSISTENT_2"}],
    )
    quotas = mixed.stub("service-quotas")
    quotas.add_response("get_service_quota", _quota("L-2C3B7624", 512, {**TRN_DIMENSIONS, "Run": "seed"}))
    quotas.add_response("get_service_quota", _quota("L-1216C47A", 64, {"Class": "Standard/OnDemand", "Run": "seed"}))
    quotas.add_response("get_service_quota", _quota("L-FD6F2F22", 100))
    quotas.add_response("get_service_quota", _quota("L-8F1B9C74", 100800))
    mixed.stub("eks").add_response("describe_cluster_versions", cluster_versions("STANDARD_SUPPORT"))
    results = checks.run_checks(plan, mixed)
    assert [(r.check, r.status) for r in results] == [
        ("availability-zone/usw2-az4", "pass"),
        ("instance-type/AcceleratedNodes", "pass"),
        ("offering/AcceleratedNodes", "pass"),
        ("gang-capacity/AcceleratedNodes", "unknown"),
        ("instance-type/SystemNodes", "pass"),
        ("offering/SystemNodes", "pass"),
        ("on-demand-vcpus/Trn", "pass"),
        ("on-demand-vcpus/Standard", "pass"),
        ("kubernetes-version/1.36", "pass"),
        ("fsx-lustre/PERSISTENT_2", "pass"),
    ]
    mixed.assert_no_pending_responses()
    assert {service for service, _, _ in mixed.asked} == {"ec2", "service-quotas", "cloudwatch", "eks", "fsx"}


def test_no_check_starts_near_the_deadline(checks, aws, mixed):
    left = iter([60.0, 19.0])
    results = checks.run_checks(_plan(kubernetesVersion=None), mixed, remaining_seconds=lambda: next(left, 5.0))
    assert results[0].status == "pass"
    assert {r.status for r in results[1:]} == {"unknown"}
    assert results[1].message == "not started: fewer than 20 s were left before the function's timeout"


def test_a_check_that_breaks_is_unknown(checks):
    def broken():
        raise KeyError("VCpuInfo")

    result = checks.guarded("instance-type/X", broken)
    assert (result.status, result.message) == ("unknown", "the check broke: KeyError: 'VCpuInfo'")

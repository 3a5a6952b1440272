"""The FSx for Lustre and EFS quotas, against moto and Stubber."""

from __future__ import annotations

from tests.support.preflight_aws import MixedSession
from tests.support.preflight_aws import aws_context as _context
from tests.support.preflight_aws import plan as _plan
from tests.support.preflight_aws import quota as _quota


def test_lustre_storage_counts_the_accounts_file_systems_of_the_type(checks, aws):
    import boto3

    session = MixedSession("us-east-2")
    fsx = boto3.client("fsx", region_name="us-east-2", aws_access_key_id="t", aws_secret_access_key="t")
    for deployment_type, size in (("PERSISTENT_2", 2400), ("SCRATCH_2", 9600)):
        fsx.create_file_system(
            FileSystemType="LUSTRE",
            StorageCapacity=size,
            SubnetIds=["subnet-0123456789abcdef0"],
            LustreConfiguration={"DeploymentType": deployment_type},
        )
    quotas = session.stub("service-quotas")
    for storage in (3600, 2400):
        quotas.add_response(
            "get_service_quota", _quota("L-FD6F2F22", 100), {"ServiceCode": "fsx", "QuotaCode": "L-FD6F2F22"}
        )
        quotas.add_response(
            "get_service_quota", _quota("L-8F1B9C74", storage), {"ServiceCode": "fsx", "QuotaCode": "L-8F1B9C74"}
        )
    lustre = {"kind": "lustre", "storageGib": 1200, "deploymentType": "PERSISTENT_2", "throughputPerUnitStorage": 125}
    context = _context(checks, session, _plan(fileSystems=[lustre]), region="us-east-2")
    fits = checks.check_lustre_quotas(context, "PERSISTENT_2")
    assert fits.status == "pass"
    assert "Lustre Persistent_2 storage capacity (L-8F1B9C74): 2400 GiB + 1200 GiB of 3600 GiB" in fits.message
    short = checks.check_lustre_quotas(context, "PERSISTENT_2")
    assert short.status == "fail"
    assert "--service-code fsx --quota-code L-8F1B9C74 --desired-value 3600" in short.advice


def test_efs_file_systems_fit_the_accounts_quota(checks, aws):
    import boto3

    session = MixedSession("eu-west-2")
    efs = boto3.client("efs", region_name="eu-west-2", aws_access_key_id="t", aws_secret_access_key="t")
    for token in ("a", "b"):
        efs.create_file_system(CreationToken=token)
    asked = {"ServiceCode": "elasticfilesystem", "QuotaCode": "L-848C634D"}
    session.stub("service-quotas").add_response("get_service_quota", _quota("L-848C634D", 2), asked)
    result = checks.check_efs_file_systems(_context(checks, session, _plan(fileSystems=[{"kind": "efs"}]), "eu-west-2"))
    assert (result.status, result.message) == ("fail", "File systems per account (L-848C634D): 2 + 1 of 2")

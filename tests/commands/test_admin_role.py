"""``python -m trainium_eks admin-role``: the caller's IAM principal, as an EKS access entry can name it.

Real boto3 clients (fake credentials, no network) under botocore's Stubber: every call must be the expected one.
"""

import json

import pytest

from tests.support.stubbed_session import StubbedSession
from trainium_eks.commands import admin_role
from trainium_eks.stacks.app_context import settings_from_context

ACCOUNT = "123456789012"
SSO_SESSION = f"arn:aws:sts::{ACCOUNT}:assumed-role/AWSReservedSSO_Admin_0123456789abcdef/alice@example.com"
SSO_ROLE = f"arn:aws:iam::{ACCOUNT}:role/aws-reserved/sso.amazonaws.com/AWSReservedSSO_Admin_0123456789abcdef"


class StubbedIdentity(StubbedSession):
    """A session whose STS client says who calls (``caller_arn``) and whose IAM client has ``role`` (or refuses
    ``get_role`` with ``role_error``)."""

    def __init__(self, caller_arn, *, role=None, role_error=None):
        super().__init__(("sts", "iam"), "us-east-1")
        self.stubs["sts"].add_response(
            "get_caller_identity", {"Arn": caller_arn, "Account": ACCOUNT, "UserId": "AIDEXAMPLE"}
        )
        if role is not None:
            role_name = role.rsplit("/", 1)[1]
            path = "/" + role.split(":role/", 1)[1].rsplit("/", 1)[0] + "/" if role.count("/") > 1 else "/"
            self.stubs["iam"].add_response(
                "get_role",
                {
                    "Role": {
                        "Path": path,
                        "RoleName": role_name,
                        "RoleId": "AROAEXAMPLEEXAMPLE01",
                        "Arn": role,
                        "CreateDate": "2026-01-01T00:00:00Z",
                        "AssumeRolePolicyDocument": "{}",
                    }
                },
                {"RoleName": role_name},
            )
        if role_error is not None:
            self.stubs["iam"].add_client_error("get_role", role_error, "not allowed")


def test_an_sso_session_becomes_its_role_with_the_roles_path(tmp_path, capsys):
    session = StubbedIdentity(SSO_SESSION, role=SSO_ROLE)
    assert admin_role.main(["--save", "--directory", str(tmp_path)], session=session) == 0
    session.verify()
    assert json.loads((tmp_path / "cdk.context.json").read_text()) == {"adminRoleArn": SSO_ROLE}
    assert f"Cluster admin principal: {SSO_ROLE}" in capsys.readouterr().out


def test_saving_keeps_what_the_context_file_holds_and_the_app_accepts_the_value(tmp_path):
    (tmp_path / "cdk.context.json").write_text(json.dumps({"availability-zones:account=1:region=x": ["a"]}))
    session = StubbedIdentity(f"arn:aws:iam::{ACCOUNT}:user/alice")
    assert admin_role.main(["--save", "--directory", str(tmp_path)], session=session) == 0
    saved = json.loads((tmp_path / "cdk.context.json").read_text())
    assert saved == {
        "availability-zones:account=1:region=x": ["a"],
        "adminRoleArn": f"arn:aws:iam::{ACCOUNT}:user/alice",
    }

    class Node:
        def get_all_context(self):
            return {"region": "us-west-2", "adminRoleArn": saved["adminRoleArn"]}

    settings = settings_from_context(Node())
    assert settings.props["TrainiumEks"]["admin_role_arn"] == saved["adminRoleArn"]


def test_without_save_nothing_is_written_and_the_deploy_command_is_printed(tmp_path, capsys):
    session = StubbedIdentity(f"arn:aws:iam::{ACCOUNT}:role/Admin")
    assert admin_role.main(["--directory", str(tmp_path)], session=session) == 0
    assert not (tmp_path / "cdk.context.json").exists()
    deploy = f'make deploy STACK=<stack> ARGS="-c adminRoleArn=arn:aws:iam::{ACCOUNT}:role/Admin"'
    assert deploy in capsys.readouterr().out


def test_the_root_user_is_refused_with_what_to_do_instead(tmp_path, capsys):
    session = StubbedIdentity(f"arn:aws:iam::{ACCOUNT}:root")
    assert admin_role.main(["--save", "--directory", str(tmp_path)], session=session) == 1
    assert "root user" in capsys.readouterr().out and not (tmp_path / "cdk.context.json").exists()


def test_a_role_that_cannot_be_read_says_how_to_pass_it_by_hand(tmp_path, capsys):
    session = StubbedIdentity(SSO_SESSION, role_error="AccessDenied")
    assert admin_role.main(["--directory", str(tmp_path)], session=session) == 1
    out = capsys.readouterr().out
    assert "aws iam get-role --role-name AWSReservedSSO_Admin_0123456789abcdef" in out and "-c adminRoleArn=" in out


@pytest.mark.parametrize("arn", ["arn:aws:sts::123456789012:federated-user/bob", "not-an-arn"])
def test_unknown_caller_forms_are_refused(arn):
    with pytest.raises(admin_role.IdentityError, match="is neither an assumed role, an IAM role nor an IAM user"):
        admin_role.principal_arn(arn, iam=None)

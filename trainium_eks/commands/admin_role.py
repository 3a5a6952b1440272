"""``python -m trainium_eks admin-role``: who you are in AWS, as the IAM principal an EKS access entry can name.

CloudFormation creates the cluster as the CDK bootstrap's execution role, and aws-eks-v2 gives cluster admin to the
creator only, so after ``cdk deploy`` nobody else can use ``kubectl`` unless the stack names them (``adminRoleArn``).
This command finds the caller's IAM role (or user) with boto3 and, with ``--save``, writes it into
``cdk.context.json``, which the CDK CLI reads as context on every ``cdk synth`` and ``cdk deploy`` of this app.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any, Optional

CONTEXT_KEY = "adminRoleArn"
CONTEXT_FILE = "cdk.context.json"
"""The CDK CLI's project context file (read after ``-c`` and ``cdk.json``'s context, so ``cdk.json`` must not set the
key); this repository ignores it in git, as it is per user."""

_ASSUMED_ROLE = re.compile(r"arn:(?P<partition>aws[a-z-]*):sts::(?P<account>\d{12}):assumed-role/(?P<role>[^/]+)/.+")
_IAM_PRINCIPAL = re.compile(r"arn:aws[a-z-]*:iam::\d{12}:(role|user)/.+")


class IdentityError(RuntimeError):
    """The caller cannot be named by an access entry (root, an unknown ARN form, a role whose path is unknown)."""


def principal_arn(caller_arn: str, iam: Any) -> str:
    """The IAM principal an access entry must name for ``caller_arn`` (GetCallerIdentity's ``Arn``).

    An assumed-role session (IAM Identity Center, ``aws sts assume-role``) becomes its role's ARN **with the role's
    path** (``role/aws-reserved/sso.amazonaws.com/...``), read with ``iam:GetRole``: the EKS user guide, "Create
    access entries", says a role ARN may include a path and STS session principals cannot be used; the path is not
    in the session ARN. An IAM user or role ARN is returned as it is.
    """
    if _IAM_PRINCIPAL.fullmatch(caller_arn):
        return caller_arn
    match = _ASSUMED_ROLE.fullmatch(caller_arn)
    if match is None:
        if caller_arn.endswith(":root"):
            raise IdentityError(
                "you are signed in as the account's root user, which an EKS access entry cannot name; sign in with "
                "an IAM role (IAM Identity Center, or a role you assume) and run this again"
            )
        raise IdentityError(f"{caller_arn} is neither an assumed role, an IAM role nor an IAM user")
    role_name = match.group("role")
    try:
        return iam.get_role(RoleName=role_name)["Role"]["Arn"]
    except Exception as error:  # botocore's ClientError, or no credentials for IAM
        raise IdentityError(
            f"cannot read role {role_name} with iam:GetRole ({error}); its ARN must include the role's path, which "
            f"the session ARN {caller_arn} does not carry. Ask an administrator for it (aws iam get-role --role-name "
            f"{role_name}) and pass it as -c {CONTEXT_KEY}=<arn>"
        ) from error


def save_context(directory: Path, arn: str) -> Path:
    """Write ``adminRoleArn`` into ``cdk.context.json`` of ``directory``, keeping what the file already holds."""
    path = directory / CONTEXT_FILE
    context = json.loads(path.read_text()) if path.exists() else {}
    context[CONTEXT_KEY] = arn
    path.write_text(json.dumps(context, indent=2, sort_keys=True) + "\n")
    return path


def main(argv: Optional[list] = None, *, session: Any = None) -> int:
    """Print (and with ``--save`` store) the caller's IAM principal ARN. Returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m trainium_eks admin-role", description=__doc__.split("\n\n")[0])
    parser.add_argument("--save", action="store_true", help=f"write {CONTEXT_KEY} into {CONTEXT_FILE} here")
    parser.add_argument("--profile", help="AWS profile (default: the usual credential chain)")
    parser.add_argument("--region", default="us-east-1", help="region of the STS and IAM calls (default us-east-1)")
    parser.add_argument("--directory", type=Path, default=Path.cwd(), help="the CDK app's directory (default: .)")
    args = parser.parse_args(argv)
    if session is None:
        import boto3

        session = boto3.Session(profile_name=args.profile, region_name=args.region)
    caller = session.client("sts").get_caller_identity()["Arn"]
    try:
        arn = principal_arn(caller, session.client("iam"))
    except IdentityError as error:
        print(f"error: {error}")
        return 1
    print(f"You are {caller}")
    print(f"Cluster admin principal: {arn}")
    if args.save:
        path = save_context(args.directory, arn)
        print(f"Saved {CONTEXT_KEY} in {path}: the next `cdk deploy` gives it cluster-admin through an access entry.")
    else:
        print(f'Deploy with: make deploy STACK=<stack> ARGS="-c {CONTEXT_KEY}={arn}"   (or run this with --save)')
    return 0

"""``python -m trainium_eks preflight``: the checks a stack's deploy makes first, run now from your credentials.

The stacks are built in this process from the project's settings (``cdk.json``, ``cdk.context.json``, ``-c
key=value``; nothing is synthesized or deployed); the plan of what each launches (instance types and counts, AZ IDs,
capacity reservations, an existing node subnet, the Kubernetes version, the file systems) is the one its
:class:`~trainium_eks.constructs.preflight.Preflight` custom resource carries, and the checks are the Lambda's own
(``lambda/preflight/preflight_checks/``), made with the credentials and region of the AWS CLI's configuration
(``--profile``, ``--region``: default the stack's region).

Exit status: 0 when no check failed (a check that could not be made is shown as ``unknown`` with the reason), 1 when
one failed, 2 on a setting or project error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

from trainium_eks.commands.project_app import ProjectError, project_stacks


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainium_eks preflight", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", action="append", default=[], help="a stack of the app (repeat); default: all")
    parser.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE", help="as cdk synth -c")
    parser.add_argument("--profile", help="the AWS CLI profile to use (default: the default credentials)")
    parser.add_argument("--region", help="the region to check (default: the stack's)")
    parser.add_argument("--project", type=Path, default=Path.cwd(), help="the project directory (default: here)")
    options = parser.parse_args(argv)
    try:
        stacks = project_stacks(options.project, options.context, options.stack)
    except (ProjectError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    import boto3

    from trainium_eks.constructs.preflight import SOURCE, plan_of
    from trainium_eks.core.lambda_sources import load_lambda_module

    checks = load_lambda_module(SOURCE, "preflight_checks")
    failed = False
    for name, stack in stacks.items():
        plan = plan_of(stack, checks.PLAN_VERSION)
        region = options.region or plan["region"]
        session = boto3.session.Session(profile_name=options.profile, region_name=region)
        if session.region_name is None:
            print(f"error: {name}: no region (the stack has none): give --region", file=sys.stderr)
            return 2
        results = checks.run_checks(plan, session, region=session.region_name)
        print(f"{name} ({session.region_name}):")
        print(checks.format_table(results))
        failed = failed or any(result.status == "fail" for result in results)
    return 1 if failed else 0

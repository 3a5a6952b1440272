"""``python -m trainium_eks <command>``: the user's command line. No AWS call happens at import; a command that cannot
reach AWS says what to do in one line (:mod:`trainium_eks.commands.aws_errors`), never with a traceback."""

from __future__ import annotations

import importlib
import sys
from typing import List, Optional

from trainium_eks.commands.aws_errors import advice

COMMANDS = {
    "admin-role": "trainium_eks.commands.admin_role",
    "run": "trainium_eks.commands.run",
    "cost": "trainium_eks.commands.cost",
    "preflight": "trainium_eks.commands.preflight",
    "fabric": "trainium_eks.commands.fabric",
    "release": "trainium_eks.commands.release",
    "status": "trainium_eks.commands.status",
}
"""Command name -> module with ``main(argv)``."""

USAGE = """usage: python -m trainium_eks <command> [options]   (python -m trainium_eks <command> --help for its options)

commands:
  admin-role   the IAM principal that gets cluster-admin (--save writes it into cdk.context.json)
  run          start a run of the hybrid workflow (--runtime sagemaker|kubernetes) and follow it to the end
  cost         what each stack costs per hour by component, over --hours, and what a finished run cost
  preflight    the checks a deploy makes first (quotas, offerings, capacity, addresses), now, from your credentials
  fabric       what each fabric acceptance run measured across the nodes (bus bandwidth, floor, verdict) and a chart
  release      a gang or a waiting job of your own manifest, created by a release that holds its nodes first
  status       each job's state, restarts and last step; nodes replaced and why; fabric suspects"""


def main(argv: Optional[List[str]] = None) -> int:
    """Dispatch ``argv`` (default: the process's arguments) to a command; returns its exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    if not argv or argv[0] not in COMMANDS:
        what = f"unknown command {argv[0]!r}" if argv else "no command"
        print(f"error: {what}: one of {', '.join(COMMANDS)} (python -m trainium_eks --help)", file=sys.stderr)
        return 2
    command = importlib.import_module(COMMANDS[argv[0]])
    try:
        return command.main(argv[1:])
    except Exception as error:
        message = advice(error)
        if message is None:
            raise
        print(f"error: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

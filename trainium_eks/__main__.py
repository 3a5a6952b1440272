"""``python -m trainium_eks <command>``: the user's command line. No AWS call happens at import.

Commands:
  admin-role   the IAM principal that gets cluster-admin (``--save`` writes it into cdk.context.json)
  run          start a run of the hybrid workflow (--runtime sagemaker|kubernetes) and follow it to the end
  cost         what each stack costs per hour by component, over ``--hours``, and what a finished run cost
"""

from __future__ import annotations

import importlib
import sys
from typing import List, Optional

COMMANDS = {
    "admin-role": "trainium_eks.commands.admin_role",
    "run": "trainium_eks.commands.run",
    "cost": "trainium_eks.commands.cost",
}
"""Command name -> module with ``main(argv)``."""


def main(argv: Optional[List[str]] = None) -> int:
    """Dispatch ``argv`` (default: the process's arguments) to a command; returns its exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print(__doc__)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    return importlib.import_module(COMMANDS[argv[0]]).main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())

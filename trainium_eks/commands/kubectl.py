"""kubectl as the commands run it: its output, or one line that says what to do when it cannot run."""

from __future__ import annotations

import re
import subprocess
from typing import Optional, Sequence

KUBECTL = "kubectl"
KUBECTL_TIMEOUT_SECONDS = 60
_NOISE = re.compile(r"^(?:[IWEF]\d{4} |Warning: )")
"""kubectl's log lines (klog: ``E1205 12:00:00 ...``) and the server's warnings, which are not the reason a call
failed."""


class KubectlError(RuntimeError):
    """kubectl is missing, did not answer, or failed."""


def cluster_hint(stack: str) -> str:
    """How to point kubectl at the cluster of ``stack``."""
    return (
        f"point kubectl at the cluster of stack {stack}: run the stack's UpdateKubeconfigCommand output "
        "(aws eks update-kubeconfig --name <its ClusterName output> --region <its region>) with the admin role's "
        "credentials"
    )


def reason(stderr: str, returncode: int) -> str:
    """Why kubectl failed: the last line of ``stderr`` that is not a log line or a warning."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not _NOISE.match(line.strip())]
    return lines[-1] if lines else f"exit {returncode}"


def run_kubectl(
    args: Sequence[str], stack: str, what: str, *, stdin: Optional[str] = None
) -> subprocess.CompletedProcess:
    """kubectl run with ``args`` (and ``stdin``), whatever its exit status; a KubectlError of one line when it is
    missing or does not answer."""
    try:
        return subprocess.run(
            [KUBECTL, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=KUBECTL_TIMEOUT_SECONDS,
            check=False,
        )
    except FileNotFoundError as error:
        missing = f"kubectl is not installed (or not on PATH): install it, then {cluster_hint(stack)}"
        raise KubectlError(missing) from error
    except subprocess.TimeoutExpired as error:
        raise KubectlError(
            f"kubectl {what} gave no answer in {KUBECTL_TIMEOUT_SECONDS} s: {cluster_hint(stack)}"
        ) from error


def kubectl(args: Sequence[str], stack: str, what: str, *, hint: bool = True, stdin: Optional[str] = None) -> str:
    """kubectl's stdout for ``args`` (with ``stdin`` as its input); a KubectlError of one line that says what to do
    when it cannot run or fails (``what`` names the call; ``hint``: say how to point kubectl at the stack's cluster)."""
    done = run_kubectl(args, stack, what, stdin=stdin)
    if done.returncode != 0:
        advice = f": {cluster_hint(stack)}" if hint else ""
        raise KubectlError(f"kubectl {what} failed ({reason(done.stderr, done.returncode)}){advice}")
    return done.stdout

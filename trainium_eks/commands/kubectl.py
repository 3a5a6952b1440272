"""kubectl as the commands run it: its output, or one line that says what to do when it cannot run."""

from __future__ import annotations

import subprocess
from typing import Optional, Sequence

KUBECTL = "kubectl"
KUBECTL_TIMEOUT_SECONDS = 60


class KubectlError(RuntimeError):
    """kubectl is missing, did not answer, or failed."""


def cluster_hint(stack: str) -> str:
    """How to point kubectl at the cluster of ``stack``."""
    return (
        f"point kubectl at the cluster of stack {stack}: run the stack's UpdateKubeconfigCommand output "
        "(aws eks update-kubeconfig --name <its ClusterName output> --region <its region>) with the admin role's "
        "credentials"
    )


def kubectl(
    args: Sequence[str],
    stack: str,
    what: str,
    *,
    hint: bool = True,
    stdin: Optional[str] = None,
    ok_codes: Sequence[int] = (0,),
) -> str:
    """kubectl's stdout for ``args`` (with ``stdin`` as its input); a KubectlError of one line that says what to do
    when it cannot run or exits with a status not in ``ok_codes`` (``what`` names the call; ``hint``: say how to point
    kubectl at the stack's cluster)."""
    advice = f": {cluster_hint(stack)}" if hint else ""
    try:
        done = subprocess.run(
            [KUBECTL, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=KUBECTL_TIMEOUT_SECONDS,
            check=False,
        )
    except FileNotFoundError as error:
        raise KubectlError(
            f"kubectl is not installed (or not on PATH): install it, then {cluster_hint(stack)}"
        ) from error
    except subprocess.TimeoutExpired as error:
        raise KubectlError(f"kubectl {what} gave no answer in {KUBECTL_TIMEOUT_SECONDS} s{advice}") from error
    if done.returncode not in ok_codes:
        said = next((line.strip() for line in done.stderr.splitlines() if line.strip()), f"exit {done.returncode}")
        raise KubectlError(f"kubectl {what} failed ({said}){advice}")
    return done.stdout

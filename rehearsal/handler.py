"""Run the real kubectl/Helm handler of aws-eks-v2, from the installed aws-cdk-lib, with the commands a subclass
installs (the end-to-end tests' :class:`e2e.deploy.LiveHandlerWorkspace`: the layer's real kubectl and helm against
the test cluster).

The handler is Python inside aws-cdk-lib's jsii tarball (``aws_cdk/_jsii/aws-cdk-lib@<version>.jsii.tgz``, under
``package/custom-resource-handlers/dist/aws-eks-v2/kubectl-handler/``: ``index.py`` dispatches on the resource
type to ``apply``, ``helm``, ``patch`` and ``get``). :func:`extract_kubectl_handler` copies that directory out of
the tarball, unchanged; nothing of it is kept in this repository.

The handler runs in its own Python process (:mod:`.handler_process`), started once per workspace and reused for
every event, as Lambda reuses a warm execution environment: the handler changes ``os.environ['PATH']`` and the
root logger and reads ``TEST_OUTDIR`` when it is imported, so it must not be imported into the rehearsal's own
process. The process's environment: ``PATH`` holds only the
workspace's ``bin`` directory, where the subclass puts ``aws``, ``kubectl`` and ``helm`` (the handler prepends
``/opt/kubectl`` and ``/opt/awscli`` or ``/opt/helm``, the layer's directories, which must not hold them here),
``TEST_OUTDIR`` a
scratch directory (the handler writes its kubeconfig, ``manifest.yaml`` and ``values.yaml`` there), ``AWS_REGION``
the stack's region (Lambda sets it), and no credentials.

The Helm handler imports ``boto3`` and asks it only for the partition of a region (``is_ecr_public_available``, on
the OCI path). The Lambda runtime provides boto3; here a generated stand-in answers from the region prefix
(``cn-`` -> ``aws-cn``, ``us-gov-`` -> ``aws-us-gov``, else ``aws``), so the handler needs neither boto3 nor AWS.

What the provider framework does with the handler's answer (aws-cdk-lib's
``custom-resources/lib/provider-framework/runtime/framework.js``, same tarball, ``createResponseEvent`` and
``defaultPhysicalResourceId``): the physical id is the handler's ``PhysicalResourceId`` when it returns one, else
the request id on Create and the event's own ``PhysicalResourceId`` on Update and Delete. The kubectl and Helm
handlers return nothing, so an Update keeps the physical id and CloudFormation never replaces these resources
because of their properties (:func:`framework_physical_id`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Dict, Mapping, Optional, Tuple

from rehearsal.cfn_changes import Step
from rehearsal.intrinsics import StackIdentity, as_strings

HANDLER_TYPES = (
    "Custom::AWSCDK-EKS-KubernetesResource",
    "Custom::AWSCDK-EKS-HelmChart",
    "Custom::AWSCDK-EKS-KubernetesObjectValue",
)
"""Custom resources whose steps run the kubectl handler (its ``apply``, ``helm`` and ``get`` modules)."""

COMMANDS = ("aws", "helm", "kubectl")
"""The commands the handler runs."""

HANDLER_IN_TARBALL = "package/custom-resource-handlers/dist/aws-eks-v2/kubectl-handler/"
FRAMEWORK_IN_TARBALL = "package/custom-resources/lib/provider-framework/runtime/framework.js"
LAYER_DIRECTORIES = ("/opt/kubectl", "/opt/helm", "/opt/awscli")
"""Where the Lambda layers put kubectl, helm and aws; the handler puts them first on PATH."""

_BOTO3_STAND_IN = '''"""Stand-in for boto3 in the rehearsal: only what the kubectl handler of aws-eks-v2 uses."""


class Session:
    def get_partition_for_region(self, region):
        if region.startswith("cn-"):
            return "aws-cn"
        if region.startswith("us-gov-"):
            return "aws-us-gov"
        return "aws"
'''


def aws_cdk_lib_tarball() -> Path:
    """The jsii tarball of the installed aws-cdk-lib (found without importing aws_cdk, which starts jsii)."""
    spec = importlib.util.find_spec("aws_cdk")
    if spec is None or spec.origin is None:
        raise RuntimeError("aws-cdk-lib is not installed")
    found = sorted((Path(spec.origin).parent / "_jsii").glob("aws-cdk-lib@*.jsii.tgz"))
    if len(found) != 1:
        raise RuntimeError(f"expected one aws-cdk-lib jsii tarball, found {found}")
    return found[0]


def extract_kubectl_handler(destination: Path, tarball: Optional[Path] = None) -> Path:
    """Copy the kubectl handler directory out of aws-cdk-lib's tarball into ``destination``; return its path."""
    tarball = tarball or aws_cdk_lib_tarball()
    with tarfile.open(tarball) as archive:
        members = [m for m in archive.getmembers() if m.name.startswith(HANDLER_IN_TARBALL) and m.isfile()]
        if not members:
            raise RuntimeError(f"{tarball} has no {HANDLER_IN_TARBALL}")
        for member in members:
            target = destination / member.name[len(HANDLER_IN_TARBALL) :]
            target.parent.mkdir(parents=True, exist_ok=True)
            source = archive.extractfile(member)
            assert source is not None
            target.write_bytes(source.read())
    return destination


def framework_physical_id(event: Mapping[str, Any], response: Optional[Mapping[str, Any]]) -> str:
    """The physical id the provider framework reports to CloudFormation (framework.js ``createResponseEvent``)."""
    returned = (response or {}).get("PhysicalResourceId")
    if returned:
        if event["RequestType"] == "Delete" and returned != event["PhysicalResourceId"]:
            raise RuntimeError("DELETE: cannot change the physical resource ID during deletion")
        return str(returned)
    return str(event["RequestId"] if event["RequestType"] == "Create" else event["PhysicalResourceId"])


@dataclass
class Invocation:
    """One run of the handler.

    :param event: The CloudFormation event it got.
    :param succeeded: Whether it returned (CloudFormation gets SUCCESS) rather than raised (FAILED).
    :param error: The exception it raised.
    :param log: What it printed and logged.
    :param physical_id: The physical id the provider framework reports.
    """

    event: Dict[str, Any]
    succeeded: bool
    error: str
    log: str
    physical_id: Optional[str] = None


def custom_resource_event(step: Step, identity: StackIdentity, index: int) -> Dict[str, Any]:
    """The CloudFormation event of a custom resource step, with every value a string as CloudFormation sends it."""
    properties = as_strings(dict(step.properties))
    request_id = (
        step.physical_id
        if step.operation == "Create"
        else str(uuid.uuid5(uuid.NAMESPACE_URL, f"{identity.stack_id}/{step.logical_id}/{step.operation}/{index}"))
    )
    event: Dict[str, Any] = {
        "RequestType": step.operation,
        "ServiceToken": properties.get("ServiceToken", ""),
        "ResponseURL": "https://cloudformation-custom-resource-response.rehearsal.invalid/",
        "StackId": identity.stack_id,
        "RequestId": request_id,
        "LogicalResourceId": step.logical_id,
        "ResourceType": step.resource_type,
        "ResourceProperties": properties,
    }
    if step.operation in ("Update", "Delete"):
        event["PhysicalResourceId"] = step.physical_id
    if step.operation == "Update":
        event["OldResourceProperties"] = as_strings(dict(step.old_properties or {}))
    return event


class HandlerWorkspace:
    """A scratch directory with the extracted handler, an empty ``bin`` directory for the commands (a subclass puts
    :data:`COMMANDS` there) and the handler's ``TEST_OUTDIR``. Use as a context manager, or call :meth:`close`.

    :param region: The stack's region (``AWS_REGION`` of the Lambda).
    """

    def __init__(self, region: str) -> None:
        for directory in LAYER_DIRECTORIES:
            if any((Path(directory) / name).exists() for name in COMMANDS):
                raise RuntimeError(f"{directory} holds a command; the handler would run it instead of the workspace's")
        self.region = region
        self.root = Path(tempfile.mkdtemp(prefix="trainium-eks-rehearsal-"))
        self.handler_dir = extract_kubectl_handler(self.root / "handler")
        self.stand_ins = self.root / "stand-ins"
        (self.stand_ins / "boto3").mkdir(parents=True)
        (self.stand_ins / "boto3" / "__init__.py").write_text(_BOTO3_STAND_IN)
        self.bin_dir = self.root / "bin"
        self.bin_dir.mkdir()
        self.import_root = Path(__file__).resolve().parents[1]
        self.outdir = self.root / "outdir"
        self.outdir.mkdir()
        self.temporary = self.root / "tmp"
        self.temporary.mkdir()
        self.handler_log = self.root / "handler.log"
        self._counter = 0
        self._process: Optional[subprocess.Popen] = None
        self._done: Optional[IO[str]] = None

    def __enter__(self) -> "HandlerWorkspace":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def close(self) -> None:
        """Stop the handler process and remove the scratch directory."""
        self._stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def _stop(self) -> None:
        if self._process is not None:
            assert self._process.stdin is not None and self._done is not None
            self._process.stdin.close()
            self._process.wait(timeout=60)
            self._done.close()
        self._process, self._done = None, None

    def environment(self) -> Dict[str, str]:
        """The handler process's environment."""
        return {
            "PATH": str(self.bin_dir),
            "PYTHONPATH": os.pathsep.join([str(self.stand_ins), str(self.handler_dir), str(self.import_root)]),
            "TEST_OUTDIR": str(self.outdir),
            "HOME": str(self.root),
            # The handler's own temporary folders (a chart pulled from an OCI registry), inside the workspace.
            "TMPDIR": str(self.temporary),
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def _handler_process(self) -> Tuple[subprocess.Popen, IO[str]]:
        """The warm handler process (started on first use, like a Lambda execution environment)."""
        if self._process is None or self._process.poll() is not None:
            read_end, write_end = os.pipe()
            with open(self.handler_log, "a") as log:
                self._process = subprocess.Popen(
                    [sys.executable, "-S", "-m", "rehearsal.handler_process", str(write_end)],
                    env=self.environment(),
                    cwd=self.root,
                    stdin=subprocess.PIPE,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    pass_fds=(write_end,),
                    text=True,
                )
            os.close(write_end)
            self._done = os.fdopen(read_end)
        assert self._done is not None
        return self._process, self._done

    def invoke(self, event: Mapping[str, Any]) -> Invocation:
        """Run the handler (``index.handler``) with ``event``."""
        self._counter += 1
        event_file = self.root / f"event-{self._counter}.json"
        result_file = self.root / f"result-{self._counter}.json"
        event_file.write_text(json.dumps(event))
        log_offset = self.handler_log.stat().st_size if self.handler_log.exists() else 0
        process, done = self._handler_process()
        assert process.stdin is not None
        process.stdin.write(json.dumps([str(event_file), str(result_file)]) + "\n")
        process.stdin.flush()
        finished = done.readline()
        with open(self.handler_log) as log_file:
            log_file.seek(log_offset)
            log = log_file.read()
        if not finished or not result_file.is_file():
            self._stop()
            return Invocation(dict(event), False, f"the handler process died: {log[-2000:]}", log)
        result = json.loads(result_file.read_text())
        if not result["succeeded"]:
            return Invocation(dict(event), False, result["error"], log)
        physical_id = framework_physical_id(event, result.get("response"))
        return Invocation(dict(event), True, "", log, physical_id)

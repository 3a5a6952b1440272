"""Which container images the harness runs as local processes (:mod:`e2e.components`), with which binary, and how
each one's pod is adapted to loopback: its listening ports moved to free ports of 127.0.0.1, its webhook serving a
certificate of the harness CA, its API client given the pod's service-account kubeconfig. Everything else (the
pod's arguments, environment and mounted files) is the chart's, as the stacks render it.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import yaml

from e2e.cluster import free_port
from e2e.karpenter_kwok import LAUNCH_FAILURES_FILE, NODE_CLASS_CRD, instance_types_document
from e2e.pki import CertificateAuthority
from rehearsal.kubelet_expansion import expand
from trainium_eks.manifests.jobs.job_release import RELEASE_COMPONENT, RELEASE_IMAGE


@dataclass
class PodRun:
    """One pod's process: what it is given, and what it serves.

    :param pod: The pod.
    :param container: The container run.
    :param root: The pod's folder (its volumes, kubeconfig, temporary files).
    :param workdir: The test cluster's folder (where a test leaves files for the components, as
        :data:`~e2e.karpenter_kwok.LAUNCH_FAILURES_FILE`).
    :param kubeconfig: The pod's service-account kubeconfig.
    :param token: The pod's service-account token (also in ``kubeconfig``).
    :param mounts: Mount path -> local path of its ConfigMap and Secret volumes.
    :param env: Its environment.
    :param binaries: Binary name -> path.
    :param pki: The harness CA.
    :param argv: The command line (set by :meth:`ComponentImage.prepare`).
    :param webhook_port: The port its webhook server listens on (None: it serves none).
    :param ready_url: Where its readiness answers (the pod's readiness probe, moved with its port).
    :param ca_bundle_by_harness: Whether the harness writes the webhook configurations' ``caBundle`` (it stands in
        for the component's own certificate rotation, which is off); else the component writes it, as in a cluster.
    """

    pod: Dict[str, Any]
    container: Mapping[str, Any]
    root: Path
    workdir: Path
    kubeconfig: Path
    token: str
    mounts: Dict[str, Path]
    env: Dict[str, str]
    binaries: Dict[str, Path]
    pki: CertificateAuthority
    argv: List[str] = field(default_factory=list)
    webhook_port: Optional[int] = None
    ca_bundle_by_harness: bool = False
    ready_url: Optional[str] = None

    def local(self, path: str) -> str:
        """A path of the container's file system, as the local file of the mount that holds it."""
        for mount in sorted(self.mounts, key=len, reverse=True):
            if path == mount or path.startswith(mount.rstrip("/") + "/"):
                return str(self.mounts[mount]) + path[len(mount) :]
        return path

    def args(self) -> List[str]:
        """The container's arguments, with every ``--flag=/path`` in a mount turned into the local path."""
        translated = []
        for arg in self.container.get("args") or []:
            name, has_value, value = str(arg).partition("=")
            translated.append(f"{name}={self.local(value)}" if has_value and value.startswith("/") else str(arg))
        return translated

    def command(self) -> List[str]:
        """The container's command and arguments as kubelet runs them (``$(VAR)`` expanded with its environment),
        with every argument that is a path in a mount turned into the local path."""
        words = [expand(str(w), self.env) for w in [*(self.container.get("command") or []), *self.args()]]
        return [self.local(w) if w.startswith("/") else w for w in words]

    def service_name(self) -> str:
        """The pod's name with the namespace, for certificate and file names."""
        return f"{self.pod['metadata']['namespace']}-{self.pod['metadata']['name']}"


def replace_flag(args: List[str], name: str, value: str) -> List[str]:
    """``args`` with ``--name=value`` instead of any ``--name`` given."""
    kept = [a for a in args if a != f"--{name}" and not a.startswith(f"--{name}=")]
    return [*kept, f"--{name}={value}"]


@dataclass(frozen=True)
class ComponentImage:
    """A container image the harness runs, by the repository in its reference.

    :param repository: A regular expression the image reference (without tag) must match.
    :param binary: The binary built from Go that runs it (None: the container's own command runs, as ``adapt`` sets
        it).
    :param adapt: Sets the run's ``argv``, environment and ``webhook_port``.
    :param runs: Whether a container of that image in that pod is the component (False: the image runs another
        program, as Volcano's admission-init Job runs a shell script from the webhook image; kwok completes that pod).
    :param crds: CRDs the stand-in needs that the stacks do not install: files of the component's Go module (in the
        module cache, where its build put it).
    :param rules: RBAC rules the stand-in needs beyond the chart's for the real component (bound to the pod's
        service account by the harness).
    """

    repository: str
    binary: Optional[str]
    adapt: Callable[[PodRun], None]
    runs: Callable[[Mapping[str, Any], Mapping[str, Any]], bool] = lambda pod, container: True
    crds: Tuple[str, ...] = ()
    rules: Tuple[Mapping[str, Any], ...] = ()

    def matches(self, pod: Mapping[str, Any], container: Mapping[str, Any]) -> bool:
        reference = str(container.get("image", "")).split("@")[0].rsplit(":", 1)[0]
        return re.search(self.repository, reference) is not None and self.runs(pod, container)

    def prepare(self, run: PodRun) -> PodRun:
        self.adapt(run)
        if self.binary is not None:
            run.argv.insert(0, str(run.binaries[self.binary]))
        return run


def _loopback(port: Optional[int] = None) -> str:
    return f"127.0.0.1:{port or free_port()}"


def _volcano_common(run: PodRun) -> List[str]:
    healthz = _loopback()
    run.ready_url = f"http://{healthz}/healthz"
    args = replace_flag(run.args(), "kubeconfig", str(run.kubeconfig))
    args = replace_flag(args, "healthz-address", healthz)
    return replace_flag(args, "listen-address", _loopback())


def _volcano_scheduler(run: PodRun) -> None:
    run.argv = _volcano_common(run)


def _volcano_controllers(run: PodRun) -> None:
    run.argv = _volcano_common(run)


def _volcano_admission(run: PodRun) -> None:
    """The webhook server on a free port of 127.0.0.1 with a harness certificate (the chart's admission-init Job,
    which writes the certificate Secret, does not run: kwok completes its pod)."""
    pair = run.pki.serving(run.service_name(), [f"*.{run.pod['metadata']['namespace']}.svc"])
    run.webhook_port = free_port()
    healthz = _loopback()
    run.ready_url = f"https://{healthz}/healthz"  # served with the webhook's certificate
    args = replace_flag(run.args(), "kubeconfig", str(run.kubeconfig))
    args = replace_flag(args, "healthz-address", healthz)
    args = replace_flag(args, "listen-address", "127.0.0.1")
    args = replace_flag(args, "port", str(run.webhook_port))
    args = replace_flag(args, "tls-cert-file", str(pair.cert))
    args = replace_flag(args, "tls-private-key-file", str(pair.key))
    run.argv = replace_flag(args, "ca-cert-file", str(run.pki.pair.cert))


def _controller_runtime_config(run: PodRun, cert_management: str) -> None:
    """A controller-runtime manager configured by ``--config`` (JobSet, Trainer): its servers on free ports of
    127.0.0.1, leader election off (one replica), and its internal certificate rotation off: the webhook serves the
    harness certificate from controller-runtime's default folder (``$TMPDIR/k8s-webhook-server/serving-certs``)."""
    args = run.args()
    config_arg = next(a for a in args if a.startswith("--config="))
    path = Path(config_arg.split("=", 1)[1])
    config = yaml.safe_load(path.read_text())
    run.webhook_port = free_port()
    health = _loopback()
    run.ready_url = f"http://{health}/readyz"
    config.setdefault("health", {})["healthProbeBindAddress"] = health
    config.setdefault("metrics", {})["bindAddress"] = _loopback()
    config["webhook"] = {**(config.get("webhook") or {}), "port": run.webhook_port, "host": "127.0.0.1"}
    config.setdefault("leaderElection", {})["leaderElect"] = False
    config.setdefault(cert_management, {})["enable"] = False
    if "statusServer" in config:
        config["statusServer"]["port"] = free_port()
    local_config = run.root / "controller_manager_config.yaml"
    local_config.write_text(yaml.safe_dump(config))
    certs = run.root / "tmp" / "k8s-webhook-server" / "serving-certs"
    certs.mkdir(parents=True, exist_ok=True)
    pair = run.pki.serving(run.service_name(), [f"*.{run.pod['metadata']['namespace']}.svc"])
    (certs / "tls.crt").write_bytes(pair.cert.read_bytes())
    (certs / "tls.key").write_bytes(pair.key.read_bytes())
    run.env["TMPDIR"] = str(run.root / "tmp")
    run.ca_bundle_by_harness = True
    run.argv = replace_flag(args, "config", str(local_config))


def _jobset(run: PodRun) -> None:
    _controller_runtime_config(run, "internalCertManagement")


def _trainer(run: PodRun) -> None:
    _controller_runtime_config(run, "certManagement")


def _karpenter(run: PodRun) -> None:
    """Karpenter's core with the kwok cloud provider, in place of the AWS provider's controller: the chart's
    environment (settings), its ports moved, leader election kept (the chart runs two replicas), the library's
    instance catalog as the provider's instance types (:mod:`e2e.karpenter_kwok`), and the launches a test makes
    fail (:data:`~e2e.karpenter_kwok.LAUNCH_FAILURES_FILE`)."""
    instance_types = run.root / "instance_types.json"
    instance_types.write_text(json.dumps(instance_types_document()))
    run.env["INSTANCE_TYPES_FILE_PATH"] = str(instance_types)
    run.env["TRAINIUM_EKS_E2E_LAUNCH_FAILURES"] = str(run.workdir / LAUNCH_FAILURES_FILE)
    run.env["METRICS_PORT"] = str(free_port())
    run.env["HEALTH_PROBE_PORT"] = str(free_port())
    run.ready_url = f"http://127.0.0.1:{run.env['HEALTH_PROBE_PORT']}/readyz"
    # In a pod, the namespace comes from the service-account mount; outside one it must be given.
    run.env["LEADER_ELECTION_NAMESPACE"] = run.pod["metadata"]["namespace"]
    run.argv = run.args()


SERVICE_ACCOUNT_MOUNT = "/run/secrets/kubernetes.io/serviceaccount"
"""Where kubelet mounts a pod's service-account token, CA and namespace (``/var/run`` is ``/run``)."""


def _in_cluster_program(run: PodRun) -> None:
    """A program of the pod's own image (its command, on this machine's Python), reaching the API server as an
    in-cluster client does: ``KUBERNETES_SERVICE_HOST``/``PORT`` (kubelet's environment) and the service-account
    files at kubelet's mount path, which the harness bind-mounts over ``/run`` in a mount namespace of the process
    alone (the machine's ``/run`` is untouched)."""
    account = run.root / "run" / SERVICE_ACCOUNT_MOUNT.removeprefix("/run/")
    account.mkdir(parents=True, exist_ok=True)
    (account / "token").write_text(run.token)
    (account / "ca.crt").write_bytes(run.pki.pair.cert.read_bytes())
    (account / "namespace").write_text(run.pod["metadata"]["namespace"])
    command = run.command()
    if command and command[0] == "python3":
        command[0] = sys.executable
    mount = 'mount --bind "$0" /run && exec "$@"'
    run.argv = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", mount, str(run.root / "run")]
    run.argv.extend(command)


COMPONENT_IMAGES = (
    ComponentImage(r"volcanosh/vc-scheduler$", "vc-scheduler", _volcano_scheduler),
    ComponentImage(r"volcanosh/vc-controller-manager$", "vc-controller-manager", _volcano_controllers),
    ComponentImage(
        r"volcanosh/vc-webhook-manager$",
        "vc-webhook-manager",
        _volcano_admission,
        runs=lambda pod, container: not container.get("command"),
    ),
    ComponentImage(r"jobset/jobset$", "jobset-controller", _jobset),
    ComponentImage(r"kubeflow/trainer/trainer-controller-manager$", "trainer-controller-manager", _trainer),
    ComponentImage(
        r"karpenter/controller$",
        "karpenter-kwok",
        _karpenter,
        crds=(NODE_CLASS_CRD,),
        # The kwok provider's node class, and the Node it creates where EC2's kubelet would register one: the rules
        # of ../shared/upstream/charts/karpenter-kwok-1.14.1 (clusterrole-kwok.yaml, clusterrole.yaml) that the AWS
        # chart's ClusterRoles do not have.
        rules=(
            {
                "apiGroups": ["karpenter.kwok.sh"],
                "resources": ["kwoknodeclasses", "kwoknodeclasses/status"],
                "verbs": ["get", "list", "watch", "patch", "update"],
            },
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["create"]},
            {"apiGroups": ["karpenter.sh"], "resources": ["nodeclaims/finalizers"], "verbs": ["update", "patch"]},
        ),
    ),
    ComponentImage(
        re.escape(RELEASE_IMAGE.split("@")[0].rsplit(":", 1)[0]) + "$",
        None,
        _in_cluster_program,
        runs=lambda pod, container: (
            (pod["metadata"].get("labels") or {}).get("app.kubernetes.io/name") == RELEASE_COMPONENT
        ),
    ),
)
"""The images of the stacks' charts that run as processes, and the release Jobs' program
(:mod:`trainium_eks.manifests.jobs.job_release_program`, run with the token of the ``job-release`` service account,
so that its RBAC is the real check); every other pod is kwok's alone."""

"""Play kubelet for the pods of the upstream controllers: a pod on a kwok node whose container image is one of the
components built from Go (:mod:`e2e.component_images`) runs as a local process of that binary, with the pod's own
arguments, environment, ConfigMap and Secret volumes, and a token of the pod's service account (so that its RBAC is
the real check); kwok reports the pod's status as for every other pod.

Kubelet's behaviour that matters to the components is kept: a process is started when its pod is bound to a node,
stopped when the pod is deleted or leaves the node, and restarted when it ends on its own, after kubelet's back-off
(10 s doubling to 300 s, ``pkg/kubelet/kubelet.go`` ``backOffPeriod``/``MaxContainerBackOff``): a controller that
exits because the API server does not serve its CRDs yet (Trainer's runtime index) comes back as in a cluster; a
process whose pod's ``restartPolicy`` does not restart it (a Job's pod) ends its pod, Succeeded or Failed with the
container's exit code.

What cannot be kept on loopback is adapted per image (:mod:`e2e.component_images`): every listening port is moved
to a free port of 127.0.0.1, and a webhook server serves a certificate of the harness CA for
``*.<namespace>.svc``. The webhook configurations keep naming their Services: once a webhook pod's process has
started, the API server's service proxy (:mod:`e2e.service_proxy`) routes its Service's address to that port, as
kube-proxy routes it to the pod in a cluster. Their ``caBundle`` stays whatever the component writes into them
(Volcano's admission server writes its CA after it starts answering its readiness probe, as in a cluster), except
where the harness turned the component's own certificate rotation off (JobSet, Trainer): then the harness writes
the CA, as the rotation would.
"""

from __future__ import annotations

import base64
import copy
import datetime
import math
import os
import shutil
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

import requests
import yaml

from e2e.api import ApiError
from e2e.build import module_source
from e2e.cluster import TestCluster, write_kubeconfig
from e2e.component_images import COMPONENT_IMAGES, ComponentImage, PodRun
from e2e.karpenter_kwok import reconcile_node_classes
from e2e.processes import HarnessError
from rehearsal.kubelet_expansion import expand
from trainium_eks.facts.control_plane import COMPONENTS
from trainium_eks.manifests.access.admission_policy import ADMISSION_API
from trainium_eks.manifests.jobs.job_release_program import quantity

BACKOFF_FIRST, BACKOFF_MAX = 10.0, 300.0
"""Kubelet's restart back-off of a container that ended: 10 s, doubled each time, at most 300 s."""

WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


@dataclass
class _Running:
    """A pod's process and what it serves."""

    uid: str
    image: ComponentImage
    run: PodRun
    restarts: int = 0
    restart_at: Optional[float] = None
    exit_code: Optional[int] = None
    """Set when the process ended for good (its pod's restart policy does not restart it)."""
    started_at: float = field(default_factory=time.monotonic)


@dataclass
class ComponentRunner:
    """Runs the component pods of ``cluster`` in a thread; a context manager that stops them all on exit.

    :param cluster: The test cluster.
    :param binaries: Binary name -> path.
    :param interval: Seconds between two looks at the pods.
    """

    cluster: TestCluster
    binaries: Mapping[str, Path]
    interval: float = 1.0
    running: Dict[str, _Running] = field(default_factory=dict)
    errors: List[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: Optional[threading.Thread] = None

    def __enter__(self) -> "ComponentRunner":
        self._thread = threading.Thread(target=self._loop, name="component-runner", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
        for key in list(self.running):
            self._end(key)

    def check(self) -> None:
        """Raise what went wrong in the runner's thread (a pod it could not run)."""
        if self.errors:
            raise HarnessError("the component runner failed:\n" + "\n".join(self.errors))

    def describe(self) -> str:
        """The pods run as processes, their restarts and the end of their logs, and the runner's errors."""
        lines = ["--- component pods ---"]
        for key, running in list(self.running.items()):
            process = self.cluster.processes.started.get(_process_name(key))
            state = "running" if process and process.popen.poll() is None else "ended"
            program = running.image.binary or running.run.argv[-1]
            lines.append(f"{key} ({program}): {state}, {running.restarts} restarts")
            if process is not None:
                lines.append("    " + process.tail(800).replace("\n", "\n    "))
        lines.extend(f"runner error: {error}" for error in self.errors)
        return "\n".join(lines)

    def logs(self, binary: str) -> List[Path]:
        """The log files of the processes that run pods of ``binary`` (a restarted process appends to its file)."""
        found = []
        for key, running in list(self.running.items()):
            process = self.cluster.processes.started.get(_process_name(key))
            if running.image.binary == binary and process is not None:
                found.append(process.log)
        return found

    def _serving(self, binary: str) -> bool:
        """Whether a process of ``binary`` is running."""
        for key, running in list(self.running.items()):
            process = self.cluster.processes.started.get(_process_name(key))
            if running.image.binary == binary and process is not None and process.popen.poll() is None:
                return True
        return False

    def restarts(self) -> Dict[str, int]:
        """Pod key -> how often its process was restarted."""
        return {key: running.restarts for key, running in self.running.items()}

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._sync()
                self._reconcile_webhooks()
                self.cluster.csi.reconcile(self.cluster.api)
                if self._serving("karpenter-kwok"):
                    reconcile_node_classes(self.cluster.api)
            except ApiError as error:
                if not error.transient:  # a busy or (re)initializing server: the next look tries again
                    self._report(error)
            except Exception as error:  # noqa: BLE001 - reported through check(), the loop goes on
                self._report(error)
            self._stop.wait(self.interval)

    # --- pods -> processes -------------------------------------------------------------------------------------

    def _sync(self) -> None:
        seen = set()
        pods = self.cluster.api.list("v1", "Pod")
        self._probe_readiness(pods)
        for pod in pods:
            meta, spec = pod["metadata"], pod["spec"]
            if not spec.get("nodeName") or meta.get("deletionTimestamp"):
                continue
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            image = _component_of(pod)
            if image is None:
                continue
            key = f"{meta['namespace']}/{meta['name']}"
            seen.add(key)
            try:
                self._sync_pod(key, pod, image)
            except Exception as error:  # noqa: BLE001 - one pod's failure must not stop the others
                self._report(error, key)
        for key in [k for k in self.running if k not in seen]:
            self._end(key)

    def _sync_pod(self, key: str, pod: Dict[str, Any], image: ComponentImage) -> None:
        running = self.running.get(key)
        if running is not None and running.uid != pod["metadata"]["uid"]:
            self._end(key)
            running = None
        if running is None:
            self.running[key] = _Running(pod["metadata"]["uid"], image, self._start(key, pod, image))
        else:
            self._keep_up(key, running)

    def _report(self, error: BaseException, context: str = "") -> None:
        where = traceback.extract_tb(error.__traceback__)[-1]
        message = f"{context + ': ' if context else ''}{type(error).__name__}: {error} "
        message += f"({Path(where.filename).name}:{where.lineno})"
        if message not in self.errors:
            self.errors.append(message)

    def _probe_readiness(self, pods: List[Dict[str, Any]]) -> None:
        """Kubelet's readiness probes: a running pod with a readiness probe that is not ready yet becomes ready
        when its component's readiness endpoint answers 200, probed from the probe's ``initialDelaySeconds`` after
        its process started (a pod with no program here: at once)."""
        for pod in pods:
            meta, status = pod["metadata"], pod.get("status") or {}
            if status.get("phase") != "Running" or meta.get("deletionTimestamp"):
                continue
            if not any(c.get("readinessProbe") for c in pod["spec"]["containers"]):
                continue
            if any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []):
                continue
            if _component_of(pod) is not None:
                running = self.running.get(f"{meta['namespace']}/{meta['name']}")
                if running is None or running.uid != meta["uid"]:
                    continue  # its process is not started yet
                probes = [c["readinessProbe"] for c in pod["spec"]["containers"] if c.get("readinessProbe")]
                delay = max(int(p.get("initialDelaySeconds") or 0) for p in probes)
                if time.monotonic() - running.started_at < delay or not self._answers(running.run.ready_url):
                    continue
            conditions = [
                {**c, "status": "True"} if c.get("type") in ("Ready", "ContainersReady") else c
                for c in status.get("conditions") or []
            ]
            containers = [{**c, "ready": True} for c in status.get("containerStatuses") or []]
            self.cluster.api.patch(
                "v1",
                "Pod",
                meta["name"],
                {"status": {"conditions": conditions, "containerStatuses": containers}},
                namespace=meta["namespace"],
                subresource="status",
            )

    def _answers(self, url: Optional[str]) -> bool:
        if url is None:
            return True
        try:
            return requests.get(url, timeout=2, verify=str(self.cluster.pki.pair.cert)).status_code == 200
        except requests.RequestException:
            return False

    def _start(self, key: str, pod: Mapping[str, Any], image: ComponentImage) -> PodRun:
        root = self.cluster.workdir / "pods" / key.replace("/", "_")
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        meta, spec = pod["metadata"], pod["spec"]
        account = spec.get("serviceAccountName") or "default"
        token = self.cluster.api.token(meta["namespace"], account)
        kubeconfig = write_kubeconfig(root / "kubeconfig", self.cluster.server, self.cluster.pki.pair.cert, token)
        for crd in image.crds:
            source = module_source(next(c for c in COMPONENTS if image.binary in dict(c.binaries)))
            self.cluster.api.apply(yaml.safe_load((source / crd).read_text()))
        if image.rules:
            self._grant(image, meta["namespace"], account)
        container = next(c for c in spec["containers"] if image.matches(pod, c))
        mounts = self._volumes(pod, container, root)
        env = self._environment(pod, container, kubeconfig)
        run = image.prepare(
            PodRun(
                pod=copy.deepcopy(dict(pod)),
                container=container,
                root=root,
                workdir=self.cluster.workdir,
                kubeconfig=kubeconfig,
                token=token,
                mounts=mounts,
                env=env,
                binaries=dict(self.binaries),
                pki=self.cluster.pki,
            )
        )
        if run.webhook_port:
            self.running[key] = _Running(meta["uid"], image, run)
            self._reconcile_webhooks()  # before the server starts, so that nothing else writes them meanwhile
        self._launch(key, run)
        return run

    def _grant(self, image: ComponentImage, namespace: str, account: str) -> None:
        """Bind the stand-in's extra rules to the pod's service account."""
        name = f"trainium-eks-e2e:{image.binary}"
        rbac = "rbac.authorization.k8s.io/v1"
        self.cluster.api.apply(
            {"apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": name}, "rules": list(image.rules)}
        )
        self.cluster.api.apply(
            {
                "apiVersion": rbac,
                "kind": "ClusterRoleBinding",
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
            }
        )

    def _launch(self, key: str, run: PodRun) -> None:
        self.cluster.processes.start(_process_name(key), run.argv, env=run.env, cwd=run.root, daemon=False)

    def _keep_up(self, key: str, running: _Running) -> None:
        process = self.cluster.processes.started.get(_process_name(key))
        if running.exit_code is not None or process is None or process.popen.poll() is None:
            return
        code = process.popen.returncode
        policy = running.run.pod["spec"].get("restartPolicy", "Always")
        if policy == "Never" or (policy == "OnFailure" and code == 0):
            exit_code = code if code >= 0 else 128 - code  # a signal's number, as a shell reports it
            self._report_end(running.run, exit_code)
            running.exit_code = exit_code  # once reported: a failed report is tried again at the next look
            return
        now = time.monotonic()
        if running.restart_at is None:
            running.restart_at = now + min(BACKOFF_FIRST * 2**running.restarts, BACKOFF_MAX)
        elif now >= running.restart_at:
            running.restarts += 1
            running.restart_at = None
            running.started_at = now
            self.cluster.processes.stop_one(_process_name(key))
            self._launch(key, running.run)

    def _report_end(self, run: PodRun, exit_code: int) -> None:
        """A pod whose container will not restart ended: its status as kubelet reports it (Succeeded on exit 0,
        else Failed, with the container's exit code, which a Job's pod failure policy reads)."""
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        meta = run.pod["metadata"]
        containers = [
            {
                "name": c["name"],
                "image": c["image"],
                "ready": False,
                "started": False,
                "restartCount": 0,
                "state": {
                    "terminated": {
                        "exitCode": exit_code,
                        "reason": "Completed" if exit_code == 0 else "Error",
                        "finishedAt": now,
                    }
                },
            }
            for c in run.pod["spec"]["containers"]
        ]
        not_ready = {"status": "False", "reason": "PodCompleted", "lastTransitionTime": now}
        status = {
            "phase": "Succeeded" if exit_code == 0 else "Failed",
            "conditions": [{"type": "Ready", **not_ready}, {"type": "ContainersReady", **not_ready}],
            "containerStatuses": containers,
        }
        self.cluster.api.patch("v1", "Pod", meta["name"], {"status": status}, meta["namespace"], "status")

    def _end(self, key: str) -> None:
        self.cluster.processes.stop_one(_process_name(key))
        self.running.pop(key, None)

    def _volumes(self, pod: Mapping[str, Any], container: Mapping[str, Any], root: Path) -> Dict[str, Path]:
        """Write the container's ConfigMap and Secret volumes under ``root``; mount path -> local folder."""
        namespace = pod["metadata"]["namespace"]
        volumes = {v["name"]: v for v in pod["spec"].get("volumes") or []}
        mounts: Dict[str, Path] = {}
        for mount in container.get("volumeMounts") or []:
            volume = volumes.get(mount["name"], {})
            local = root / "volumes" / mount["name"]
            local.mkdir(parents=True, exist_ok=True)
            mounts[mount["mountPath"]] = local / mount["subPath"] if mount.get("subPath") else local
            files: Dict[str, bytes] = {}
            if "configMap" in volume:
                found = self.cluster.api.get("v1", "ConfigMap", volume["configMap"]["name"], namespace) or {}
                files = {k: v.encode() for k, v in (found.get("data") or {}).items()}
            elif "secret" in volume:
                found = self.cluster.api.get("v1", "Secret", volume["secret"]["secretName"], namespace) or {}
                files = {k: base64.b64decode(v) for k, v in (found.get("data") or {}).items()}
            for name, data in files.items():
                (local / name).write_bytes(data)
        return mounts

    def _environment(self, pod: Mapping[str, Any], container: Mapping[str, Any], kubeconfig: Path) -> Dict[str, str]:
        """The container's environment (literal values, expanded as kubelet does, and the downward API), with
        kubelet's ``KUBERNETES_SERVICE_HOST``/``PORT`` (the API server here) and ``KUBECONFIG`` for in-cluster clients
        that read it; the process gets nothing of the harness's own environment but ``PATH``."""
        meta = pod["metadata"]
        fields = {
            "metadata.name": meta["name"],
            "metadata.namespace": meta["namespace"],
            "spec.nodeName": pod["spec"].get("nodeName", ""),
            "spec.serviceAccountName": pod["spec"].get("serviceAccountName", "default"),
            "status.podIP": "127.0.0.1",
            "status.hostIP": "127.0.0.1",
        }
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(kubeconfig.parent),
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": str(self.cluster.port),
        }
        for item in container.get("env") or []:
            if "value" in item:
                env[item["name"]] = expand(str(item["value"]), env)
            elif "fieldRef" in (item.get("valueFrom") or {}):
                env[item["name"]] = fields.get(item["valueFrom"]["fieldRef"]["fieldPath"], "")
            elif "resourceFieldRef" in (item.get("valueFrom") or {}):
                env[item["name"]] = _resource_field(container, item["valueFrom"]["resourceFieldRef"])
        env["KUBECONFIG"] = str(kubeconfig)
        return env

    # --- webhooks ----------------------------------------------------------------------------------------------

    def _served_services(self) -> Dict[Tuple[str, str], PodRun]:
        """(namespace, Service name) -> the running webhook pod it selects."""
        served: Dict[Tuple[str, str], PodRun] = {}
        webhook_runs = [r.run for r in self.running.values() if r.run.webhook_port]
        if not webhook_runs:
            return served
        for service in self.cluster.api.list("v1", "Service"):
            selector = (service.get("spec") or {}).get("selector") or {}
            namespace = service["metadata"]["namespace"]
            for run in webhook_runs:
                labels = run.pod["metadata"].get("labels") or {}
                if selector and run.pod["metadata"]["namespace"] == namespace:
                    if all(labels.get(k) == v for k, v in selector.items()):
                        served[(namespace, service["metadata"]["name"])] = run
        return served

    def _reconcile_webhooks(self) -> None:
        """Route each Service of a running webhook pod through the API server's service proxy
        (:mod:`e2e.service_proxy`), and write the harness CA into the ``caBundle`` of the webhooks that name it where
        the harness turned the component's own certificate rotation off."""
        served = self._served_services()
        if not served or self.cluster.service_proxy is None:
            return
        for (namespace, name), run in served.items():
            service = self.cluster.api.get("v1", "Service", name, namespace) or {}
            address = (service.get("spec") or {}).get("clusterIP")
            for port in (service.get("spec") or {}).get("ports") or []:
                if address and address != "None":
                    self.cluster.service_proxy.route(address, int(port["port"]), run.webhook_port)
        bundle = base64.b64encode(self.cluster.pki.pem).decode()
        for kind in WEBHOOK_KINDS:
            for config in self.cluster.api.list(ADMISSION_API, kind):
                changed = False
                for webhook in config.get("webhooks") or []:
                    client = webhook.get("clientConfig") or {}
                    service = client.get("service") or {}
                    run = served.get((service.get("namespace"), service.get("name")))
                    if run is not None and run.ca_bundle_by_harness and client.get("caBundle") != bundle:
                        client["caBundle"] = bundle
                        changed = True
                if changed:
                    try:
                        self.cluster.api.request(
                            "PUT",
                            self.cluster.api.path(ADMISSION_API, kind, name=config["metadata"]["name"]),
                            config,
                        )
                    except ApiError as error:
                        if error.status != 409:  # changed meanwhile: the next look sees the new one
                            raise


def _component_of(pod: Mapping[str, Any]) -> Optional[ComponentImage]:
    """The component a pod runs, if any."""
    return next((i for c in pod["spec"]["containers"] for i in COMPONENT_IMAGES if i.matches(pod, c)), None)


def _process_name(key: str) -> str:
    return f"pod-{key.replace('/', '_')}"


def _resource_field(container: Mapping[str, Any], ref: Mapping[str, Any]) -> str:
    """A ``resourceFieldRef`` (``limits.cpu``, ``limits.memory``...) of the container, in the divisor's units
    (1 by default), as kubelet gives it."""
    section, _, name = ref["resource"].partition(".")
    value = ((container.get("resources") or {}).get(section) or {}).get(name)
    if value is None:
        return "0"
    number = quantity(value)  # cores, bytes or units
    return str(max(1, math.ceil(number)) if name == "cpu" else int(number))

"""EtcdChart: the etcd server that torchelastic's etcd rendezvous talks to."""

from __future__ import annotations

from trainium_eks.core.conventions import DEFAULT_NAMESPACE
from trainium_eks.core.validation import Problems, check_dns_label, check_image_reference
from trainium_eks.facts import versions
from trainium_eks.manifests.chart import (
    SYSTEM_NODE_SELECTOR,
    LibraryChart,
    governed_by,
    locked_down_container,
    unprivileged_pod,
)

SERVICE_NAME = "etcd-server"
"""The rendezvous endpoint of the jobs is ``etcd-server:2379`` (same namespace), as in the tutorial."""

CLIENT_PORT = 2379
PEER_PORT = 2380
DATA_DIR = "/var/lib/etcd"


class EtcdChart(LibraryChart):
    """A single-member etcd (Service ``etcd-server`` with client port 2379 and peer port 2380, and a one-replica
    Deployment) for ``torchrun --rdzv_backend etcd --rdzv_endpoint etcd-server:2379``.

    - The image is a pinned etcd v3.5 (:data:`trainium_eks.facts.versions.ETCD`) started with ``--enable-v2``: torch's
      etcd rendezvous uses the v2 API through python-etcd, and etcd v3.6 removed the flag (``:latest`` is gone from
      quay.io too).
    - Rendezvous state is ephemeral, so the data directory is an emptyDir and the Deployment recreates the pod
      (strategy ``Recreate``: never two members).
    - A NetworkPolicy, which alone decides its pod's ingress (:func:`~trainium_eks.manifests.chart.governed_by`),
      admits only pods of the namespace, on the client port.
    - It runs on the system nodes, as ``nobody`` with a read-only root file system, no capabilities, the runtime's
      default seccomp profile, requests and limits, and HTTP ``/health`` liveness and readiness probes.

    :param namespace: The jobs' namespace. Default: ``training``.
    :param image: Default: :data:`trainium_eks.facts.versions.ETCD`.
    """

    def __init__(self, *, namespace: str = DEFAULT_NAMESPACE, image: str = versions.ETCD.image) -> None:
        problems = Problems("etcd chart")
        check_dns_label(problems, "namespace", namespace)
        check_image_reference(problems, "image", image)
        problems.raise_if_any()
        super().__init__("etcd", namespace=namespace)
        labels = self.selector_labels()
        self.add_object(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": self.metadata(SERVICE_NAME),
                "spec": {
                    "type": "ClusterIP",
                    "selector": labels,
                    "ports": [
                        {"name": "client", "port": CLIENT_PORT, "targetPort": CLIENT_PORT},
                        {"name": "peer", "port": PEER_PORT, "targetPort": PEER_PORT},
                    ],
                },
            }
        )
        policy = self.allow_ingress_only(f"{SERVICE_NAME}-clients", pods=labels, ports=[CLIENT_PORT])
        health = {"path": "/health", "port": CLIENT_PORT}
        container = {
            "name": "etcd",
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "command": ["/usr/local/bin/etcd"],
            "args": [
                f"--data-dir={DATA_DIR}",
                "--enable-v2",
                f"--name={SERVICE_NAME}",
                f"--listen-client-urls=http://0.0.0.0:{CLIENT_PORT}",
                f"--advertise-client-urls=http://{SERVICE_NAME}:{CLIENT_PORT}",
                f"--listen-peer-urls=http://0.0.0.0:{PEER_PORT}",
                f"--initial-advertise-peer-urls=http://{SERVICE_NAME}:{PEER_PORT}",
                f"--initial-cluster={SERVICE_NAME}=http://{SERVICE_NAME}:{PEER_PORT}",
                "--initial-cluster-state=new",
            ],
            "ports": [
                {"name": "client", "containerPort": CLIENT_PORT},
                {"name": "peer", "containerPort": PEER_PORT},
            ],
            "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}},
            "readinessProbe": {"httpGet": health, "periodSeconds": 5, "failureThreshold": 3},
            "livenessProbe": {"httpGet": health, "initialDelaySeconds": 15, "periodSeconds": 10, "failureThreshold": 6},
            "securityContext": locked_down_container(),
            "volumeMounts": [{"name": "data", "mountPath": DATA_DIR}],
        }
        self.add_object(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": self.metadata(SERVICE_NAME),
                "spec": {
                    "replicas": 1,
                    "strategy": {"type": "Recreate"},
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": {**labels, **governed_by(policy)}},
                        "spec": {
                            "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
                            "automountServiceAccountToken": False,
                            "securityContext": unprivileged_pod(),
                            "containers": [container],
                            "volumes": [{"name": "data", "emptyDir": {"sizeLimit": "1Gi"}}],
                        },
                    },
                },
            }
        )

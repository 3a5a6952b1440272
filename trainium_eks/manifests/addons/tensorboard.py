"""TensorBoardChart: TensorBoard over the run logs on the shared file system, reachable by port-forward only."""

from __future__ import annotations

from trainium_eks.core.conventions import DEFAULT_NAMESPACE, OUTPUT_ROOT, SHARED_MOUNT
from trainium_eks.core.validation import (
    Problems,
    check_absolute_path,
    check_dns_label,
    check_dns_subdomain,
    check_image_reference,
)
from trainium_eks.facts import versions
from trainium_eks.manifests.audit_exceptions import checkov_skips, image_skips
from trainium_eks.manifests.chart import (
    SYSTEM_NODE_SELECTOR,
    LibraryChart,
    governed_by,
    locked_down_container,
    unprivileged_pod,
)
from trainium_eks.manifests.storage.lustre_volume import DEFAULT_CLAIM_NAME

NAME = "tensorboard"
PORT = 6006
DEFAULT_LOG_DIR = OUTPUT_ROOT
"""Where training jobs write their runs (``/data/output/<run>/tensorboard``); TensorBoard reads it recursively."""


class TensorBoardChart(LibraryChart):
    """A TensorBoard Deployment and a ClusterIP Service on port 6006.

    It mounts the shared claim read-only and reads every run under ``log_dir``; reach it with
    ``kubectl -n training port-forward svc/tensorboard 6006:6006`` (no load balancer, no public exposure; a
    NetworkPolicy, which alone decides its pod's ingress (:func:`~trainium_eks.manifests.chart.governed_by`), admits
    only pods of the namespace on port 6006, and port-forwarding, which does not cross the pod network). It
    runs on the system nodes as an unprivileged user with a read-only root file system (``/tmp`` is an emptyDir,
    ``HOME`` points there).

    :param namespace: Default: ``training``.
    :param claim_name: The shared claim. Default: ``fsx-claim``.
    :param log_dir: Default: :data:`DEFAULT_LOG_DIR`.
    :param image: An image with the ``tensorboard`` command. Default: :data:`trainium_eks.facts.versions.TENSORBOARD`.
    """

    def __init__(
        self,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        claim_name: str = DEFAULT_CLAIM_NAME,
        log_dir: str = DEFAULT_LOG_DIR,
        image: str = versions.TENSORBOARD.image,
    ) -> None:
        problems = Problems(f"{NAME} chart")
        check_dns_label(problems, "namespace", namespace)
        check_dns_subdomain(problems, "claim_name", claim_name)
        check_absolute_path(problems, "log_dir", log_dir)
        check_image_reference(problems, "image", image)
        problems.raise_if_any()
        super().__init__(NAME, namespace=namespace)
        labels = self.selector_labels()
        self.add_object(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": self.metadata(NAME),
                "spec": {
                    "type": "ClusterIP",
                    "selector": labels,
                    "ports": [{"name": "http", "port": PORT, "targetPort": PORT}],
                },
            }
        )
        policy = self.allow_ingress_only(f"{NAME}-clients", pods=labels, ports=[PORT])
        probe = {"path": "/", "port": PORT}
        container = {
            "name": NAME,
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "command": ["tensorboard"],
            "args": [f"--logdir={log_dir}", "--bind_all", f"--port={PORT}"],
            "env": [{"name": "HOME", "value": "/tmp"}],
            "ports": [{"name": "http", "containerPort": PORT}],
            "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}},
            "readinessProbe": {"httpGet": probe, "initialDelaySeconds": 10, "periodSeconds": 10},
            "livenessProbe": {"httpGet": probe, "initialDelaySeconds": 60, "periodSeconds": 20, "failureThreshold": 6},
            "securityContext": locked_down_container(),
            "volumeMounts": [
                {"name": "shared", "mountPath": SHARED_MOUNT, "readOnly": True},
                {"name": "tmp", "mountPath": "/tmp"},
            ],
        }
        self.add_object(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": self.metadata(
                    NAME,
                    annotations=checkov_skips(image_skips(image)),
                ),
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": {**labels, **governed_by(policy)}},
                        "spec": {
                            "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
                            "automountServiceAccountToken": False,
                            "securityContext": unprivileged_pod(),
                            "containers": [container],
                            "volumes": [
                                {
                                    "name": "shared",
                                    "persistentVolumeClaim": {"claimName": claim_name, "readOnly": True},
                                },
                                {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
                            ],
                        },
                    },
                },
            }
        )

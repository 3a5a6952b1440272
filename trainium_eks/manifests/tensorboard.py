"""TensorBoardChart: TensorBoard over the run logs on the shared file system, reachable by port-forward only."""

from __future__ import annotations

from cdk8s_plus_27 import k8s

from trainium_eks import versions
from trainium_eks.conventions import DEFAULT_NAMESPACE, OUTPUT_ROOT, SHARED_MOUNT
from trainium_eks.manifests.chart import (
    SYSTEM_NODE_SELECTOR,
    LibraryChart,
    locked_down_container,
    quantity,
    unprivileged_pod,
)
from trainium_eks.manifests.fsx_volume import DEFAULT_CLAIM_NAME
from trainium_eks.validation import Problems, check_absolute_path, check_dns_label, check_dns_subdomain, check_text

NAME = "tensorboard"
PORT = 6006
DEFAULT_LOG_DIR = OUTPUT_ROOT
"""Where training jobs write their runs (``/data/output/<run>/tensorboard``); TensorBoard reads it recursively."""


class TensorBoardChart(LibraryChart):
    """A TensorBoard Deployment and a ClusterIP Service on port 6006.

    It mounts the shared claim read-only and reads every run under ``log_dir``; reach it with
    ``kubectl -n training port-forward svc/tensorboard 6006:6006`` (no load balancer, no public exposure; a
    NetworkPolicy admits only pods of the namespace, and port-forwarding, which does not cross the pod network). It
    runs on the system nodes as an unprivileged user with a read-only root file system (``/tmp`` is an emptyDir,
    ``HOME`` points there).

    :param namespace: Default: ``training``.
    :param claim_name: The shared claim. Default: ``fsx-claim``.
    :param log_dir: Default: :data:`DEFAULT_LOG_DIR`.
    :param image: An image with the ``tensorboard`` command. Default: :data:`trainium_eks.versions.TENSORBOARD`.
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
        check_text(problems, "image", image, allowed="a container image reference, such as repo/image:tag")
        problems.raise_if_any()
        super().__init__(NAME, namespace=namespace)
        labels = self.selector_labels()
        k8s.KubeService(
            self,
            "Service",
            metadata=self.metadata(NAME),
            spec=k8s.ServiceSpec(
                type="ClusterIP",
                selector=labels,
                ports=[k8s.ServicePort(name="http", port=PORT, target_port=k8s.IntOrString.from_number(PORT))],
            ),
        )
        self.allow_ingress_only(f"{NAME}-clients", pods=labels, ports=[PORT])
        probe = k8s.HttpGetAction(path="/", port=k8s.IntOrString.from_number(PORT))
        k8s.KubeDeployment(
            self,
            "Deployment",
            metadata=self.metadata(NAME),
            spec=k8s.DeploymentSpec(
                replicas=1,
                selector=k8s.LabelSelector(match_labels=labels),
                template=k8s.PodTemplateSpec(
                    metadata=k8s.ObjectMeta(labels=labels),
                    spec=k8s.PodSpec(
                        node_selector=dict(SYSTEM_NODE_SELECTOR),
                        automount_service_account_token=False,
                        security_context=unprivileged_pod(),
                        containers=[
                            k8s.Container(
                                name=NAME,
                                image=image,
                                image_pull_policy="IfNotPresent",
                                command=["tensorboard"],
                                args=[f"--logdir={log_dir}", "--bind_all", f"--port={PORT}"],
                                env=[k8s.EnvVar(name="HOME", value="/tmp")],
                                ports=[k8s.ContainerPort(name="http", container_port=PORT)],
                                resources=k8s.ResourceRequirements(
                                    requests={"cpu": quantity("250m"), "memory": quantity("1Gi")},
                                    limits={"cpu": quantity("2"), "memory": quantity("4Gi")},
                                ),
                                readiness_probe=k8s.Probe(http_get=probe, initial_delay_seconds=10, period_seconds=10),
                                liveness_probe=k8s.Probe(
                                    http_get=probe, initial_delay_seconds=60, period_seconds=20, failure_threshold=6
                                ),
                                security_context=locked_down_container(),
                                volume_mounts=[
                                    k8s.VolumeMount(name="shared", mount_path=SHARED_MOUNT, read_only=True),
                                    k8s.VolumeMount(name="tmp", mount_path="/tmp"),
                                ],
                            )
                        ],
                        volumes=[
                            k8s.Volume(
                                name="shared",
                                persistent_volume_claim=k8s.PersistentVolumeClaimVolumeSource(
                                    claim_name=claim_name, read_only=True
                                ),
                            ),
                            k8s.Volume(name="tmp", empty_dir=k8s.EmptyDirVolumeSource(size_limit=quantity("1Gi"))),
                        ],
                    ),
                ),
            ),
        )

"""EtcdChart: the etcd server that torchelastic's etcd rendezvous talks to."""

from __future__ import annotations

from cdk8s_plus_27 import k8s

from trainium_eks import versions
from trainium_eks.conventions import DEFAULT_NAMESPACE
from trainium_eks.manifests.chart import (
    SYSTEM_NODE_SELECTOR,
    LibraryChart,
    locked_down_container,
    quantity,
    unprivileged_pod,
)
from trainium_eks.validation import Problems, check_dns_label, check_text

SERVICE_NAME = "etcd-server"
"""The rendezvous endpoint of the jobs is ``etcd-server:2379`` (same namespace), as in the tutorial."""

CLIENT_PORT = 2379
PEER_PORT = 2380
DATA_DIR = "/var/lib/etcd"


class EtcdChart(LibraryChart):
    """A single-member etcd (Service ``etcd-server`` with client port 2379 and peer port 2380, and a one-replica
    Deployment) for ``torchrun --rdzv_backend etcd --rdzv_endpoint etcd-server:2379``.

    - The image is a pinned etcd v3.5 (:data:`trainium_eks.versions.ETCD`) started with ``--enable-v2``: torch's
      etcd rendezvous uses the v2 API through python-etcd, and etcd v3.6 removed the flag (``:latest`` is gone from
      quay.io too).
    - Rendezvous state is ephemeral, so the data directory is an emptyDir and the Deployment recreates the pod
      (strategy ``Recreate``: never two members).
    - A NetworkPolicy admits only pods of the namespace, on the client port.
    - It runs on the system nodes, as ``nobody`` with a read-only root file system, no capabilities, the runtime's
      default seccomp profile, requests and limits, and HTTP ``/health`` liveness and readiness probes.

    :param namespace: The jobs' namespace. Default: ``training``.
    :param image: Default: :data:`trainium_eks.versions.ETCD`.
    """

    def __init__(self, *, namespace: str = DEFAULT_NAMESPACE, image: str = versions.ETCD.image) -> None:
        problems = Problems("etcd chart")
        check_dns_label(problems, "namespace", namespace)
        check_text(problems, "image", image, allowed="a container image reference, such as repo/image:tag")
        problems.raise_if_any()
        super().__init__("etcd", namespace=namespace)
        labels = self.selector_labels()
        k8s.KubeService(
            self,
            "Service",
            metadata=self.metadata(SERVICE_NAME),
            spec=k8s.ServiceSpec(
                type="ClusterIP",
                selector=labels,
                ports=[
                    k8s.ServicePort(
                        name="client", port=CLIENT_PORT, target_port=k8s.IntOrString.from_number(CLIENT_PORT)
                    ),
                    k8s.ServicePort(name="peer", port=PEER_PORT, target_port=k8s.IntOrString.from_number(PEER_PORT)),
                ],
            ),
        )
        self.allow_ingress_only(f"{SERVICE_NAME}-clients", pods=labels, ports=[CLIENT_PORT])
        health = k8s.HttpGetAction(path="/health", port=k8s.IntOrString.from_number(CLIENT_PORT))
        k8s.KubeDeployment(
            self,
            "Deployment",
            metadata=self.metadata(SERVICE_NAME),
            spec=k8s.DeploymentSpec(
                replicas=1,
                strategy=k8s.DeploymentStrategy(type="Recreate"),
                selector=k8s.LabelSelector(match_labels=labels),
                template=k8s.PodTemplateSpec(
                    metadata=k8s.ObjectMeta(labels=labels),
                    spec=k8s.PodSpec(
                        node_selector=dict(SYSTEM_NODE_SELECTOR),
                        automount_service_account_token=False,
                        security_context=unprivileged_pod(),
                        containers=[
                            k8s.Container(
                                name="etcd",
                                image=image,
                                image_pull_policy="IfNotPresent",
                                command=["/usr/local/bin/etcd"],
                                args=[
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
                                ports=[
                                    k8s.ContainerPort(name="client", container_port=CLIENT_PORT),
                                    k8s.ContainerPort(name="peer", container_port=PEER_PORT),
                                ],
                                resources=k8s.ResourceRequirements(
                                    requests={"cpu": quantity("100m"), "memory": quantity("256Mi")},
                                    limits={"cpu": quantity("1"), "memory": quantity("512Mi")},
                                ),
                                readiness_probe=k8s.Probe(http_get=health, period_seconds=5, failure_threshold=3),
                                liveness_probe=k8s.Probe(
                                    http_get=health, initial_delay_seconds=15, period_seconds=10, failure_threshold=6
                                ),
                                security_context=locked_down_container(),
                                volume_mounts=[k8s.VolumeMount(name="data", mount_path=DATA_DIR)],
                            )
                        ],
                        volumes=[
                            k8s.Volume(name="data", empty_dir=k8s.EmptyDirVolumeSource(size_limit=quantity("1Gi")))
                        ],
                    ),
                ),
            ),
        )

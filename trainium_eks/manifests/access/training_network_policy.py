"""TrainingNetworkPolicyChart: the training namespace denies every flow, then admits the ones its jobs need."""

from __future__ import annotations

import ipaddress
from typing import Any, Dict, List, Optional, Sequence

from trainium_eks.core.conventions import (
    DEFAULT_NAMESPACE,
    EGRESS_INTERNET_LABEL,
    EGRESS_KUBERNETES_API_LABEL,
    NO_INGRESS_POLICY,
)
from trainium_eks.core.validation import Problems, check_dns_label, check_strings
from trainium_eks.manifests.chart import LibraryChart

POD_IDENTITY_AGENT = "169.254.170.23"
"""Where pods get their EKS Pod Identity credentials (TCP 80): the agent on the node's host network, at a link-local
address that is not the node's IP. Source: Amazon EKS user guide, pod-identities ("uses the hostNetwork of the node
and it uses port 80 and port 2703 on a link-local address ... 169.254.170.23 for IPv4")."""

POD_IDENTITY_AGENT_PORT = 80

KUBE_DNS = {"k8s-app": "kube-dns"}
"""The labels of CoreDNS's pods in kube-system (the EKS coredns add-on keeps the upstream ``k8s-app: kube-dns``, which
the kube-dns Service selects: EKS user guide, managing-coredns.html)."""

EKS_KUBERNETES_SERVICE_IPS = ("10.100.0.1", "172.20.0.1")
"""The address of the ``kubernetes`` Service (the API server as pods reach it) on an EKS cluster created without a
service CIDR, as the library's clusters are: EKS assigns service addresses "from either the 10.100.0.0/16 or
172.20.0.0/16 CIDR blocks" (EKS API reference, KubernetesNetworkConfigRequest ``serviceIpv4Cidr``), and the API server
takes the first address of the range for that Service (kubernetes ``pkg/controlplane/services.go`` ``ServiceIPRange``:
``GetIndexedIP(&serviceClusterIPRange, 1)``). Both are admitted, since which one EKS chose is not known at synth."""

NOT_INTERNET = ("10.0.0.0/8", "100.64.0.0/10", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16")
"""What "the internet" excludes: the private ranges (RFC 1918, where the VPC, its peers and the service CIDR lie),
the shared address space EKS custom networking uses (RFC 6598) and link-local addresses (the instance metadata service,
the Pod Identity agent)."""

HTTPS = 443


class TrainingNetworkPolicyChart(LibraryChart):
    """The NetworkPolicies of the training namespace: nothing reaches its pods, and its pods reach nothing, except:

    - ``namespace-baseline`` (every pod; :data:`~trainium_eks.core.conventions.NO_INGRESS_POLICY`): no ingress;
      egress to every pod of the namespace on every port (the rendezvous on node 0, the collectives' bootstrap, ssh
      between a fabric check's pods, etcd: the other side's ingress decides), to CoreDNS (UDP and TCP 53) and to the
      EKS Pod Identity agent (:data:`POD_IDENTITY_AGENT`, TCP 80);
    - no policy admits ingress from the whole namespace: a held job's pods (every gang's, every job's that waits
      for others) admit each other only, by the ``<job>-peers`` policy its release creates before it
      (:func:`~trainium_eks.manifests.jobs.job_release_program.peers_policy`), so no pod of another job reaches
      them; TensorBoard and etcd admit the namespace on their one port (their own policies); every other pod (a
      release, a staging Job, which reaches the internet, a job that no release creates) admits nothing;
    - ``kubernetes-api`` (pods labelled ``trainium-eks/egress-kubernetes-api: "true"``, the release Jobs): TCP 443
      to the ``kubernetes`` Service (``kubernetes_api_addresses``);
    - ``internet`` (pods labelled ``trainium-eks/egress-internet: "true"``, the dataset staging Jobs and jobs with
      ``internet_egress``): TCP 443 to every address but :data:`NOT_INTERNET`.

    Pods of other namespaces cannot reach the namespace's pods (only the node a pod runs on can: kubelet probes), and
    no pod of the namespace reaches the instance metadata service, the VPC or the Kubernetes API unless listed.
    The shared file systems need no rule: the CSI node plugins mount them on the node, outside the pod's network.

    Enforced by the VPC CNI's network policy agent (``enableNetworkPolicy``, set by ``TrainingCluster``), which
    matches a pod's egress before kube-proxy rewrites a Service address (aws/amazon-network-policy-controller-k8s
    v1.1.7 ``pkg/resolvers/endpoints.go``: the probes on the pod's veth are "unable to see the pod IP after the DNAT
    happens for the clusterIPs", so the controller adds the ClusterIPs of Services whose selector a rule's pod
    selector matches: the kube-dns and etcd-server Services), and always admits the node's own IP
    (aws/aws-network-policy-agent v1.4.1 ``pkg/fwruleprocessor/fw_rule_processor.go``). In its strict mode
    (``TrainingCluster``'s default) a new pod is denied everything until the agent has programmed its rules; in
    standard mode it is allowed everything until then (EKS user guide, cni-network-policy-configure.html). Traffic
    over EFA does not pass through the pod's network interface at all.

    :param namespace: Default: ``training``.
    :param kubernetes_api_addresses: IPv4 addresses of the ``kubernetes`` Service. Default:
        :data:`EKS_KUBERNETES_SERVICE_IPS` (for a cluster with a service CIDR of your own, its first address).
    """

    def __init__(
        self,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        kubernetes_api_addresses: Sequence[str] = EKS_KUBERNETES_SERVICE_IPS,
    ) -> None:
        problems = Problems("training network policy chart")
        check_dns_label(problems, "namespace", namespace)
        if check_strings(problems, "kubernetes_api_addresses", kubernetes_api_addresses):
            bad = [address for address in kubernetes_api_addresses if not _is_ipv4_address(address)]
            if bad or not kubernetes_api_addresses:
                problems.add(
                    "kubernetes_api_addresses",
                    list(kubernetes_api_addresses),
                    "one or more IPv4 addresses (the first address of the cluster's service CIDR, such as 172.20.0.1)",
                )
        problems.raise_if_any()
        super().__init__("training-network-policy", namespace=namespace)
        every_pod: Dict[str, Any] = {}
        self._policy(
            NO_INGRESS_POLICY,
            every_pod,
            egress=[
                {"to": [{"podSelector": {}}]},
                {
                    "to": [
                        {
                            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                            "podSelector": {"matchLabels": dict(KUBE_DNS)},
                        }
                    ],
                    "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
                },
                {
                    "to": [{"ipBlock": {"cidr": f"{POD_IDENTITY_AGENT}/32"}}],
                    "ports": [{"protocol": "TCP", "port": POD_IDENTITY_AGENT_PORT}],
                },
            ],
            ingress=[],
        )
        self._policy(
            "kubernetes-api",
            {"matchLabels": {EGRESS_KUBERNETES_API_LABEL: "true"}},
            egress=[
                {
                    "to": [{"ipBlock": {"cidr": f"{address}/32"}} for address in kubernetes_api_addresses],
                    "ports": [{"protocol": "TCP", "port": HTTPS}],
                }
            ],
        )
        self._policy(
            "internet",
            {"matchLabels": {EGRESS_INTERNET_LABEL: "true"}},
            egress=[
                {
                    "to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": list(NOT_INTERNET)}}],
                    "ports": [{"protocol": "TCP", "port": HTTPS}],
                }
            ],
        )

    def _policy(
        self,
        name: str,
        pods: Dict[str, Any],
        *,
        ingress: Optional[List[Dict[str, Any]]] = None,
        egress: Optional[List[Dict[str, Any]]] = None,
    ) -> None:
        """A NetworkPolicy ``name`` of the ``pods`` selected, with the rule types it is given (an empty list of rules:
        that direction isolated, nothing admitted)."""
        spec: Dict[str, Any] = {"podSelector": pods, "policyTypes": []}
        if ingress is not None:
            spec["policyTypes"].append("Ingress")
            spec["ingress"] = ingress
        if egress is not None:
            spec["policyTypes"].append("Egress")
            spec["egress"] = egress
        self.add_object(
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": self.metadata(name),
                "spec": spec,
            }
        )


def _is_ipv4_address(value: Any) -> bool:
    try:
        return isinstance(value, str) and str(ipaddress.IPv4Address(value)) == value
    except ValueError:
        return False

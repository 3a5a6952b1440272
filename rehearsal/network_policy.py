"""A model of how the cluster decides whether a connection may be made: Kubernetes NetworkPolicies
(networking.k8s.io/v1), as the VPC CNI's network policy agent enforces them on EKS.

What is modelled, and where it comes from:

- Kubernetes' semantics (kubernetes/api ``networking/v1/types.go`` and the concept page "Network Policies"): a pod is
  isolated for ingress (egress) when a policy of its namespace selects it and has ``Ingress`` (``Egress``) among its
  ``policyTypes``; ``policyTypes`` left out means ``Ingress``, plus ``Egress`` when the policy has egress rules.
  Policies add up: a connection is allowed when the source's egress and the destination's ingress both allow it, each
  when the endpoint is not isolated in that direction or some rule of some policy selecting it matches. A rule with no
  peers matches every peer, with no ports every port; a peer with ``podSelector`` alone selects pods of the policy's
  namespace, ``namespaceSelector`` alone every pod of the selected namespaces, both together the selected pods of the
  selected namespaces; ``ipBlock`` an address in ``cidr`` and in none of ``except``. A port matches by number (a
  range with ``endPort``) or by name (a container port of the destination pod), with ``protocol`` TCP when left out.
  Namespaces carry ``kubernetes.io/metadata.name`` (set by the control plane).
- What the VPC CNI adds (aws/aws-network-policy-agent v1.4.1, aws/amazon-network-policy-controller-k8s v1.1.7):
  traffic from and to the node a pod runs on is always allowed (``pkg/fwruleprocessor/fw_rule_processor.go``: "Traffic
  from the local node should always be allowed"); egress is matched on the pod's veth before kube-proxy rewrites a
  Service address, so a connection to a ClusterIP is matched as the ClusterIP: an ``ipBlock`` must hold the ClusterIP
  itself, and a pod peer matches it when its namespace holds the Service and its pod selector matches the Service's
  selector (``pkg/resolvers/endpoints.go``: "Services whose selector matches the NP peer's podSelector should have
  their ClusterIPs added"), on the Service's port, which must equal the container's (EKS user guide,
  cni-network-policy.html considerations). Headless Services resolve to pod addresses and are not Services here.

- Strict mode (``strict=True``: the agent's ``NETWORK_POLICY_ENFORCING_MODE=strict``): a pod that no policy of its
  namespace selects, for either direction, is denied both ways, its node too (the node's address is an entry of the
  rules computed for a pod's policies, ``fw_rule_processor.go``; this pod has none: its ``pod_state`` stays
  ``DEFAULT_DENY``:
  aws/aws-network-policy-agent v1.4.1 ``pkg/rpc/rpc_handler.go``, ``controllers/policyendpoints_controller.go``); a
  pod that some policy selects is decided as above, the direction no policy isolates open (the controller's
  catch-all entry). EKS user guide, cni-network-policy-configure.html: in strict mode "you must have a network policy
  for every endpoint that your pods need to access".

Not modelled: the moment between a pod's start and its rules being programmed (in standard mode it passes
everything, in strict mode nothing), IPv6, SCTP, and traffic that does not pass through the pod's network interface
(EFA).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any, Iterable, List, Mapping, Optional, Sequence


@dataclass(frozen=True)
class Pod:
    """A pod: its namespace, labels, address, its node's address and its named container ports."""

    namespace: str
    labels: Mapping[str, str]
    ip: str
    node_ip: str = "10.0.128.10"
    ports: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Service:
    """A ClusterIP Service: its namespace, selector, address and ports (port -> target port)."""

    namespace: str
    selector: Mapping[str, str]
    cluster_ip: str
    ports: Mapping[int, int]


@dataclass(frozen=True)
class Address:
    """An address that is neither a pod nor a Service: the internet, the VPC, a link-local service, a node."""

    ip: str


Endpoint = Any
"""A :class:`Pod`, a :class:`Service` or an :class:`Address`."""


class Cluster:
    """The policies, namespaces, pods and Services against which connections are decided.

    :param policies: NetworkPolicy manifests (each with ``metadata.namespace``).
    :param namespaces: Namespace name -> its labels (``kubernetes.io/metadata.name`` is added).
    :param pods: The pods that Services may select.
    :param services: ClusterIP Services.
    :param strict: The agent's strict mode: a pod that no policy selects is denied. Default: false (standard).
    """

    def __init__(
        self,
        policies: Iterable[Mapping[str, Any]],
        *,
        namespaces: Mapping[str, Mapping[str, str]],
        pods: Sequence[Pod] = (),
        services: Sequence[Service] = (),
        strict: bool = False,
    ) -> None:
        self.policies = [dict(policy) for policy in policies]
        self.namespaces = {name: {**labels, "kubernetes.io/metadata.name": name} for name, labels in namespaces.items()}
        self.pods = list(pods)
        self.services = list(services)
        self.strict = strict

    def allowed(self, source: Endpoint, destination: Endpoint, port: int, protocol: str = "TCP") -> bool:
        """Whether ``source`` may open a connection to ``destination`` on ``port``."""
        if isinstance(source, Pod) and not self._side_allows(
            source, "Egress", destination, destination, port, protocol
        ):
            return False
        target = self._backend(destination, port)
        if isinstance(target, Pod):
            return self._side_allows(target, "Ingress", source, target, self._target_port(destination, port), protocol)
        return True

    def _side_allows(
        self, pod: Pod, policy_type: str, other: Endpoint, ports_of: Endpoint, port: int, protocol: str
    ) -> bool:
        """Whether ``pod``'s ``policy_type`` side lets the connection through: to or from ``other``, on ``port`` of
        ``ports_of`` (the destination, whose named ports a rule may use)."""
        if self.strict and not self.selected(pod):
            return False
        if isinstance(other, Address) and other.ip == pod.node_ip:
            return True
        rules = self._rules(pod, policy_type, policy_type.lower())
        if rules is None:
            return True
        peers = "to" if policy_type == "Egress" else "from"
        return any(
            self._ports_match(rule.get("ports"), ports_of, port, protocol)
            and self._peers_match(rule.get(peers), namespace, other)
            for rule, namespace in rules
        )

    def selected(self, pod: Pod) -> bool:
        """Whether some policy of ``pod``'s namespace selects it (for either direction)."""
        return any(
            policy["metadata"]["namespace"] == pod.namespace
            and selects(policy["spec"].get("podSelector") or {}, pod.labels)
            for policy in self.policies
        )

    def _rules(self, pod: Pod, policy_type: str, key: str) -> Optional[List[Any]]:
        """The rules of ``key`` of every policy that isolates ``pod`` for ``policy_type`` (with the policy's
        namespace), or None when none does."""
        isolating = [
            policy
            for policy in self.policies
            if policy["metadata"]["namespace"] == pod.namespace
            and policy_type in policy_types(policy)
            and selects(policy["spec"].get("podSelector") or {}, pod.labels)
        ]
        if not isolating:
            return None
        return [
            (rule, policy["metadata"]["namespace"]) for policy in isolating for rule in policy["spec"].get(key) or []
        ]

    def _peers_match(self, peers: Optional[List[Mapping[str, Any]]], namespace: str, other: Endpoint) -> bool:
        if not peers:
            return True
        return any(self._peer_matches(peer, namespace, other) for peer in peers)

    def _peer_matches(self, peer: Mapping[str, Any], namespace: str, other: Endpoint) -> bool:
        if "ipBlock" in peer:
            ip = other.cluster_ip if isinstance(other, Service) else other.ip
            block = peer["ipBlock"]
            address = ipaddress.ip_address(ip)
            return address in ipaddress.ip_network(block["cidr"]) and not any(
                address in ipaddress.ip_network(excluded) for excluded in block.get("except") or []
            )
        if isinstance(other, Address):
            return False
        if "namespaceSelector" in peer:
            namespace_ok = selects(peer["namespaceSelector"], self.namespaces.get(other.namespace, {}))
        else:
            namespace_ok = other.namespace == namespace
        if not namespace_ok:
            return False
        pod_selector = peer.get("podSelector")
        if pod_selector is None:
            return True
        labels = other.selector if isinstance(other, Service) else other.labels
        return selects(pod_selector, labels)

    def _ports_match(
        self, ports: Optional[List[Mapping[str, Any]]], destination: Endpoint, port: int, protocol: str
    ) -> bool:
        if not ports:
            return True
        target = self._target_port(destination, port)
        for entry in ports:
            if entry.get("protocol", "TCP") != protocol:
                continue
            wanted = entry.get("port")
            if wanted is None:
                return True
            if isinstance(wanted, str):
                backend = self._backend(destination, port)
                if isinstance(backend, Pod) and backend.ports.get(wanted) == target:
                    return True
                continue
            if wanted <= target <= entry.get("endPort", wanted):
                return True
        return False

    def _target_port(self, destination: Endpoint, port: int) -> int:
        if isinstance(destination, Service):
            target = destination.ports.get(port)
            if target != port:
                raise ValueError(
                    f"Service {destination.cluster_ip}:{port} -> {target}: the VPC CNI matches a Service's port only "
                    "when it equals the container's"
                )
        return port

    def _backend(self, destination: Endpoint, port: int) -> Endpoint:
        """Where a connection to ``destination`` lands: a Service's first selected pod, or ``destination``."""
        if isinstance(destination, Service):
            for pod in self.pods:
                if pod.namespace == destination.namespace and selects(
                    {"matchLabels": dict(destination.selector)}, pod.labels
                ):
                    return pod
            raise ValueError(f"Service {destination.cluster_ip} selects no pod")
        return destination


def policy_types(policy: Mapping[str, Any]) -> List[str]:
    """A policy's ``policyTypes``, or what Kubernetes takes when they are left out."""
    spec = policy["spec"]
    if spec.get("policyTypes"):
        return list(spec["policyTypes"])
    return ["Ingress", "Egress"] if spec.get("egress") else ["Ingress"]


def selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether a label selector (``matchLabels``, ``matchExpressions``; empty: everything) selects ``labels``."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ValueError(f"unknown selector operator {operator!r}")
    return True

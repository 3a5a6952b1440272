"""The NetworkPolicy model decides connections as Kubernetes and the VPC CNI's agent do."""

import pytest

from rehearsal.network_policy import Address, Cluster, Pod, Service, policy_types, selects

NAMESPACES = {"a": {}, "b": {"team": "ml"}, "kube-system": {}}


def policy(namespace, pods, **spec):
    return {"metadata": {"name": "p", "namespace": namespace}, "spec": {"podSelector": pods, **spec}}


def pod(namespace="a", ip="10.0.0.1", **labels):
    return Pod(namespace=namespace, labels=labels, ip=ip, ports={"http": 8080})


def test_without_a_policy_everything_is_allowed():
    assert Cluster([], namespaces=NAMESPACES).allowed(pod(), pod(ip="10.0.0.2"), 80)


def test_policy_types_left_out_mean_ingress_and_egress_only_with_egress_rules():
    assert policy_types(policy("a", {})) == ["Ingress"]
    assert policy_types(policy("a", {}, egress=[{}])) == ["Ingress", "Egress"]
    ingress_only = Cluster([policy("a", {}, ingress=[])], namespaces=NAMESPACES)
    assert ingress_only.allowed(pod(), Address("8.8.8.8"), 443), "an ingress policy leaves egress open"
    assert not ingress_only.allowed(pod("b"), pod(), 80)


def test_a_peer_with_both_selectors_is_one_peer_and_two_peers_are_either():
    both = {"namespaceSelector": {"matchLabels": {"team": "ml"}}, "podSelector": {"matchLabels": {"role": "x"}}}
    one = Cluster([policy("a", {}, ingress=[{"from": [both]}])], namespaces=NAMESPACES)
    assert one.allowed(pod("b", role="x"), pod(), 80)
    assert not one.allowed(pod("b", role="y"), pod(), 80), "the pod selector applies in the selected namespace"
    assert not one.allowed(pod("a", role="x"), pod(), 80), "and only there"
    split = [{"namespaceSelector": {"matchLabels": {"team": "ml"}}}, {"podSelector": {"matchLabels": {"role": "x"}}}]
    either = Cluster([policy("a", {}, ingress=[{"from": split}])], namespaces=NAMESPACES)
    assert either.allowed(pod("b", role="y"), pod(), 80) and either.allowed(pod("a", role="x"), pod(), 80)
    assert not either.allowed(pod("a", role="y"), pod(), 80)


def test_namespaces_are_selected_by_their_name_label():
    peer = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}}
    cluster = Cluster([policy("a", {}, ingress=[{"from": [peer]}])], namespaces=NAMESPACES)
    assert cluster.allowed(pod("kube-system"), pod(), 80) and not cluster.allowed(pod("b"), pod(), 80)


def test_ip_blocks_with_exceptions_ports_ranges_and_names():
    rule = {
        "to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}}],
        "ports": [{"port": 443}, {"protocol": "UDP", "port": 5000, "endPort": 5010}],
    }
    cluster = Cluster([policy("a", {}, egress=[rule], policyTypes=["Egress"])], namespaces=NAMESPACES)
    assert cluster.allowed(pod(), Address("52.0.0.1"), 443)
    assert not cluster.allowed(pod(), Address("10.1.2.3"), 443), "except"
    assert not cluster.allowed(pod(), Address("52.0.0.1"), 80)
    assert cluster.allowed(pod(), Address("52.0.0.1"), 5010, "UDP") and not cluster.allowed(
        pod(), Address("52.0.0.1"), 5010
    ), "the protocol is TCP unless named"
    named = Cluster([policy("a", {}, ingress=[{"ports": [{"port": "http"}]}])], namespaces=NAMESPACES)
    assert named.allowed(pod("b"), pod(), 8080) and not named.allowed(pod("b"), pod(), 8081)


def test_match_expressions():
    assert selects({"matchExpressions": [{"key": "k", "operator": "DoesNotExist"}]}, {})
    assert not selects({"matchExpressions": [{"key": "k", "operator": "DoesNotExist"}]}, {"k": ""})
    assert selects({"matchExpressions": [{"key": "k", "operator": "In", "values": ["1"]}]}, {"k": "1"})
    assert selects({"matchExpressions": [{"key": "k", "operator": "NotIn", "values": ["1"]}]}, {})
    assert not selects({"matchExpressions": [{"key": "k", "operator": "Exists"}]}, {"j": "1"})


def test_the_node_of_a_pod_always_reaches_it():
    cluster = Cluster([policy("a", {}, ingress=[], egress=[])], namespaces=NAMESPACES)
    target = pod()
    assert cluster.allowed(Address(target.node_ip), target, 8080), "kubelet probes"
    assert not cluster.allowed(Address("10.0.128.99"), target, 8080), "another node does not"
    assert cluster.allowed(target, Address(target.node_ip), 10250)


def test_a_service_is_matched_as_its_cluster_ip_before_the_rewrite():
    dns_pod = Pod(namespace="kube-system", labels={"k8s-app": "kube-dns"}, ip="10.0.5.5")
    dns = Service(namespace="kube-system", selector={"k8s-app": "kube-dns"}, cluster_ip="172.20.0.10", ports={53: 53})
    to_pods = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
    }
    by_selector = Cluster(
        [policy("a", {}, egress=[{"to": [to_pods]}], policyTypes=["Egress"])],
        namespaces=NAMESPACES,
        pods=[dns_pod],
        services=[dns],
    )
    assert by_selector.allowed(pod(), dns, 53, "UDP"), "the controller adds the ClusterIP of a selected Service"
    assert by_selector.allowed(pod(), dns_pod, 53, "UDP")
    by_endpoint = Cluster(
        [policy("a", {}, egress=[{"to": [{"ipBlock": {"cidr": "10.0.5.5/32"}}]}], policyTypes=["Egress"])],
        namespaces=NAMESPACES,
        pods=[dns_pod],
        services=[dns],
    )
    assert not by_endpoint.allowed(pod(), dns, 53, "UDP"), "the endpoint's address is never seen on the pod's veth"
    with pytest.raises(ValueError, match="equals the container's"):
        moved = Service(
            namespace="kube-system", selector={"k8s-app": "kube-dns"}, cluster_ip="172.20.0.9", ports={53: 5353}
        )
        by_selector.allowed(pod(), moved, 53, "UDP")


def test_in_strict_mode_a_pod_no_policy_selects_is_denied_both_ways_and_one_selected_one_way_is_open_the_other():
    ingress_only = policy("a", {"matchLabels": {"app": "plugin"}}, ingress=[])
    strict = Cluster([ingress_only], namespaces=NAMESPACES, strict=True)
    standard = Cluster([ingress_only], namespaces=NAMESPACES)
    lonely, plugin = pod("b", ip="10.0.0.2"), pod(app="plugin")
    assert standard.allowed(lonely, Address("8.8.8.8"), 443) and standard.allowed(pod(), lonely, 80)
    assert not strict.allowed(lonely, Address("8.8.8.8"), 443), "no policy selects it: no egress"
    assert not strict.allowed(plugin, lonely, 80), "nor ingress"
    assert strict.allowed(plugin, Address("8.8.8.8"), 443), "selected for ingress only: egress stays open"
    assert not strict.allowed(lonely, plugin, 80)
    assert not strict.allowed(Address(lonely.node_ip), lonely, 80), "nor its node: kubelet's probes fail"
    assert strict.allowed(Address(plugin.node_ip), plugin, 80), "a selected pod's node reaches it"
    assert strict.selected(plugin) and not strict.selected(lonely)

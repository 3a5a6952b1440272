"""EtcdChart: the rendezvous etcd (v2 API of a pinned 3.5 image) and the network policies that admit only its
namespace."""

from tests.support.charts import objects, pod_spec
from trainium_eks.facts import versions
from trainium_eks.manifests.addons.etcd import EtcdChart
from trainium_eks.manifests.addons.tensorboard import TensorBoardChart


def test_etcd_serves_the_v2_api_from_a_pinned_v3_5_image():
    found = objects(EtcdChart())
    service = found["Service", "etcd-server"]["spec"]
    assert {(p["name"], p["port"]) for p in service["ports"]} == {("client", 2379), ("peer", 2380)}
    deployment = found["Deployment", "etcd-server"]
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    spec = pod_spec(deployment)
    assert spec["nodeSelector"] == {"trainium-eks/node-role": "system"}
    (container,) = spec["containers"]
    assert container["image"] == f"quay.io/coreos/etcd:{versions.ETCD.tag}"
    assert versions.ETCD.tag.startswith("v3.5.")
    assert "--enable-v2" in container["args"]
    assert "--advertise-client-urls=http://etcd-server:2379" in container["args"]
    assert container["resources"]["requests"] and container["resources"]["limits"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    assert container["readinessProbe"]["httpGet"]["port"] == 2379
    assert spec["securityContext"]["runAsNonRoot"] is True


def test_network_policies_admit_only_the_namespace_on_the_service_port():
    for chart, name, port in (
        (EtcdChart(), "etcd-server-clients", 2379),
        (TensorBoardChart(), "tensorboard-clients", 6006),
    ):
        policy = objects(chart)["NetworkPolicy", name]["spec"]
        assert policy["policyTypes"] == ["Ingress"]
        (rule,) = policy["ingress"]
        assert rule["from"] == [{"podSelector": {}}]
        assert rule["ports"] == [{"port": port, "protocol": "TCP"}]

"""EfaDevicePluginChart: the EFA device plugin's DaemonSet on the EFA instance types, from the regional registry."""

from tests.support.charts import REGISTRY, affinity_instance_types, objects, pod_spec
from trainium_eks.facts import versions
from trainium_eks.manifests.addons.efa_device_plugin import EfaDevicePluginChart


def test_efa_device_plugin_daemonset():
    daemonset = objects(EfaDevicePluginChart(registry=REGISTRY))["DaemonSet", "aws-efa-k8s-device-plugin"]
    spec = pod_spec(daemonset)
    assert spec["hostNetwork"] is True
    assert spec["automountServiceAccountToken"] is False
    efa_types = affinity_instance_types(spec)
    assert {"trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge"} <= set(efa_types)
    assert "trn1.2xlarge" not in efa_types and "m7i.xlarge" not in efa_types
    for key in ("aws.amazon.com/neuron", "nvidia.com/gpu"):
        assert {"key": key, "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    (container,) = spec["containers"]
    assert container["image"] == f"{REGISTRY}/eks/aws-efa-k8s-device-plugin:{versions.EFA_DEVICE_PLUGIN.tag}"
    mounts = {(m["name"], m["mountPath"]) for m in container["volumeMounts"]}
    assert mounts == {
        ("device-plugin", "/var/lib/kubelet/device-plugins"),
        ("infiniband", "/dev/infiniband"),
        ("neuron-tools", "/opt/aws/neuron"),
    }
    assert container["securityContext"] == {"privileged": True, "runAsUser": 0}, "Neuron-aligned EFA allocation"

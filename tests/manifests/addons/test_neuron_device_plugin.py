"""NeuronDevicePluginChart: the device plugin's RBAC and its DaemonSet on the Neuron instance types."""

from tests.support.charts import affinity_instance_types, objects, pod_spec
from trainium_eks.facts import versions
from trainium_eks.facts.catalog import INSTANCE_CATALOG, Accelerator
from trainium_eks.manifests.addons.neuron_device_plugin import NeuronDevicePluginChart


def test_neuron_device_plugin_rbac():
    found = objects(NeuronDevicePluginChart())
    assert set(found) == {
        ("ServiceAccount", "neuron-device-plugin"),
        ("ClusterRole", "neuron-device-plugin"),
        ("ClusterRoleBinding", "neuron-device-plugin"),
        ("DaemonSet", "neuron-device-plugin"),
        ("NetworkPolicy", "neuron-device-plugin-no-ingress"),
    }
    assert found["NetworkPolicy", "neuron-device-plugin-no-ingress"]["spec"]["ingress"] == []
    rules = {(tuple(r["resources"]), tuple(r["verbs"])) for r in found["ClusterRole", "neuron-device-plugin"]["rules"]}
    assert rules == {
        (("nodes",), ("get", "list", "watch")),
        (("events",), ("create", "patch")),
        (("pods",), ("get", "list", "watch", "update", "patch")),
        (("nodes/status",), ("patch", "update")),
    }
    binding = found["ClusterRoleBinding", "neuron-device-plugin"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "neuron-device-plugin", "namespace": "kube-system"}
    ]
    assert "namespace" not in found["ClusterRole", "neuron-device-plugin"]["metadata"]


def test_neuron_device_plugin_daemonset():
    daemonset = objects(NeuronDevicePluginChart())["DaemonSet", "neuron-device-plugin"]
    assert daemonset["metadata"]["namespace"] == "kube-system"
    spec = pod_spec(daemonset)
    neuron_types = sorted(f.name for f in INSTANCE_CATALOG.values() if f.accelerator is Accelerator.NEURON)
    assert affinity_instance_types(spec) == neuron_types
    assert "trn2.48xlarge" in neuron_types
    assert {"key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    assert {"key": "CriticalAddonsOnly", "operator": "Exists"} in spec["tolerations"]
    assert spec["priorityClassName"] == "system-node-critical"
    assert spec["serviceAccountName"] == "neuron-device-plugin"
    (container,) = spec["containers"]
    assert container["image"] == "public.ecr.aws/neuron/neuron-device-plugin:" + versions.NEURON_DEVICE_PLUGIN.tag
    assert container["image"].split(":")[-1].startswith("2.")
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    assert {v["hostPath"]["path"] for v in spec["volumes"]} == {"/var/lib/kubelet/device-plugins", "/run", "/opt/aws"}
    assert {"name": "aws-config", "mountPath": "/opt/aws", "readOnly": True} in container["volumeMounts"]

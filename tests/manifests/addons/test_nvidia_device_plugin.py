"""The NVIDIA device plugin chart: rendered objects, bad props, Kubernetes schema validation."""

import pytest

from tests.support.k8s_validation import validate_objects
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.facts import versions
from trainium_eks.facts.catalog import INSTANCE_CATALOG, Accelerator
from trainium_eks.manifests.addons.nvidia_device_plugin import NvidiaDevicePluginChart, nvidia_instance_types


def objects(chart):
    return {(o["kind"], o["metadata"]["name"]): o for o in chart.manifests()}


def daemonset(chart=None):
    return objects(chart or NvidiaDevicePluginChart())["DaemonSet", "nvidia-device-plugin"]


def pod_spec(chart=None):
    return daemonset(chart)["spec"]["template"]["spec"]


def affinity_instance_types(spec):
    (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    (expression,) = term["matchExpressions"]
    assert (expression["key"], expression["operator"]) == ("node.kubernetes.io/instance-type", "In")
    return expression["values"]


def environment(spec):
    (container,) = spec["containers"]
    return {item["name"]: item["value"] for item in container["env"]}


def test_objects():
    found = objects(NvidiaDevicePluginChart())
    assert set(found) == {
        ("DaemonSet", "nvidia-device-plugin"),
        ("NetworkPolicy", "nvidia-device-plugin-no-ingress"),
    }
    assert all(o["metadata"]["namespace"] == "kube-system" for o in found.values())
    assert all(o["metadata"]["labels"]["app.kubernetes.io/part-of"] == "trainium-eks" for o in found.values())
    assert found["NetworkPolicy", "nvidia-device-plugin-no-ingress"]["spec"]["ingress"] == []


def test_runs_on_every_nvidia_type_of_the_catalog_and_nowhere_else():
    types = affinity_instance_types(pod_spec())
    expected = sorted(f.name for f in INSTANCE_CATALOG.values() if f.accelerator is Accelerator.NVIDIA)
    assert types == expected == sorted(nvidia_instance_types())
    assert {"g5.xlarge", "g6.12xlarge", "g6e.48xlarge", "p4d.24xlarge", "p5.48xlarge"} <= set(types)
    assert not [t for t in types if t.startswith(("trn", "m"))]


def test_tolerates_the_gpu_taint_and_critical_addons_and_is_node_critical():
    spec = pod_spec()
    assert spec["tolerations"] == [
        {"key": "CriticalAddonsOnly", "operator": "Exists"},
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    ]
    assert spec["priorityClassName"] == "system-node-critical"


def test_container_image_security_and_mounts():
    spec = pod_spec()
    (container,) = spec["containers"]
    assert container["image"] == "nvcr.io/nvidia/k8s-device-plugin:v0.20.0@" + versions.NVIDIA_DEVICE_PLUGIN.digest
    assert versions.NVIDIA_DEVICE_PLUGIN.tag.startswith("v0.")
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    assert "privileged" not in str(spec)
    assert spec["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert spec["automountServiceAccountToken"] is False
    assert "hostNetwork" not in spec
    assert container["volumeMounts"] == [{"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"}]
    assert spec["volumes"] == [
        {"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins", "type": "Directory"}}
    ]
    assert container["resources"]["requests"] == {"cpu": "10m", "memory": "20Mi"}


def test_environment():
    assert environment(pod_spec()) == {
        "FAIL_ON_INIT_ERROR": "true",
        "MIG_STRATEGY": "none",
        "DEVICE_LIST_STRATEGY": "envvar",
        "DEVICE_ID_STRATEGY": "uuid",
        "PASS_DEVICE_SPECS": "false",
    }
    assert environment(pod_spec(NvidiaDevicePluginChart(fail_on_init_error=False)))["FAIL_ON_INIT_ERROR"] == "false"


def test_instance_types_and_image_can_be_chosen():
    chart = NvidiaDevicePluginChart(instance_types=["g6e.xlarge", "g5.xlarge"], image="registry.example/plugin:v1")
    spec = pod_spec(chart)
    assert affinity_instance_types(spec) == ["g5.xlarge", "g6e.xlarge"]
    assert spec["containers"][0]["image"] == "registry.example/plugin:v1"


def test_bad_props_are_reported_together():
    with pytest.raises(ConfigurationError) as raised:
        NvidiaDevicePluginChart(image=" ", instance_types=["g5.xlarge", "x9.huge"], fail_on_init_error="yes")
    problems = raised.value.problems
    assert len(problems) == 3
    assert problems[0].startswith("image=")
    assert problems[1].startswith("instance_types=['x9.huge']")
    assert problems[2].startswith("fail_on_init_error='yes'")
    assert str(raised.value).startswith("nvidia-device-plugin chart: 3 configuration problems")


def test_an_empty_list_of_instance_types_is_refused():
    with pytest.raises(ConfigurationError, match="at least one instance type"):
        NvidiaDevicePluginChart(instance_types=[])


@pytest.mark.parametrize("version", versions.KUBERNETES_VERSIONS)
def test_validates_for_every_supported_kubernetes_version(version, tmp_path):
    validate_objects(NvidiaDevicePluginChart().manifests(), tmp_path, k8s_version=version)

"""The in-cluster charts, rendered and checked object by object, then schema-validated."""

import pytest

from tests.k8s_validation import validate_objects
from trainium_eks.core.conventions import LustreVolumeSource
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.facts import versions
from trainium_eks.facts.catalog import INSTANCE_CATALOG, Accelerator
from trainium_eks.manifests.access.job_release_access import JobReleaseAccessChart, JobReleaseCreatorChart
from trainium_eks.manifests.access.training_namespace import TrainingNamespaceChart
from trainium_eks.manifests.addons.efa_device_plugin import EfaDevicePluginChart
from trainium_eks.manifests.addons.etcd import EtcdChart
from trainium_eks.manifests.addons.neuron_device_plugin import NeuronDevicePluginChart
from trainium_eks.manifests.addons.tensorboard import TensorBoardChart
from trainium_eks.manifests.addons.volcano_queue import VolcanoQueueChart
from trainium_eks.manifests.storage.lustre_volume import LustreVolumeChart

REGISTRY = "602401143452.dkr.ecr.us-west-2.amazonaws.com"
FSX = LustreVolumeSource(
    file_system_id="fs-0123456789abcdef0",
    dns_name="fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com",
    mount_name="abcdefgh",
    storage_gib=1200,
)


def charts():
    return [
        NeuronDevicePluginChart(),
        EfaDevicePluginChart(registry=REGISTRY),
        TrainingNamespaceChart(),
        LustreVolumeChart(volume=FSX),
        EtcdChart(),
        TensorBoardChart(),
        VolcanoQueueChart(),
        JobReleaseAccessChart(namespace="training"),
        *(JobReleaseCreatorChart(namespace="training", kind=kind) for kind in ("job", "vcjob", "trainjob")),
    ]


def objects(chart):
    return {(o["kind"], o["metadata"]["name"]): o for o in chart.manifests()}


def pod_spec(workload):
    return workload["spec"]["template"]["spec"]


def affinity_instance_types(spec):
    (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    (expression,) = term["matchExpressions"]
    assert (expression["key"], expression["operator"]) == ("node.kubernetes.io/instance-type", "In")
    return expression["values"]


def test_every_object_of_every_chart_validates_strictly(tmp_path):
    validate_objects([o for chart in charts() for o in chart.manifests()], tmp_path)


@pytest.mark.parametrize("version", versions.KUBERNETES_VERSIONS)
def test_charts_validate_for_every_supported_kubernetes_version(version, tmp_path):
    validate_objects([o for chart in charts() for o in chart.manifests()], tmp_path, k8s_version=version)


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


def test_training_namespace_and_a_service_account_without_kubernetes_permissions():
    found = objects(TrainingNamespaceChart())
    namespace = found["Namespace", "training"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    assert found["ServiceAccount", "training"]["metadata"]["namespace"] == "training"
    assert set(found) == {("Namespace", "training"), ("ServiceAccount", "training")}, (
        "training pods never call the Kubernetes API: no Role, no RoleBinding"
    )


def test_release_jobs_may_read_jobs_and_create_only_the_kinds_they_hold():
    access = objects(JobReleaseAccessChart(namespace="training"))
    assert access["Role", "job-release-read"]["rules"] == [
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get"]},
        {"apiGroups": ["batch.volcano.sh"], "resources": ["jobs"], "verbs": ["get"]},
        {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs"], "verbs": ["get"]},
        {"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs"], "verbs": ["get"]},
    ]
    creator = objects(JobReleaseCreatorChart(namespace="training", kind="vcjob"))
    assert creator["Role", "job-release-create-vcjob"]["rules"] == [
        {"apiGroups": ["batch.volcano.sh"], "resources": ["jobs"], "verbs": ["create"]}
    ]
    for found in (access, creator):
        (binding,) = [obj for key, obj in found.items() if key[0] == "RoleBinding"]
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "job-release", "namespace": "training"}]
    with pytest.raises(ConfigurationError, match="kind='deployment'"):
        JobReleaseCreatorChart(namespace="training", kind="deployment")


def test_fsx_volume_is_a_static_retained_rwx_csi_volume_bound_to_its_claim():
    found = objects(LustreVolumeChart(volume=FSX))
    volume = found["PersistentVolume", "fsx-pv"]["spec"]
    assert volume["csi"] == {
        "driver": "fsx.csi.aws.com",
        "volumeHandle": FSX.file_system_id,
        "volumeAttributes": {"dnsname": FSX.dns_name, "mountname": FSX.mount_name},
    }
    assert volume["mountOptions"] == ["flock"]
    assert volume["accessModes"] == ["ReadWriteMany"]
    assert volume["persistentVolumeReclaimPolicy"] == "Retain"
    assert volume["capacity"] == {"storage": "1200Gi"}
    assert volume["claimRef"] == {"namespace": "training", "name": "fsx-claim"}
    claim = found["PersistentVolumeClaim", "fsx-claim"]
    assert claim["metadata"]["namespace"] == "training"
    assert claim["spec"]["volumeName"] == "fsx-pv"
    assert claim["spec"]["storageClassName"] == ""
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]


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


def test_tensorboard_reads_the_shared_volume_and_is_not_exposed():
    found = objects(TensorBoardChart())
    assert found["Service", "tensorboard"]["spec"]["type"] == "ClusterIP"
    spec = pod_spec(found["Deployment", "tensorboard"])
    (container,) = spec["containers"]
    assert container["command"] == ["tensorboard"]
    assert "--logdir=/data/output" in container["args"]
    assert {"name": "shared", "mountPath": "/data", "readOnly": True} in container["volumeMounts"]
    shared = next(v for v in spec["volumes"] if v["name"] == "shared")
    assert shared["persistentVolumeClaim"]["claimName"] == "fsx-claim"
    assert spec["nodeSelector"] == {"trainium-eks/node-role": "system"}


def test_volcano_queue():
    queue = objects(VolcanoQueueChart())["Queue", "training"]
    assert queue["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert queue["spec"] == {"weight": 1, "reclaimable": False}
    assert "namespace" not in queue["metadata"]
    assert objects(VolcanoQueueChart(name="research"))["Queue", "research"]


def test_no_image_is_unpinned():
    for chart in charts():
        for o in chart.manifests():
            if o["kind"] in ("DaemonSet", "Deployment"):
                for container in pod_spec(o)["containers"]:
                    tag = container["image"].rsplit(":", 1)[-1]
                    assert tag and tag != "latest" and "/" not in tag, container["image"]


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

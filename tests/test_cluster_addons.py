"""ClusterAddons inside the default stack: manifests, Volcano's Helm release, ordering, lifecycle."""

import json
import subprocess
import sys

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk import assertions

from tests.conftest import SHARED, build_default_app, default_template, new_app, resources_of
from tests.k8s_validation import validate_objects
from trainium_eks import versions
from trainium_eks.constructs.cluster import TrainingCluster
from trainium_eks.constructs.cluster_addons import ClusterAddons
from trainium_eks.constructs.lustre_storage import LustreVolumeSource
from trainium_eks.constructs.network import TrainingNetwork

MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"
HELM = "Custom::AWSCDK-EKS-HelmChart"


def manifests_by_id(template):
    return {k: v for k, v in resources_of(template, MANIFEST).items() if k.startswith("Addons")}


def logical_id(template, prefix):
    (found,) = [k for k in template.to_json()["Resources"] if k.startswith(prefix)]
    return found


def kinds(resource):
    text = resource["Properties"]["Manifest"]
    if isinstance(text, dict):
        text = "".join(p if isinstance(p, str) else "TOKEN" for p in text["Fn::Join"][1])
    return sorted(o["kind"] for o in json.loads(text))


def test_every_chart_is_applied_by_the_stack(template):
    found = {k.split("Addons")[1][:-8]: kinds(v) for k, v in manifests_by_id(template).items()}
    assert found == {
        "NeuronDevicePlugin": ["ClusterRole", "ClusterRoleBinding", "DaemonSet", "NetworkPolicy", "ServiceAccount"],
        "EfaDevicePlugin": ["DaemonSet"],
        "TrainingNamespace": ["Namespace", "Role", "RoleBinding", "ServiceAccount"],
        "SharedVolume": ["PersistentVolume", "PersistentVolumeClaim"],
        "Etcd": ["Deployment", "NetworkPolicy", "Service"],
        "TensorBoard": ["Deployment", "NetworkPolicy", "Service"],
        "VolcanoQueue": ["Queue"],
    }


def test_shared_volume_takes_the_file_system_attributes_from_the_stack(template):
    volume = manifests_by_id(template)[logical_id(template, "AddonsSharedVolume")]
    parts = volume["Properties"]["Manifest"]["Fn::Join"][1]
    tokens = [p for p in parts if not isinstance(p, str)]
    file_system = logical_id(template, "StorageFileSystem")
    assert tokens.count({"Ref": file_system}) == 2, "volumeHandle and the DNS name <id>.fsx.<region>.<suffix>"
    assert {"Fn::GetAtt": [file_system, "LustreMountName"]} in tokens


def test_volcano_is_installed_from_its_pinned_chart_on_the_system_nodes(template):
    (helm,) = resources_of(template, HELM).values()
    props = helm["Properties"]
    assert (props["Repository"], props["Chart"], props["Version"]) == (
        versions.VOLCANO.repository,
        versions.VOLCANO.chart,
        versions.VOLCANO.version,
    )
    assert props["Namespace"] == "volcano-system" and props["Release"] == "volcano"
    assert props["Wait"] is True
    assert json.loads(props["Values"]) == {"custom": {"default_ns": {"trainium-eks/node-role": "system"}}}


def depends_on(template, prefix):
    resource = template.to_json()["Resources"][logical_id(template, prefix)]
    return set(resource.get("DependsOn", []))


def test_ordering_is_expressed_as_stack_dependencies(template):
    namespace = logical_id(template, "AddonsTrainingNamespace")
    volume = logical_id(template, "AddonsSharedVolume")
    volcano = logical_id(template, "AddonsVolcano3")
    system_nodes = next(
        k
        for k, v in resources_of(template, "AWS::EKS::Nodegroup").items()
        if v["Properties"]["AmiType"] == "AL2023_x86_64_STANDARD"
    )
    assert volcano in depends_on(template, "AddonsVolcanoQueue"), "CRDs and webhook before the Queue"
    assert system_nodes in depends_on(template, "AddonsVolcano3"), "the release waits for pods: nodes first"
    assert namespace in depends_on(template, "AddonsSharedVolume")
    assert namespace in depends_on(template, "AddonsEtcd")
    assert {namespace, volume} <= depends_on(template, "AddonsTensorBoard")


def test_prune_and_removal_policy_per_chart(template):
    found = manifests_by_id(template)
    retained = {k.split("Addons")[1][:-8] for k, v in found.items() if v.get("DeletionPolicy") == "Retain"}
    assert retained == {"TrainingNamespace", "SharedVolume"}
    pruned = {k.split("Addons")[1][:-8] for k, v in found.items() if v["Properties"].get("PruneLabel")}
    assert pruned == {"NeuronDevicePlugin", "EfaDevicePlugin", "Etcd", "TensorBoard", "VolcanoQueue"}
    assert all(v["Properties"]["Overwrite"] is True for v in found.values())


def test_efa_image_comes_from_the_eks_registry_of_the_stack_region():
    template = default_template(region="us-east-2", trainiumAzId="use2-az3")
    efa = manifests_by_id(template)[logical_id(template, "AddonsEfaDevicePlugin")]
    assert (
        "602401143452.dkr.ecr.us-east-2.amazonaws.com/eks/aws-efa-k8s-device-plugin:" in efa["Properties"]["Manifest"]
    )


def test_efa_registry_is_a_mapping_when_the_region_is_a_token():
    app = new_app()
    stack = cdk.Stack(app, "Agnostic")
    network = TrainingNetwork(stack, "Net", accelerated_az_id="usw2-az4")
    cluster = TrainingCluster(stack, "Cluster", vpc=network.vpc)
    ClusterAddons(
        stack,
        "Addons",
        cluster=cluster.cluster,
        system_nodes=cluster.system_nodegroup,
        volume=LustreVolumeSource("fs-0123456789abcdef0", "fs.example", "abcdefgh", 1200),
    )
    template = assertions.Template.from_stack(stack)
    mapping = template.to_json()["Mappings"]
    (accounts,) = [m for k, m in mapping.items() if k.startswith("AddonsEksRegistryAccounts")]
    assert accounts["af-south-1"] == {"account": "877085696533"}
    efa = manifests_by_id(template)[logical_id(template, "AddonsEfaDevicePlugin")]
    assert "Fn::FindInMap" in json.dumps(efa["Properties"]["Manifest"])


def test_objects_embedded_in_the_template_validate(tmp_path):
    if not (SHARED / "k8s-schemas" / "extract_manifests.py").exists():
        pytest.skip("skipped: ../shared/k8s-schemas is absent")
    app, _ = build_default_app()
    assembly = app.synth()
    out = tmp_path / "cdk.out"
    out.mkdir()
    for artifact in assembly.stacks:
        (out / artifact.template_file).write_text(json.dumps(artifact.template))
    extracted = tmp_path / "manifests"
    subprocess.run(
        [sys.executable, str(SHARED / "k8s-schemas" / "extract_manifests.py"), str(out), str(extracted)],
        check=True,
        capture_output=True,
    )
    objects = [o for path in sorted(extracted.glob("*.yaml")) for o in yaml.safe_load_all(path.read_text()) if o]
    assert len(objects) >= 16
    validate_objects(objects, tmp_path)

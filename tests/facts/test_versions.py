"""facts.versions: the Kubernetes versions and their kubectl layers, the add-on pins and their check, image pins."""

import re
from datetime import date

import aws_cdk as cdk
import pytest

from tests.support.apps import REPO, new_app
from trainium_eks.facts import versions
from trainium_eks.facts.versions import (
    ADDONS,
    DEFAULT_KUBERNETES_VERSION,
    EXTENDED_SUPPORT_FROM,
    KUBECTL_DEFAULT_PRUNE_ALLOWLIST,
    KUBECTL_LAYER_TOOLS,
    KUBECTL_LAYERS,
    KUBERNETES_VERSIONS,
    AddonPin,
    HelmChartPin,
    ImagePin,
    PythonPin,
    check_addon_version,
    kubectl_layer,
)

PINS = {name: value for name, value in vars(versions).items() if isinstance(value, (ImagePin, HelmChartPin))}
PYTHON_PINS = [
    pin for value in vars(versions).values() if isinstance(value, tuple) for pin in value if isinstance(pin, PythonPin)
]


def minor(version):
    return tuple(int(part) for part in version.split("."))


def test_the_kubernetes_versions_ascend_to_the_default_and_each_has_the_kubectl_layer_of_its_minor():
    assert all(re.fullmatch(r"1\.[0-9]+", v) for v in KUBERNETES_VERSIONS), KUBERNETES_VERSIONS
    assert list(KUBERNETES_VERSIONS) == sorted(KUBERNETES_VERSIONS, key=minor)
    assert DEFAULT_KUBERNETES_VERSION == KUBERNETES_VERSIONS[-1]
    assert DEFAULT_KUBERNETES_VERSION not in EXTENDED_SUPPORT_FROM, "the default is in standard support"
    assert set(EXTENDED_SUPPORT_FROM) <= set(KUBERNETES_VERSIONS)
    assert all(date.fromisoformat(day) for day in EXTENDED_SUPPORT_FROM.values())
    assert set(KUBECTL_LAYERS) == set(KUBERNETES_VERSIONS)
    requirements = (REPO / "requirements.txt").read_text().splitlines()
    stack = cdk.Stack(new_app(), "Layers")
    for version, (module_name, class_name) in KUBECTL_LAYERS.items():
        number = version.split(".")[1]
        assert (module_name, class_name) == (f"aws_cdk.lambda_layer_kubectl_v{number}", f"KubectlV{number}Layer")
        assert any(line.startswith(f"aws-cdk.lambda-layer-kubectl-v{number}==") for line in requirements), version
        layer = kubectl_layer(stack, f"Kubectl{number}", version)
        assert type(layer).__name__ == class_name and layer.node.id == f"Kubectl{number}"
    assert KUBECTL_LAYER_TOOLS["kubectl"].startswith(DEFAULT_KUBERNETES_VERSION + ".")


def test_the_prune_allowlist_lists_namespaced_kinds_then_cluster_scoped_ones_each_once():
    namespaced = [entry[3] for entry in KUBECTL_DEFAULT_PRUNE_ALLOWLIST]
    assert namespaced == sorted(namespaced, reverse=True) and True in namespaced and False in namespaced
    kinds = [(group, kind) for group, _, kind, _ in KUBECTL_DEFAULT_PRUNE_ALLOWLIST]
    assert len(kinds) == len(set(kinds))
    assert ("", "Namespace") in kinds and ("", "ServiceAccount") not in kinds, "the docstring's never-pruned kinds"


def test_addon_pins_have_the_documented_form():
    for name, pin in ADDONS.items():
        assert isinstance(pin, AddonPin) and pin.source, name
        assert pin.version is None or versions.ADDON_VERSION.fullmatch(pin.version), (name, pin.version)
        assert pin.minimum is None or re.fullmatch(r"v[0-9]+\.[0-9]+\.[0-9]+", pin.minimum), (name, pin.minimum)
        assert date.fromisoformat(pin.checked), name
        assert all(isinstance(value, str) for value in pin.configuration.values()), name


@pytest.mark.parametrize(
    "name,version,problem",
    [
        ("vpc-cni", "v1.20.0-eksbuild.1", None),
        ("vpc-cni", "v1.100.0-eksbuild.1", None),
        ("vpc-cni", "v2.0.0-eksbuild.3", None),
        ("coredns", "v0.0.1-eksbuild.1", None),
        ("vpc-cni", "v1.19.6-eksbuild.9", "vpc-cni must be v1.20.0 or newer (EKS user guide node-efa.html"),
        ("vpc-cni", "v1.18.5-eksbuild.1", "vpc-cni must be v1.20.0 or newer"),
        ("vpc-cni", "v1.9.0-eksbuild.1", "vpc-cni must be v1.20.0 or newer"),
        ("amazon-cloudwatch-observability", "v3.0.9-eksbuild.1", "amazon-cloudwatch-observability must be v3.1.0"),
        ("vpc-cni", "1.21.1-eksbuild.1", "an EKS add-on version such as v1.21.1-eksbuild.1"),
        ("vpc-cni", "v1.21.1", "an EKS add-on version such as"),
        ("vpc-cni", "v1.21.1-eksbuild.1\n", "an EKS add-on version such as"),
        ("vpc-cni", None, "an EKS add-on version such as"),
        ("vpc_cni", "v1.21.1-eksbuild.1", "unknown add-on; known: amazon-cloudwatch-observability, aws-efs-csi-driver"),
    ],
)
def test_an_addon_version_must_have_the_eks_form_and_be_at_least_the_minimum_compared_by_number(name, version, problem):
    found = check_addon_version(name, version)
    if problem is None:
        assert found is None
    else:
        assert found is not None and found.startswith(problem), found


@pytest.mark.parametrize("name", sorted(PINS))
def test_every_image_and_chart_pin_is_an_exact_version_with_its_source(name):
    pin = PINS[name]
    assert pin.source and date.fromisoformat(pin.checked), name
    if isinstance(pin, ImagePin):
        assert pin.tag and pin.tag != "latest" and not re.search(r"[:/@\s]", pin.tag), pin.tag
        assert ":" not in pin.repository and pin.image == f"{pin.repository}:{pin.tag}" + (
            f"@{pin.digest}" if pin.digest else ""
        )
        assert pin.digest is None or re.fullmatch(r"sha256:[0-9a-f]{64}", pin.digest), pin.digest
        host = pin.repository.split("/")[0]
        assert "." in host or pin.repository.startswith("eks/"), "a registry host, or a path of the EKS registries"
    else:
        assert re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", pin.version), pin.version
        assert pin.repository.startswith(("https://", "oci://")) and pin.hook_phases >= 0


def test_python_pins_are_exact_requirements():
    assert PYTHON_PINS, "versions pins the etcd client"
    for pin in PYTHON_PINS:
        assert pin.requirement == f"{pin.package}=={pin.version}"
        assert re.fullmatch(r"[0-9]+(\.[0-9]+)+", pin.version) and date.fromisoformat(pin.checked), pin

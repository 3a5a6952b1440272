"""What runs in each stack's cluster holds no more than its work needs: a component only where its nodes or file system
are, a service-account token only where the API is called, the runtime's seccomp profile and no spare capability in
every pod the library defines, and images pinned by digest where the digest could be read."""

import re
from pathlib import Path

import pytest
import yaml

from tests.support.apps import COMPOSER_TRAINING, KUBEFLOW_TRAINING, REPO, TRAINIUM_EKS, resources_of, stack_template
from tests.support.manifests import applied_objects, node_pools, pod_templates, pool_requirements
from trainium_eks.core.conventions import FABRIC_CHECK_LABEL
from trainium_eks.facts import versions
from trainium_eks.facts.catalog import Accelerator, instance_facts
from trainium_eks.manifests.jobs.fabric_check import SSHD_CAPABILITIES

STACKS = [TRAINIUM_EKS, KUBEFLOW_TRAINING, COMPOSER_TRAINING]
VARIANTS = [(name, {}) for name in STACKS] + [(name, {"provisioning": "node-group"}) for name in STACKS]
TOKEN_USERS = {"neuron-device-plugin", "job-release"}
"""Service accounts whose pods call the Kubernetes API: the Neuron device plugin (it reads nodes and patches pods:
aws-neuron/neuron-helm-charts' ClusterRole) and the release Jobs."""


def pods_of(template):
    """(object, pod template) of every pod the stack's applied objects (and the jobs its releases create) define."""
    for (kind, name), obj in applied_objects(template).items():
        for pod in pod_templates(obj):
            yield f"{kind}/{name}", pod


def node_types(name, context):
    template = stack_template(name, **context)
    if context.get("provisioning") == "node-group":
        groups = resources_of(template, "AWS::EC2::LaunchTemplate").values()
        return {
            r["Properties"]["LaunchTemplateData"]["InstanceType"]
            for r in groups
            if "InstanceType" in r["Properties"]["LaunchTemplateData"]
        } - {"m7i.xlarge"}
    return {
        t
        for pool in node_pools(template).values()
        for t in pool_requirements(pool["NodePool"])["node.kubernetes.io/instance-type"]
    }


@pytest.mark.parametrize(
    "name,context", VARIANTS, ids=[f"{n}-{c.get('provisioning', 'karpenter')}" for n, c in VARIANTS]
)
def test_device_plugins_and_csi_drivers_run_only_where_their_nodes_and_file_systems_are(name, context):
    template = stack_template(name, **context)
    facts = [instance_facts(t) for t in node_types(name, context)]
    assert facts, "every stack has training nodes"
    daemon_sets = {n for (kind, n) in applied_objects(template) if kind == "DaemonSet"}
    assert ("neuron-device-plugin" in daemon_sets) == any(f.accelerator is Accelerator.NEURON for f in facts)
    assert ("nvidia-device-plugin" in daemon_sets) == any(f.accelerator is Accelerator.NVIDIA for f in facts)
    assert ("aws-efa-k8s-device-plugin" in daemon_sets) == any(f.efa_supported for f in facts)
    addons = {r["Properties"]["AddonName"] for r in resources_of(template, "AWS::EKS::Addon").values()}
    lustre = bool(resources_of(template, "AWS::FSx::FileSystem"))
    efs = bool(resources_of(template, "AWS::EFS::FileSystem"))
    assert ("aws-fsx-csi-driver" in addons) == lustre and ("aws-efs-csi-driver" in addons) == efs
    assert lustre != efs, "each stack mounts one shared file system"


@pytest.mark.parametrize("name", STACKS)
def test_only_pods_that_call_the_api_mount_a_service_account_token(name):
    template = stack_template(name)
    for owner, pod in pods_of(template):
        spec = pod["spec"]
        if owner.startswith("ClusterTrainingRuntime/") or spec.get("serviceAccountName") in TOKEN_USERS:
            continue
        if owner.startswith("TrainJob/"):
            continue  # its pods are the runtime's template with the TrainJob's patch: checked on the runtime
        assert spec.get("automountServiceAccountToken") is False, owner
    runtimes = [pod for owner, pod in pods_of(template) if owner.startswith("ClusterTrainingRuntime/")]
    assert all(pod["spec"]["automountServiceAccountToken"] is False for pod in runtimes)
    accounts = {n: o for (kind, n), o in applied_objects(template).items() if kind == "ServiceAccount"}
    assert accounts["training"]["automountServiceAccountToken"] is False


@pytest.mark.parametrize("name", STACKS)
def test_every_pod_runs_the_runtime_default_seccomp_profile_without_spare_capabilities(name):
    template = stack_template(name)
    seen = 0
    for owner, pod in pods_of(template):
        spec = pod["spec"]
        seen += 1
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, owner
        for container in spec["containers"]:
            if owner.startswith("ClusterTrainingRuntime/"):
                continue  # the TrainJob's patch gives the container's security
            security = container.get("securityContext") or {}
            if owner == "DaemonSet/aws-efa-k8s-device-plugin":
                assert security == {"privileged": True, "runAsUser": 0}, "as upstream: the one exception"
            elif FABRIC_CHECK_LABEL in pod["labels"]:
                assert security == {
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"], "add": list(SSHD_CAPABILITIES)},
                }, owner
                assert not {"MKNOD", "NET_RAW", "SETFCAP", "SETPCAP", "SYS_ADMIN"} & set(SSHD_CAPABILITIES)
            else:
                assert security["capabilities"] == {"drop": ["ALL"]}, owner
                assert security["allowPrivilegeEscalation"] is False, owner
    assert seen >= 4


MEMORY_POLICY = re.compile(r"numactl[^\n]*(--membind|-m\b|--interleave|-i\b|--preferred|-p\b|--localalloc|-l\b)")
"""A ``numactl`` that sets a memory policy: under the runtime's default profile its ``set_mempolicy`` is refused
(containerd v2.2.7 ``contrib/seccomp/seccomp_default.go`` allows the mempolicy calls only with ``CAP_SYS_NICE``) and
numactl exits 1 instead of starting the program."""


@pytest.mark.parametrize("name", STACKS)
def test_no_pod_starts_its_work_through_a_memory_policy_the_default_profile_refuses(name):
    """Without CAP_SYS_NICE, ``mbind``/``set_mempolicy`` fail with EPERM: a library that asks for a policy (libnuma)
    falls back to the kernel's default (memory on the node of the CPU that touches it first), but ``numactl --membind``
    stops the pod. CPU pinning (``taskset``, ``sched_setaffinity``) stays allowed."""
    template = stack_template(name)
    for owner, pod in pods_of(template):
        for container in [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]:
            text = "\n".join([*container.get("command", []), *container.get("args", [])])
            assert not MEMORY_POLICY.search(text), (owner, container["name"])
    for script in (REPO / "images").rglob("*.py"):
        assert not MEMORY_POLICY.search(script.read_text()), script


DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
ASSET = re.compile(r"/cdk-[a-z0-9]+-container-assets-.+:[0-9a-f]{64}$")
"""The stack's own image: a CDK asset in the bootstrap repository (immutable tags), tagged with the hash of its
content."""
UNPINNED = {pin.image for pin in vars(versions).values() if isinstance(pin, versions.ImagePin) and pin.digest is None}


@pytest.mark.parametrize("name", STACKS)
def test_every_image_is_pinned_by_digest_or_is_a_pin_whose_digest_could_not_be_read_or_a_built_asset(name):
    template = stack_template(name)
    images = [(owner, c.get("image")) for owner, pod in pods_of(template) for c in pod["spec"]["containers"]]
    images += [
        (f"TrainJob/{n}", o["spec"]["trainer"]["image"])
        for (k, n), o in applied_objects(template).items()
        if k == "TrainJob"
    ]
    assert images
    for owner, image in images:
        if image is None:
            continue  # a TrainJob's patch or a runtime's template: the TrainJob names the image
        pinned = DIGEST.search(image) or ASSET.search(image)
        assert pinned or any(image.endswith(unpinned) for unpinned in UNPINNED), (owner, image)


def test_every_pin_says_where_its_digest_was_read_or_why_not():
    pins = {name: pin for name, pin in vars(versions).items() if isinstance(pin, versions.ImagePin)}
    read = {name for name, pin in pins.items() if pin.digest}
    assert read == {
        "JOB_RELEASE_IMAGE",
        "COMPOSER_BASE",
        "PYTORCH_RUNTIME",
        "NVIDIA_DEVICE_PLUGIN",
        "KARPENTER_CONTROLLER",
    }
    for name, pin in pins.items():
        assert pin.digest_source == versions.DIGEST_NOT_READ or "Read 2026-" in pin.digest_source, name
    for dockerfile, pin in [("cifar10-ddp", versions.PYTORCH_RUNTIME), ("composer-resnet", versions.COMPOSER_BASE)]:
        assert f"ARG BASE_IMAGE={pin.image}\n" in (REPO / "images" / dockerfile / "Dockerfile").read_text()


@pytest.mark.parametrize("digest", ["sha256:" + "A" * 64, "sha256:" + "a" * 63, "md5:" + "a" * 64, "a" * 64])
def test_a_digest_that_is_not_sha256_is_refused(digest):
    with pytest.raises(ValueError, match="is not sha256"):
        versions.ImagePin("r/x", "1", "s", "2026-12-01", digest=digest, digest_source="s")


def test_karpenter_runs_the_controller_digest_the_library_read():
    template = stack_template(TRAINIUM_EKS)
    (chart,) = [
        r["Properties"]
        for r in resources_of(template, "Custom::AWSCDK-EKS-HelmChart").values()
        if r["Properties"]["Chart"] == "karpenter"
    ]
    values = chart["Values"]
    text = values if isinstance(values, str) else "".join(p for p in values["Fn::Join"][1] if isinstance(p, str))
    assert versions.KARPENTER_CONTROLLER.digest in text and '"tag":"1.14.1"' in text.replace(" ", "")


BOOTSTRAP_TEMPLATE = REPO / "node_modules" / "aws-cdk" / "lib" / "api" / "bootstrap" / "bootstrap-template.yaml"


def test_the_bootstrap_repository_is_what_the_readme_says():
    """docs/security.md says why the stacks' images land in the CDK bootstrap's repository and what it lacks; the
    pinned CDK CLI's bootstrap template is the source."""
    if not BOOTSTRAP_TEMPLATE.exists():
        pytest.skip(f"{BOOTSTRAP_TEMPLATE} is absent: npm ci installs the pinned CDK CLI")
    loader = yaml.SafeLoader
    loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    repository = yaml.load(Path(BOOTSTRAP_TEMPLATE).read_text(), Loader=loader)["Resources"][
        "ContainerAssetsRepository"
    ]
    properties = repository["Properties"]
    assert properties["ImageTagMutability"] == "IMMUTABLE"
    assert "ImageScanningConfiguration" not in properties and "EncryptionConfiguration" not in properties

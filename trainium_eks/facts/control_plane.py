"""The upstream Go components of the end-to-end tests (``make e2e``), each at one pinned version with its source.

They are not deployed by the library: the tests build them from their Go modules (``e2e/modules/<name>/go.mod``,
``python -m e2e.build``) and run them on loopback to apply the stacks' objects to a real API server and drive the
seed runs with the real controllers. Each version follows what the stacks deploy (:mod:`.versions`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from trainium_eks.facts import versions


@dataclass(frozen=True)
class SourcePatch:
    """A file added to a module the proxy serves at another version than the component needs: the build copies
    ``module`` at ``version`` out of the module cache, adds ``file`` (of the component's folder) to ``directory``,
    and builds against the copy (a ``go.work`` replace).

    :param module: The module patched.
    :param version: The version copied (the one the proxy serves).
    :param directory: The package folder inside the module.
    :param file: The file added, in ``e2e/modules/<name>`` (its name starts with ``_``, so Go ignores it there).
    :param reason: Why.
    """

    module: str
    version: str
    directory: str
    file: str
    reason: str


@dataclass(frozen=True)
class GoComponent:
    """A Go module of ours (``e2e/modules/<name>``) that requires ``module`` at ``version`` and builds ``binaries``.

    :param name: The folder under ``e2e/modules``.
    :param module: The upstream module.
    :param version: Its version (the go.mod's requirement; a test checks they agree).
    :param binaries: (file name, package) of each binary built.
    :param ldflags: ``-X`` settings of the build (``{version}`` is replaced by :attr:`version`).
    :param source: Why this version.
    :param patch: A module built from a patched copy (None: every module as the proxy serves it).
    """

    name: str
    module: str
    version: str
    binaries: Tuple[Tuple[str, str], ...]
    source: str
    ldflags: Tuple[str, ...] = ()
    patch: Optional[SourcePatch] = None


KUBERNETES_PATCH = "v1.36.3"
"""The Kubernetes release of the test control plane: the patch of :data:`versions.DEFAULT_KUBERNETES_VERSION` that
the kubectl layer's kubectl reports (:data:`versions.KUBECTL_LAYER_TOOLS`)."""

_K8S_VERSION_PACKAGES = ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")

KUBERNETES = GoComponent(
    name="kubernetes",
    module="k8s.io/kubernetes",
    version=KUBERNETES_PATCH,
    binaries=(
        ("kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver"),
        ("kube-controller-manager", "k8s.io/kubernetes/cmd/kube-controller-manager"),
        ("kube-scheduler", "k8s.io/kubernetes/cmd/kube-scheduler"),
    ),
    source="the stacks' default Kubernetes minor (1.36); its staging modules (k8s.io/api, apimachinery, client-go, "
    "...) replaced by their v0.36.3 tags, as k8s.io/kubernetes lists them at v0.0.0",
    # /version must report the release: Volcano, Helm and kwok read it.
    ldflags=tuple(
        f"{package}.{key}={value}"
        for package in _K8S_VERSION_PACKAGES
        for key, value in (
            ("gitVersion", "{version}"),
            ("gitMajor", "1"),
            ("gitMinor", "36"),
            ("gitTreeState", "clean"),
            ("buildDate", "2026-01-01T00:00:00Z"),
        )
    ),
)

ETCD = GoComponent(
    name="etcd",
    module="go.etcd.io/etcd/server/v3",
    version="v3.6.8",
    binaries=(("etcd", "go.etcd.io/etcd/server/v3"),),
    source="etcd 3.6, the series Kubernetes 1.36 is tested with (Debian's etcd-server 3.4.23 is below the "
    "documented minimum 3.4.29)",
)

KWOK = GoComponent(
    name="kwok",
    module="sigs.k8s.io/kwok",
    version="v0.8.0",
    binaries=(("kwok", "sigs.k8s.io/kwok/cmd/kwok"),),
    source="kwok's newest release; it plays kubelet for the nodes the tests create and Karpenter launches",
)

KARPENTER = GoComponent(
    name="karpenter",
    module="sigs.k8s.io/karpenter",
    version="v" + versions.KARPENTER.version,
    binaries=(("karpenter-kwok", "trainium-eks/e2e/modules/karpenter/launch"),),
    source="Karpenter's core at the stacks' Karpenter version, with its kwok cloud provider (the controller of "
    "aws/karpenter-provider-aws is the same core with the EC2 provider, which cannot run offline), started as "
    "sigs.k8s.io/karpenter/kwok starts it by our e2e/modules/karpenter/launch, which can fail launches with "
    "insufficient capacity as a test asks",
)

VOLCANO = GoComponent(
    name="volcano",
    module="volcano.sh/volcano",
    version="v" + versions.VOLCANO.version,
    binaries=(
        ("vc-scheduler", "volcano.sh/volcano/cmd/scheduler"),
        ("vc-controller-manager", "volcano.sh/volcano/cmd/controller-manager"),
        ("vc-webhook-manager", "volcano.sh/volcano/cmd/webhook-manager"),
    ),
    source="the stacks' Volcano chart version",
    patch=SourcePatch(
        module="volcano.sh/apis",
        version="v1.14.0",
        directory="pkg/apis/scheduling/v1beta1",
        file="_apis_compat.go",
        reason="Volcano v1.15.1 requires volcano.sh/apis v1.15.1, which proxy.golang.org refuses (403, asked "
        "2026-12-04 for v1.15.0, v1.15.1, v1.14.1, v1.14.2); v1.14.0 is served and lacks only the constant "
        "QueueAllocationGateKey that v1.15.1 uses (its value from Volcano's docs/design/"
        "scheduling-gates-queue-admission.md). API fields added in v1.15 are unknown to this build",
    ),
)

JOBSET = GoComponent(
    name="jobset",
    module="sigs.k8s.io/jobset",
    version="v0.12.0",
    binaries=(("jobset-controller", "sigs.k8s.io/jobset"),),
    source="the JobSet chart the Trainer chart 2.3.0 depends on (../shared/upstream/charts/jobset-0.12.0)",
)

TRAINER = GoComponent(
    name="trainer",
    module="github.com/kubeflow/trainer/v2",
    version="v" + versions.KUBEFLOW_TRAINER.version,
    binaries=(("trainer-controller-manager", "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"),),
    source="the stacks' Kubeflow Trainer chart version",
)

COMPONENTS: Tuple[GoComponent, ...] = (KUBERNETES, ETCD, KWOK, KARPENTER, VOLCANO, JOBSET, TRAINER)
"""Every component, in build order (the control plane first)."""

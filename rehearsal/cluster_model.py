"""A model of the clusters the stacks deploy to: their objects and Helm releases, changed the way kubectl, Helm and
the API server change them, as far as the rehearsal needs.

The model is plain JSON (:meth:`ClusterModel.to_json`), so the fake ``kubectl`` and ``helm`` commands
(:mod:`rehearsal.fake_commands`) load it, change it and write it back between the handler's commands.

What is modelled, and where it comes from (kubectl behaviour confirmed with the layer's kubectl 1.36.3 against a
request-logging API server, see :mod:`rehearsal.kubectl_probe`):

- objects keyed by (API group, kind, namespace, name), with their labels, their content (everything but
  ``metadata`` and ``status``) and whether they carry kubectl's last-applied annotation;
- ``kubectl create -f``: every object of the file is tried; an existing one fails with ``AlreadyExists``, the others
  are created; the exit status is 1 when any failed;
- ``kubectl apply -f``: creates or updates every object it can (labels by kubectl's three-way merge: labels of the
  previous apply that the new one drops are removed, labels set by others are kept); errors do not stop the
  other objects, but they stop pruning; ``--prune -l`` then deletes what :mod:`.kubectl_prune` describes;
- ``kubectl delete -f``: deletes every object the file names; a missing one fails with ``NotFound`` (the others
  are still deleted);
- the API server: a kind must be served (built in, or a custom resource whose definition a Helm release installed:
  "no matches for kind ... ensure CRDs are installed first"); a namespaced object needs its namespace
  (``namespaces "x" not found``); deleting a namespace deletes everything in it; a batch/v1 Job's
  ``spec.template`` is immutable (Kubernetes ``pkg/apis/batch/validation``: "field is immutable");
- the admission webhooks of Volcano and Kubeflow Trainer, once their release is installed: every rule of
  :mod:`.admission` on a new object (a Volcano Job's queue must exist and be open, a TrainJob's patch manager must be
  a domain-prefixed path, its runtime must exist, ...), and Volcano's rule for updates: an update may change nothing
  under ``spec`` but ``minAvailable``, ``maxRetry`` and the tasks' ``replicas``, ``minAvailable`` and ``maxRetry``
  (volcano-sh/volcano ``pkg/webhooks/admission/jobs/validate/admit_job.go`` ``validateJobUpdate``);
- what controllers report in an object's status, where a deploy reads it (``kubectl get -o jsonpath``): Volcano's
  queue controller opens every queue (``status.state: Open``) once Volcano runs (volcano-sh/volcano v1.15.1
  ``pkg/controllers/queue/state/open.go``); the model has no other status;
- Helm releases as records (chart, version, revision): ``helm upgrade --install`` of an existing release is an
  upgrade in place (revision + 1), otherwise an install; ``--create-namespace`` creates a missing namespace (not part
  of the release); ``helm uninstall`` removes the release and, for charts whose custom resource definitions are
  templates (:data:`CHART_APIS`), those definitions, which deletes every object of their kinds.

Not modelled here: pods, nodes and controllers (the scheduling rehearsal, :mod:`.scheduling_run`, runs those),
finalizers and the time anything takes.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from rehearsal.admission import ApiView, denials
from rehearsal.kubectl_prune import KUBECTL_DEFAULT_PRUNE_ALLOWLIST

WEBHOOKS: Mapping[Tuple[str, str], str] = {
    ("batch.volcano.sh", "Job"): "volcano",
    ("scheduling.volcano.sh", "Queue"): "volcano",
    ("scheduling.volcano.sh", "PodGroup"): "volcano",
    ("trainer.kubeflow.org", "TrainJob"): "kubeflow-trainer",
    ("trainer.kubeflow.org", "ClusterTrainingRuntime"): "kubeflow-trainer",
}
"""(API group, kind) -> the Helm release whose validating webhook admits it."""

BUILTIN_KINDS: Mapping[Tuple[str, str], bool] = {
    ("", "ConfigMap"): True,
    ("", "Endpoints"): True,
    ("", "Event"): True,
    ("", "LimitRange"): True,
    ("", "Namespace"): False,
    ("", "Node"): False,
    ("", "PersistentVolume"): False,
    ("", "PersistentVolumeClaim"): True,
    ("", "Pod"): True,
    ("", "ReplicationController"): True,
    ("", "ResourceQuota"): True,
    ("", "Secret"): True,
    ("", "Service"): True,
    ("", "ServiceAccount"): True,
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): False,
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"): False,
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"): False,
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): False,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): False,
    ("apps", "DaemonSet"): True,
    ("apps", "Deployment"): True,
    ("apps", "ReplicaSet"): True,
    ("apps", "StatefulSet"): True,
    ("autoscaling", "HorizontalPodAutoscaler"): True,
    ("batch", "CronJob"): True,
    ("batch", "Job"): True,
    ("coordination.k8s.io", "Lease"): True,
    ("discovery.k8s.io", "EndpointSlice"): True,
    ("networking.k8s.io", "Ingress"): True,
    ("networking.k8s.io", "NetworkPolicy"): True,
    ("policy", "PodDisruptionBudget"): True,
    ("rbac.authorization.k8s.io", "ClusterRole"): False,
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): False,
    ("rbac.authorization.k8s.io", "Role"): True,
    ("rbac.authorization.k8s.io", "RoleBinding"): True,
    ("scheduling.k8s.io", "PriorityClass"): False,
    ("storage.k8s.io", "StorageClass"): False,
}
"""(API group, kind) -> namespaced, for the built-in kinds of Kubernetes 1.34-1.36 the rehearsal may meet."""

SYSTEM_NAMESPACES: Tuple[str, ...] = ("default", "kube-node-lease", "kube-public", "kube-system")
"""Namespaces every new cluster has."""


@dataclass(frozen=True)
class ChartApis:
    """What a Helm chart installs that the model needs: the custom resources it serves and the objects it creates.

    :param kinds: (API group, kind) -> namespaced, of every custom resource definition of the chart.
    :param objects: (apiVersion, kind, name) of cluster-scoped objects the chart creates.
    :param admission: Name of the admission rules the chart's webhooks enforce (``"volcano"``), or None.
    :param source: Where the facts come from.
    """

    kinds: Mapping[Tuple[str, str], bool]
    objects: Tuple[Tuple[str, str, str], ...]
    admission: Optional[str]
    source: str


CHART_APIS: Mapping[str, ChartApis] = {
    "volcano": ChartApis(
        kinds={
            ("batch.volcano.sh", "Job"): True,
            ("batch.volcano.sh", "CronJob"): True,
            ("bus.volcano.sh", "Command"): True,
            ("flow.volcano.sh", "JobFlow"): True,
            ("flow.volcano.sh", "JobTemplate"): True,
            ("nodeinfo.volcano.sh", "Numatopology"): False,
            ("scheduling.volcano.sh", "PodGroup"): True,
            ("scheduling.volcano.sh", "Queue"): False,
            ("topology.volcano.sh", "HyperNode"): False,
        },
        objects=(("scheduling.volcano.sh/v1beta1", "Queue", "default"),),
        admission="volcano",
        source="volcano-sh/volcano installer/helm/chart/volcano: the definitions are templates "
        "(templates/batch_v1alpha1_job.yaml renders crd/<version>/batch.volcano.sh_jobs.yaml, commit 5a81a279), so "
        "they belong to the release; templates/default-queue.yaml creates the queue 'default'",
    ),
    "kubeflow-trainer": ChartApis(
        kinds={
            ("trainer.kubeflow.org", "TrainJob"): True,
            ("trainer.kubeflow.org", "TrainingRuntime"): True,
            ("trainer.kubeflow.org", "ClusterTrainingRuntime"): False,
        },
        objects=(),
        admission="kubeflow-trainer",
        source="kubeflow/trainer tag v2.3.0 charts/kubeflow-trainer/templates/crd/trainer.kubeflow.org_trainjobs.yaml, "
        "_trainingruntimes.yaml and _clustertrainingruntimes.yaml: the definitions are templates, so they belong to "
        "the release; the runtimes the chart could create are off (runtimes.defaultEnabled: false). The JobSet "
        "subchart's definitions are left out: the library applies no JobSet, and its webhook (which checks that a "
        "TrainJob's runtime exists) is not modelled",
    ),
    "karpenter-crd": ChartApis(
        kinds={
            ("karpenter.sh", "NodePool"): False,
            ("karpenter.sh", "NodeClaim"): False,
            ("karpenter.sh", "NodeOverlay"): False,
            ("karpenter.k8s.aws", "EC2NodeClass"): False,
            ("autoscaling.x-k8s.io", "CapacityBuffer"): True,
        },
        objects=(),
        admission=None,
        source="aws/karpenter-provider-aws tag v1.14.1 charts/karpenter-crd/templates/*.yaml: the five definitions "
        "are templates of the chart (scope Cluster, CapacityBuffer Namespaced); Karpenter 1.14 has no webhooks",
    ),
    "karpenter": ChartApis(
        kinds={},
        objects=(),
        admission=None,
        source="aws/karpenter-provider-aws tag v1.14.1 charts/karpenter: installed with --skip-crds (its crds/ folder "
        "is left to the karpenter-crd release), no webhook and no cluster-scoped object the jobs need",
    ),
}
"""Chart name -> what it serves, for the charts the library installs."""


def split_api_version(api_version: str) -> Tuple[str, str]:
    """``"apps/v1"`` -> ``("apps", "v1")``; ``"v1"`` -> ``("", "v1")``."""
    group, _, version = api_version.rpartition("/")
    return group, version


def resource_name(group: str, kind: str, name: str) -> str:
    """How kubectl names an object in its output: ``job.batch.volcano.sh/x``, ``configmap/y``."""
    return f"{kind.lower()}{'.' + group if group else ''}/{name}"


def parse_selector(selector: str) -> List[Tuple[str, str, Optional[str]]]:
    """A label selector of equality requirements as (operator, key, value): ``exists``, ``!exists``, ``=``, ``!=``.

    Raises ValueError on set-based requirements (``in``, ``notin``), which the rehearsal does not need.
    """
    requirements: List[Tuple[str, str, Optional[str]]] = []
    for part in (p.strip() for p in selector.split(",")):
        if not part:
            continue
        if " in " in part or " notin " in part or "(" in part:
            raise ValueError(f"set-based label selectors are not modelled: {part!r}")
        if "!=" in part:
            key, value = part.split("!=", 1)
            requirements.append(("!=", key.strip(), value.strip()))
        elif "==" in part:
            key, value = part.split("==", 1)
            requirements.append(("=", key.strip(), value.strip()))
        elif "=" in part:
            key, value = part.split("=", 1)
            requirements.append(("=", key.strip(), value.strip()))
        elif part.startswith("!"):
            requirements.append(("!exists", part[1:].strip(), None))
        else:
            requirements.append(("exists", part, None))
    return requirements


def selector_matches(requirements: Sequence[Tuple[str, str, Optional[str]]], labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` satisfy every requirement of :func:`parse_selector`."""
    for operator, key, value in requirements:
        if operator == "exists" and key not in labels:
            return False
        if operator == "!exists" and key in labels:
            return False
        if operator == "=" and labels.get(key) != value:
            return False
        if operator == "!=" and labels.get(key) == value:
            return False
    return True


@dataclass
class KubeObject:
    """One object in a cluster.

    :param api_version: As applied (``batch.volcano.sh/v1alpha1``).
    :param kind: Kind.
    :param namespace: Namespace, ``""`` for cluster-scoped objects.
    :param name: Name.
    :param labels: Current labels.
    :param applied_labels: Labels of the last ``kubectl apply`` (kubectl's last-applied configuration), for the
        three-way merge of the next one.
    :param content: Everything but ``metadata`` and ``status``.
    :param last_applied: Whether the object carries kubectl's last-applied annotation (only those are pruned).
    :param uid: A unique id within the model.
    :param origin: What created it (``kubectl apply``, ``kubectl create``, ``helm release volcano-system/volcano``,
        ``EKS``).
    """

    api_version: str
    kind: str
    namespace: str
    name: str
    labels: Dict[str, str]
    applied_labels: Dict[str, str]
    content: Dict[str, Any]
    last_applied: bool
    uid: str
    origin: str

    @property
    def group(self) -> str:
        """The object's API group (``""`` for the core group)."""
        return split_api_version(self.api_version)[0]

    @property
    def key(self) -> Tuple[str, str, str, str]:
        """(group, kind, namespace, name): what identifies the object in the API server."""
        return (self.group, self.kind, self.namespace, self.name)

    def describe(self) -> str:
        """``Kind namespace/name`` or ``Kind name``."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.api_version} {self.kind} {where}"


@dataclass
class HelmRelease:
    """A Helm release: ``namespace/name`` at ``revision``, of ``chart`` at ``version``."""

    name: str
    namespace: str
    chart: str
    version: str
    revision: int
    values: str


@dataclass(frozen=True)
class Effect:
    """One change a command made: ``op`` is created, configured, unchanged, pruned, deleted, installed, upgraded or
    uninstalled; ``target`` names the object or release."""

    op: str
    target: str


@dataclass
class Outcome:
    """What a command did: its effects, its output lines and its errors (kubectl's wording)."""

    effects: List[Effect] = field(default_factory=list)
    output: List[str] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """1 when any error occurred, as kubectl and Helm exit."""
        return 1 if self.errors else 0


@dataclass
class Cluster:
    """One EKS cluster: its objects, Helm releases and the kinds its Helm releases serve."""

    name: str
    objects: Dict[Tuple[str, str, str, str], KubeObject] = field(default_factory=dict)
    releases: Dict[Tuple[str, str], HelmRelease] = field(default_factory=dict)
    uid_counter: int = 0

    @classmethod
    def new(cls, name: str) -> "Cluster":
        """A new cluster, with the namespaces every cluster has."""
        cluster = cls(name)
        for namespace in SYSTEM_NAMESPACES:
            cluster._put(
                KubeObject("v1", "Namespace", "", namespace, {}, {}, {}, last_applied=False, uid="", origin="EKS")
            )
        return cluster

    # -- API server ---------------------------------------------------------------------------------------------

    def served(self, group: str, kind: str) -> Optional[bool]:
        """Whether (group, kind) is namespaced, or None when the cluster does not serve it."""
        if (group, kind) in BUILTIN_KINDS:
            return BUILTIN_KINDS[(group, kind)]
        for release in self.releases.values():
            apis = CHART_APIS.get(release.chart)
            if apis and (group, kind) in apis.kinds:
                return apis.kinds[(group, kind)]
        return None

    def admission(self) -> List[str]:
        """Names of the admission rules installed by Helm releases."""
        found = []
        for release in self.releases.values():
            apis = CHART_APIS.get(release.chart)
            if apis and apis.admission:
                found.append(apis.admission)
        return found

    def _put(self, obj: KubeObject) -> None:
        if not obj.uid:
            self.uid_counter += 1
            obj.uid = f"uid-{self.uid_counter}"
        self.objects[obj.key] = obj

    def _delete(self, key: Tuple[str, str, str, str], op: str, outcome: Outcome) -> None:
        obj = self.objects.pop(key)
        outcome.effects.append(Effect(op, obj.describe()))
        outcome.output.append(f"{resource_name(obj.group, obj.kind, obj.name)} {op}")
        if obj.group == "" and obj.kind == "Namespace":
            for other in [k for k in self.objects if k[2] == obj.name]:
                inner = self.objects.pop(other)
                outcome.effects.append(Effect("deleted with its namespace", inner.describe()))

    def objects_of(self, group: str, kind: str, namespace: Optional[str] = None) -> List[KubeObject]:
        """Objects of (group, kind), in ``namespace`` when given."""
        return [
            obj
            for (g, k, ns, _), obj in sorted(self.objects.items())
            if g == group and k == kind and (namespace is None or ns == namespace)
        ]

    def find(self, kind: str, name: str, namespace: str = "", group: Optional[str] = None) -> Optional[KubeObject]:
        """The object of ``kind`` named ``name`` in ``namespace`` (any group unless ``group`` is given)."""
        for (g, k, ns, n), obj in self.objects.items():
            if k == kind and n == name and ns == namespace and (group is None or g == group):
                return obj
        return None

    # -- objects from a manifest ----------------------------------------------------------------------------------

    def _identify(self, manifest: Mapping[str, Any], file_name: str) -> Tuple[Optional[KubeObject], str]:
        """The object a manifest describes, or (None, error) when its kind is not served."""
        api_version = str(manifest.get("apiVersion", ""))
        kind = str(manifest.get("kind", ""))
        metadata = manifest.get("metadata") or {}
        name = str(metadata.get("name", ""))
        group, version = split_api_version(api_version)
        namespaced = self.served(group, kind)
        if namespaced is None:
            namespace = metadata.get("namespace", "")
            return None, (
                f'error: resource mapping not found for name: "{name}" namespace: "{namespace}" from "{file_name}": '
                f'no matches for kind "{kind}" in version "{api_version}"\nensure CRDs are installed first'
            )
        namespace = str(metadata.get("namespace") or "default") if namespaced else ""
        labels = {str(k): str(v) for k, v in (metadata.get("labels") or {}).items()}
        content = json.loads(
            json.dumps({k: v for k, v in manifest.items() if k not in ("apiVersion", "kind", "metadata", "status")})
        )
        return KubeObject(api_version, kind, namespace, name, labels, {}, content, False, "", ""), ""

    def _namespace_error(self, obj: KubeObject, verb: str, file_name: str) -> Optional[str]:
        if obj.namespace and ("", "Namespace", "", obj.namespace) not in self.objects:
            return (
                f'Error from server (NotFound): error when {verb} "{file_name}": namespaces "{obj.namespace}" not found'
            )
        return None

    def _admission_error(self, new: KubeObject, old: Optional[KubeObject], file_name: str) -> Optional[str]:
        verb = "creating" if old is None else "applying patch"
        if new.group == "batch" and new.kind == "Job" and old is not None:
            if (old.content.get("spec") or {}).get("template") != (new.content.get("spec") or {}).get("template"):
                return (
                    f'The Job "{new.name}" is invalid: spec.template: Invalid value: ...: field is immutable '
                    f'(error when {verb} "{file_name}")'
                )
        installed = self.admission()
        webhook = WEBHOOKS.get((new.group, new.kind))
        if old is None and webhook in installed:
            found = denials(self.manifest(new), self.api_view())
            if found:
                return (
                    f'Error from server: error when {verb} "{file_name}": admission webhook of {webhook} denied the '
                    f"request: {'; '.join(found)}"
                )
        if new.group == "batch.volcano.sh" and new.kind == "Job" and "volcano" in installed and old is not None:
            spec = new.content.get("spec") or {}
            if _volcano_fixed_spec(old.content.get("spec") or {}) != _volcano_fixed_spec(spec):
                return (
                    f'Error from server: error when {verb} "{file_name}": admission webhook "validatejob.volcano.sh" '
                    "denied the request: job updates may not change fields other than `minAvailable`, `maxRetry`, "
                    "`tasks[*].replicas under spec`, `tasks[*].maxRetry under spec`"
                )
        return None

    # -- kubectl ----------------------------------------------------------------------------------------------------

    def create(self, manifests: Sequence[Mapping[str, Any]], *, save_config: bool, file_name: str) -> Outcome:
        """``kubectl create -f`` (``--save-config`` adds the last-applied annotation)."""
        outcome = Outcome()
        for manifest in manifests:
            obj, error = self._identify(manifest, file_name)
            if obj is None:
                outcome.errors.append(error)
                continue
            if obj.key in self.objects:
                outcome.errors.append(
                    f'Error from server (AlreadyExists): error when creating "{file_name}": '
                    f'{_plural(obj)} "{obj.name}" already exists'
                )
                continue
            error = self._namespace_error(obj, "creating", file_name) or self._admission_error(obj, None, file_name)
            if error:
                outcome.errors.append(error)
                continue
            obj.last_applied = save_config
            obj.applied_labels = dict(obj.labels) if save_config else {}
            obj.origin = "kubectl create"
            self._put(obj)
            outcome.effects.append(Effect("created", obj.describe()))
            outcome.output.append(f"{resource_name(obj.group, obj.kind, obj.name)} created")
        return outcome

    def apply(self, manifests: Sequence[Mapping[str, Any]], *, selector: Optional[str], file_name: str) -> Outcome:
        """``kubectl apply -f`` (client-side), with ``--prune -l selector`` when ``selector`` is given."""
        outcome = Outcome()
        visited_uids: set = set()
        visited_namespaces: set = set()
        for manifest in manifests:
            obj, error = self._identify(manifest, file_name)
            if obj is None:
                outcome.errors.append(error)
                continue
            if obj.namespace:
                visited_namespaces.add(obj.namespace)
            old = self.objects.get(obj.key)
            error = self._namespace_error(obj, "creating", file_name) or self._admission_error(obj, old, file_name)
            if error:
                outcome.errors.append(error)
                continue
            name = resource_name(obj.group, obj.kind, obj.name)
            if old is None:
                obj.last_applied, obj.applied_labels, obj.origin = True, dict(obj.labels), "kubectl apply"
                self._put(obj)
                outcome.effects.append(Effect("created", obj.describe()))
                outcome.output.append(f"{name} created")
                visited_uids.add(obj.uid)
                continue
            dropped = set(old.applied_labels) - set(obj.labels)
            labels = {k: v for k, v in old.labels.items() if k not in dropped}
            labels.update(obj.labels)
            changed = labels != old.labels or obj.content != old.content or obj.api_version != old.api_version
            old.labels, old.applied_labels, old.content = labels, dict(obj.labels), obj.content
            old.api_version, old.last_applied = obj.api_version, True
            op = "configured" if changed else "unchanged"
            outcome.effects.append(Effect(op, old.describe()))
            outcome.output.append(f"{name} {op}")
            visited_uids.add(old.uid)
        if selector is not None and not outcome.errors:
            self._prune(parse_selector(selector), visited_uids, visited_namespaces, outcome)
        return outcome

    def _prune(self, requirements, visited_uids: set, visited_namespaces: set, outcome: Outcome) -> None:
        """kubectl's ``pruner.pruneAll``: the namespaced kinds of the allow-list in every visited namespace, then
        the non-namespaced kinds across the cluster."""
        passes = [
            (ns, g, k)
            for ns in sorted(visited_namespaces)
            for g, _, k, namespaced in KUBECTL_DEFAULT_PRUNE_ALLOWLIST
            if namespaced
        ]
        passes.extend(("", g, k) for g, _, k, namespaced in KUBECTL_DEFAULT_PRUNE_ALLOWLIST if not namespaced)
        for namespace, group, kind in passes:
            for obj in self.objects_of(group, kind, namespace):
                if obj.key not in self.objects:
                    continue
                if obj.last_applied and obj.uid not in visited_uids and selector_matches(requirements, obj.labels):
                    self._delete(obj.key, "pruned", outcome)

    def delete(self, manifests: Sequence[Mapping[str, Any]], *, file_name: str) -> Outcome:
        """``kubectl delete -f``."""
        outcome = Outcome()
        for manifest in manifests:
            obj, error = self._identify(manifest, file_name)
            if obj is None:
                outcome.errors.append(error)
                continue
            if obj.key not in self.objects:
                outcome.errors.append(
                    f'Error from server (NotFound): error when deleting "{file_name}": '
                    f'{_plural(obj)} "{obj.name}" not found'
                )
                continue
            self._delete(obj.key, "deleted", outcome)
        return outcome

    def manifest(self, obj: KubeObject) -> Dict[str, Any]:
        """``obj`` as a manifest (with its status)."""
        metadata = {"name": obj.name, "labels": dict(obj.labels)}
        if obj.namespace:
            metadata["namespace"] = obj.namespace
        return {"apiVersion": obj.api_version, "kind": obj.kind, "metadata": metadata, **obj.content}

    def api_view(self) -> ApiView:
        """What the webhooks look up: queues and their state, runtimes, priority classes."""
        view = ApiView()
        for obj in self.objects.values():
            if obj.group == "scheduling.volcano.sh" and obj.kind == "Queue":
                view.queues[obj.name] = self.status(obj).get("state", "")
            elif obj.kind == "ClusterTrainingRuntime":
                view.runtimes[obj.name] = self.manifest(obj)
            elif obj.kind == "PriorityClass":
                view.priority_classes.add(obj.name)
        if "volcano" in self.admission():
            view.queues.setdefault("default", "Open")
        return view

    def status(self, obj: KubeObject) -> Dict[str, Any]:
        """What controllers report in ``obj``'s status (see the module's docstring)."""
        if obj.group == "scheduling.volcano.sh" and obj.kind == "Queue" and "volcano" in self.admission():
            return {"state": "Open"}
        return {}

    def get(self, resource_type: str, name: str, namespace: str, jsonpath: str) -> Outcome:
        """``kubectl get <type> <name> -n <namespace> -o=jsonpath=<jsonpath>``: the value at a ``{.a.b}`` path (kubectl
        prints the template's other characters as they are, the quotes of the handler's argument included)."""
        outcome = Outcome()
        kind = resource_type.split(".", 1)[0]
        group = resource_type.split(".", 1)[1] if "." in resource_type else None
        found = None
        for obj in self.objects.values():
            if plural(obj.kind) == kind and obj.name == name and (group is None or obj.group == group):
                if not obj.namespace or obj.namespace == namespace or not namespace:
                    found = obj
        if found is None:
            outcome.errors.append(f'Error from server (NotFound): {resource_type} "{name}" not found')
            return outcome
        document: Dict[str, Any] = {**found.content, "metadata": {"name": found.name}, "status": self.status(found)}
        start, end = jsonpath.index("{"), jsonpath.rindex("}")
        value: Any = document
        for part in jsonpath[start + 1 : end].strip(".").split("."):
            value = value.get(part, "") if isinstance(value, dict) else ""
        outcome.output.append(jsonpath[:start] + ("" if value is None else str(value)) + jsonpath[end + 1 :])
        return outcome

    # -- Helm -------------------------------------------------------------------------------------------------------

    def helm_upgrade_install(
        self, release: str, *, namespace: str, chart: str, version: str, values: str, create_namespace: bool
    ) -> Outcome:
        """``helm upgrade <release> <chart> --install``: an upgrade in place of an existing release, else an install."""
        outcome = Outcome()
        target = f"{namespace}/{release}"
        if ("", "Namespace", "", namespace) not in self.objects:
            if not create_namespace:
                outcome.errors.append(f'Error: create: failed to create: namespaces "{namespace}" not found')
                return outcome
            self._put(KubeObject("v1", "Namespace", "", namespace, {}, {}, {}, False, "", "helm --create-namespace"))
            outcome.effects.append(Effect("created", f"v1 Namespace {namespace}"))
        existing = self.releases.get((namespace, release))
        if existing is not None:
            existing.chart, existing.version, existing.values = chart, version, values
            existing.revision += 1
            outcome.effects.append(Effect("upgraded", f"release {target} to revision {existing.revision}"))
            outcome.output.append(f'Release "{release}" has been upgraded. Happy Helming!')
            return outcome
        self.releases[(namespace, release)] = HelmRelease(release, namespace, chart, version, 1, values)
        for api_version, kind, name in CHART_APIS[chart].objects if chart in CHART_APIS else ():
            group = split_api_version(api_version)[0]
            if (group, kind, "", name) not in self.objects:
                self._put(KubeObject(api_version, kind, "", name, {}, {}, {}, False, "", f"helm release {target}"))
        outcome.effects.append(Effect("installed", f"release {target} (chart {chart} {version})"))
        outcome.output.append(f'Release "{release}" does not exist. Installing it now.')
        return outcome

    def helm_uninstall(self, release: str, *, namespace: str) -> Outcome:
        """``helm uninstall <release> --namespace <namespace>``."""
        outcome = Outcome()
        existing = self.releases.pop((namespace, release), None)
        if existing is None:
            outcome.errors.append(f"Error: uninstall: Release not loaded: {release}: release: not found")
            return outcome
        outcome.effects.append(Effect("uninstalled", f"release {namespace}/{release}"))
        outcome.output.append(f'release "{release}" uninstalled')
        apis = CHART_APIS.get(existing.chart)
        for group, kind in apis.kinds if apis else ():
            if self.served(group, kind) is not None:
                continue
            for obj in [o for o in self.objects.values() if o.group == group and o.kind == kind]:
                self.objects.pop(obj.key)
                outcome.effects.append(Effect("deleted with its definition", obj.describe()))
        return outcome

    # -- JSON -------------------------------------------------------------------------------------------------------

    def to_json(self) -> Dict[str, Any]:
        """The cluster as JSON."""
        return {
            "name": self.name,
            "objects": [asdict(obj) for _, obj in sorted(self.objects.items())],
            "releases": [asdict(rel) for _, rel in sorted(self.releases.items())],
            "uid_counter": self.uid_counter,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Cluster":
        """The cluster of :meth:`to_json`."""
        cluster = cls(data["name"], uid_counter=data["uid_counter"])
        for item in data["objects"]:
            obj = KubeObject(**item)
            cluster.objects[obj.key] = obj
        for item in data["releases"]:
            rel = HelmRelease(**item)
            cluster.releases[(rel.namespace, rel.name)] = rel
        return cluster


@dataclass
class ClusterModel:
    """Every cluster the rehearsal knows, by name (the EKS cluster's physical id)."""

    clusters: Dict[str, Cluster] = field(default_factory=dict)

    def create_cluster(self, name: str) -> Cluster:
        """A new, empty cluster (CloudFormation created an ``AWS::EKS::Cluster``)."""
        self.clusters[name] = Cluster.new(name)
        return self.clusters[name]

    def delete_cluster(self, name: str) -> None:
        """CloudFormation deleted the cluster: everything in it is gone."""
        self.clusters.pop(name, None)

    def to_json(self) -> Dict[str, Any]:
        """The model as JSON."""
        return {"clusters": [cluster.to_json() for _, cluster in sorted(self.clusters.items())]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ClusterModel":
        """The model of :meth:`to_json`."""
        return cls({item["name"]: Cluster.from_json(item) for item in data["clusters"]})

    def save(self, path: Path) -> None:
        """Write the model to ``path``."""
        path.write_text(json.dumps(self.to_json()))

    @classmethod
    def load(cls, path: Path) -> "ClusterModel":
        """The model written to ``path``."""
        return cls.from_json(json.loads(path.read_text()))

    def copy(self) -> "ClusterModel":
        """A deep copy."""
        return ClusterModel.from_json(json.loads(json.dumps(self.to_json())))

    def all_objects(self) -> Iterable[Tuple[str, KubeObject]]:
        """(cluster name, object) for every object of every cluster, sorted."""
        for name, cluster in sorted(self.clusters.items()):
            for _, obj in sorted(cluster.objects.items()):
                yield name, obj


def plural(kind: str) -> str:
    """The resource name of a kind, as the API server spells it (``networkpolicies``, ``ingresses``, ``endpoints``)."""
    name = kind.lower()
    if name.endswith("s") and name != "endpoints" or name.endswith("ch"):
        return name + "es"
    if name.endswith("y") and not name.endswith("ey"):
        return name[:-1] + "ies"
    return name if name == "endpoints" else name + "s"


def _plural(obj: KubeObject) -> str:
    return f"{plural(obj.kind)}.{obj.group}" if obj.group else plural(obj.kind)


def _volcano_fixed_spec(spec: Mapping[str, Any]) -> Dict[str, Any]:
    """A Volcano Job's spec without the fields Volcano's webhook lets an update change."""
    fixed = {k: v for k, v in spec.items() if k not in ("minAvailable", "maxRetry", "priorityClassName")}
    fixed["tasks"] = [
        {k: v for k, v in task.items() if k not in ("replicas", "minAvailable", "maxRetry")}
        for task in spec.get("tasks") or []
    ]
    return fixed

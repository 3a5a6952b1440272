"""Karpenter's kwok cloud provider in place of the AWS provider: the instance types it launches, the NodePools it
reads, and the node classes it needs.

Karpenter's core (``sigs.k8s.io/karpenter`` v1.14.1) runs for real with its kwok provider (``kwok/cloudprovider``):
it batches the pods the scheduler marks unschedulable, simulates their scheduling on the NodePools' instance types,
creates NodeClaims, "launches" a Node for each (kwok then runs it), registers and initializes it, disrupts and
terminates it. What the AWS provider does instead (EC2 Fleet, AMIs, subnets, instance profiles: the
``EC2NodeClass`` reconciliation) has no offline stand-in and is replaced here:

- **Instance types** (:func:`instance_types_document`, the provider's ``INSTANCE_TYPES_FILE_PATH``): every type of
  the library's catalog, with the capacity the AWS provider reports (its vCPUs; its memory less the chart's
  ``settings.vmMemoryOverheadPercent``, 7.5 %: ``../shared/upstream/charts/karpenter-1.14.1/values.yaml``), which the
  NodePools' limits are checked against, the devices the Neuron, EFA and NVIDIA device plugins advertise, and one
  on-demand offering per AZ ID of each priced region that the catalog does not know to lack the type, at its
  on-demand price. Pods see the provider's allocatable: the capacity less a fixed 100m CPU and 10Mi
  (``helpers.go`` ``newInstanceType``), more than an EKS node offers pods (``rehearsal.node_capacity``).
- **NodePools** (:func:`for_kwok`): the stacks' own, as the kubectl handler applies them, with ``nodeClassRef``
  naming a ``KWOKNodeClass`` of the same name (applied with it) instead of the ``EC2NodeClass``; requirements,
  taints, labels, limits and disruption are the stack's.
- **The node-class controller** (:func:`reconcile_node_classes`): the AWS provider's sets ``Ready`` once AMIs,
  subnets and security groups resolve, and holds a deleted ``EC2NodeClass`` until no NodeClaim uses it; the kwok
  provider has neither, and Karpenter provisions only for NodePools whose node class is ready
  (``pkg/controllers/nodepool/readiness``), so the harness does both while Karpenter runs.
"""

from __future__ import annotations

import datetime
import json
from typing import Any, Dict, List, Mapping, Optional

import yaml

from e2e.api import Api
from e2e.build import module_source
from e2e.processes import wait_for
from rehearsal.node_capacity import allocatable
from trainium_eks.core.conventions import EFA_RESOURCE, GPU_RESOURCE, NEURON_CORE_RESOURCE, NEURON_DEVICE_RESOURCE
from trainium_eks.facts.catalog import INSTANCE_CATALOG, Offering, offering
from trainium_eks.facts.control_plane import KARPENTER
from trainium_eks.facts.pricing import PRICING_REGIONS, hourly_price
from trainium_eks.facts.regions import AZ_IDS_BY_REGION

NODE_CLASS_API = "karpenter.kwok.sh/v1alpha1"
NODE_CLASS_KIND = "KWOKNodeClass"
NODE_CLASS_CRD = "kwok/apis/crds/karpenter.kwok.sh_kwoknodeclasses.yaml"
"""The kwok provider's node class CRD, a file of Karpenter's module (in the module cache, where its build put it)."""
NODE_CLASS_CRD_NAME = "kwoknodeclasses.karpenter.kwok.sh"
EC2_NODE_CLASS_API = "karpenter.k8s.aws/v1"
TERMINATION_FINALIZER = "karpenter.k8s.aws/termination"
"""The AWS provider's finalizer on an ``EC2NodeClass`` (``pkg/apis/v1``)."""

LAUNCH_FAILURES_FILE = "launch-failures.json"
"""A file of the test cluster's folder that makes Karpenter's launches fail with insufficient capacity, as EC2 does
when it has no instance of a type in the zone: instance type -> ``{"after": n, "count": m}``, the launches of that
type after the first n fail, m of them (read at each launch by ``e2e/modules/karpenter/launch``)."""

VM_MEMORY_OVERHEAD = 0.075
"""The AWS provider's ``vmMemoryOverheadPercent`` (the chart's default, which the stacks keep): the share of an
instance's memory it does not count as the node's capacity."""

ZONE_ID_LABEL = "topology.k8s.aws/zone-id"
ZONE_LABEL = "topology.kubernetes.io/zone"
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"


def zone_name(region: str, az_id: str) -> str:
    """The AZ name the harness's account gives ``az_id``: the region's IDs in order, lettered a, b, c... (AZ names
    map to IDs differently in every account; only the ID is the same everywhere, and the stacks use only IDs)."""
    return region + "abcdefgh"[AZ_IDS_BY_REGION[region].index(az_id)]


def instance_types_document() -> List[Dict[str, Any]]:
    """The kwok provider's instance types file (a list of its ``InstanceTypeOptions``)."""
    document = []
    for name, facts in INSTANCE_CATALOG.items():
        offerings = []
        for region in PRICING_REGIONS:
            price = hourly_price(name, region)
            if price is None:
                continue
            for az_id in AZ_IDS_BY_REGION[region]:
                if offering(facts, region, az_id) is Offering.NOT_OFFERED:
                    continue
                offerings.append(
                    {
                        "Price": price,
                        "Available": True,
                        "Requirements": [
                            {"key": CAPACITY_TYPE_LABEL, "operator": "In", "values": ["on-demand"]},
                            {"key": ZONE_LABEL, "operator": "In", "values": [zone_name(region, az_id)]},
                            {"key": ZONE_ID_LABEL, "operator": "In", "values": [az_id]},
                        ],
                    }
                )
        if not offerings:
            continue
        resources = {
            "cpu": str(facts.vcpus),
            "memory": f"{int(facts.memory_gib * 1024 * (1 - VM_MEMORY_OVERHEAD))}Mi",
            "pods": str(allocatable(name)["pods"]),
        }
        for resource, count in (
            (NEURON_DEVICE_RESOURCE, facts.neuron_devices),
            (NEURON_CORE_RESOURCE, facts.neuron_cores),
            (EFA_RESOURCE, facts.efa_interfaces),
            (GPU_RESOURCE, facts.gpus),
        ):
            if count:
                resources[resource] = str(count)
        document.append(
            {
                "name": name,
                "offerings": offerings,
                "architecture": "amd64",
                "operatingSystems": ["linux"],
                "resources": resources,
            }
        )
    return document


def for_kwok(manifest: str) -> str:
    """A kubectl handler's ``Manifest`` (a JSON list of objects) with each NodePool's ``nodeClassRef`` naming a
    ``KWOKNodeClass`` of the same name, applied right after it; every other object as it is."""
    objects = json.loads(manifest)
    out: List[Dict[str, Any]] = []
    for obj in objects:
        out.append(obj)
        if obj.get("kind") == "NodePool" and str(obj.get("apiVersion", "")).startswith("karpenter.sh/"):
            ref = obj["spec"]["template"]["spec"]["nodeClassRef"]
            ref.update({"group": NODE_CLASS_API.split("/")[0], "kind": NODE_CLASS_KIND})
            out.append({"apiVersion": NODE_CLASS_API, "kind": NODE_CLASS_KIND, "metadata": {"name": ref["name"]}})
    return json.dumps(out)


def uses_node_pools(manifest: str) -> bool:
    """Whether a handler's manifest holds a NodePool."""
    return any(obj.get("kind") == "NodePool" for obj in json.loads(manifest))


def install_node_class_crd(api: Api) -> None:
    """Apply the ``KWOKNodeClass`` CRD (from Karpenter's module) and wait until the API server serves it."""
    crd = yaml.safe_load((module_source(KARPENTER) / NODE_CLASS_CRD).read_text())
    api.apply(crd)
    wait_for("the KWOKNodeClass CRD established", lambda: _established(_node_class_crd(api)), timeout=60)


def _node_class_crd(api: Api) -> Optional[Dict[str, Any]]:
    return api.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", NODE_CLASS_CRD_NAME)


def reconcile_node_classes(api: Api) -> None:
    """What the AWS provider's node-class controller does while Karpenter runs (aws/karpenter-provider-aws v1.14.1
    ``pkg/controllers/nodeclass/controller.go``), for the parts the stacks' lifecycle depends on:

    - every ``EC2NodeClass`` carries the finalizer ``karpenter.k8s.aws/termination`` (``Reconcile`` adds it), and one
      being deleted keeps it while a NodeClaim still uses it (``finalize`` lists the NodeClaims whose
      ``nodeClassRef`` names the class and requeues while there are any; here: its ``KWOKNodeClass`` of the same
      name), so that ``kubectl delete`` of the class returns only once its nodes are gone;
    - its ``KWOKNodeClass`` stand-in is ``Ready`` (the AWS controller's readiness once AMIs, subnets and security
      groups resolve).

    Called only while a Karpenter controller runs: once its chart is gone, nothing removes the finalizer, as in a
    cluster.
    """
    if not _established(_node_class_crd(api)):  # no stack with Karpenter was deployed
        return
    used = {(c["spec"].get("nodeClassRef") or {}).get("name") for c in api.list("karpenter.sh/v1", "NodeClaim")}
    for node_class in api.list(EC2_NODE_CLASS_API, "EC2NodeClass"):
        meta = node_class["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if meta.get("deletionTimestamp"):
            if TERMINATION_FINALIZER in finalizers and meta["name"] not in used:
                finalizers.remove(TERMINATION_FINALIZER)
            else:
                continue
        elif TERMINATION_FINALIZER not in finalizers:
            finalizers.append(TERMINATION_FINALIZER)
        else:
            continue
        patch = {"metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}}
        api.patch(EC2_NODE_CLASS_API, "EC2NodeClass", meta["name"], patch)
    for node_class in api.list(NODE_CLASS_API, NODE_CLASS_KIND):
        conditions = (node_class.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            continue
        ready = {
            "type": "Ready",
            "status": "True",
            "reason": "Ready",
            "message": "",
            "observedGeneration": node_class["metadata"].get("generation", 1),
            "lastTransitionTime": _now(),
        }
        api.patch(
            NODE_CLASS_API,
            NODE_CLASS_KIND,
            node_class["metadata"]["name"],
            {"status": {"conditions": [ready]}},
            subresource="status",
        )


def _established(crd: Optional[Mapping[str, Any]]) -> bool:
    conditions = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

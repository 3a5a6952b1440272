"""What the stacks' CSI add-ons register in a cluster, as the Kubernetes objects that scheduling reads: the
``CSIDriver`` each add-on's chart installs, and on every node the ``CSINode`` entry its node plugin registers through
kubelet (kwok runs no node plugins). Sources: kubernetes-sigs/aws-fsx-csi-driver chart 1.17.0 and
kubernetes-sigs/aws-efs-csi-driver chart 4.4.1 ``templates/csidriver.yaml`` (``attachRequired: false``); kubelet's
plugin registration writes the driver, its node id and (when the plugin reports one) its volume limit into the
node's ``CSINode`` (``pkg/volume/csi/nodeinfomanager``).
"""

from __future__ import annotations

import threading
from typing import Dict, Set

from e2e.api import Api

ADDON_DRIVERS: Dict[str, str] = {"aws-fsx-csi-driver": "fsx.csi.aws.com", "aws-efs-csi-driver": "efs.csi.aws.com"}
"""EKS add-on name -> the CSI driver it installs."""


class CsiRegistrations:
    """The CSI drivers installed so far, registered on every node (:meth:`reconcile`, called by the component
    runner's loop)."""

    def __init__(self) -> None:
        self.drivers: Set[str] = set()
        self._lock = threading.Lock()

    def install(self, api: Api, addon: str) -> str:
        """The add-on's ``CSIDriver`` (if it installs one); a note for the deploy's step."""
        driver = ADDON_DRIVERS.get(addon)
        if driver is None:
            return f"add-on {addon}: nothing the tests read"
        if api.get("storage.k8s.io/v1", "CSIDriver", driver) is None:
            api.create(
                {
                    "apiVersion": "storage.k8s.io/v1",
                    "kind": "CSIDriver",
                    "metadata": {"name": driver},
                    "spec": {"attachRequired": False, "podInfoOnMount": False},
                }
            )
        with self._lock:
            self.drivers.add(driver)
        return f"add-on {addon}: CSIDriver {driver}, registered on every node"

    def reconcile(self, api: Api) -> None:
        """Give every node a ``CSINode`` that lists every installed driver."""
        with self._lock:
            drivers = sorted(self.drivers)
        if not drivers:
            return
        existing = {item["metadata"]["name"]: item for item in api.list("storage.k8s.io/v1", "CSINode")}
        for node in api.list("v1", "Node"):
            name = node["metadata"]["name"]
            wanted = [{"name": d, "nodeID": name, "topologyKeys": None} for d in drivers]
            current = existing.get(name)
            if current is None:
                api.create(
                    {
                        "apiVersion": "storage.k8s.io/v1",
                        "kind": "CSINode",
                        "metadata": {
                            "name": name,
                            "ownerReferences": [
                                {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"]}
                            ],
                        },
                        "spec": {"drivers": wanted},
                    }
                )
            elif sorted(d["name"] for d in current["spec"].get("drivers") or []) != drivers:
                current["spec"]["drivers"] = wanted
                api.request("PUT", api.path("storage.k8s.io/v1", "CSINode", name=name), current)

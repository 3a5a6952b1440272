"""What kwok does to the nodes and pods it manages: its stages (kwok's ``Stage`` API, ``kwok.x-k8s.io/v1alpha1``),
written here for the harness and passed with ``--config``. kwok ships no default stages in its binary (kwokctl adds
them), and these say exactly what the tests rely on:

- ``node-ready``: a new node becomes Ready with 127.0.0.1 as its address and the kubelet version of the control
  plane, keeping the capacity the harness or Karpenter gave it (kwok renews the node's Lease as kubelet does).
- ``node-not-ready``: a node annotated :data:`NOT_READY_SINCE` (a test's doing) reports ``Ready`` False since the
  time the annotation gives, as a kubelet that has stopped being ready would (its Lease is still renewed), and
  ``node-ready`` leaves it so. The test annotates the node's pods too, and no pod stage moves them: a kubelet that
  has stopped reports no pod's progress, and confirms no deletion (the pod garbage collector force-deletes the pods of
  a node that is gone).
- ``pod-running``: a pod bound to a node starts: Running with a pod address from kwok, and ready unless a container
  has a readiness probe: then the harness probes it (:mod:`e2e.components`), as kubelet would.
- ``pod-job-complete``: a running pod of a Job (batch or Volcano) succeeds, at once or after the seconds a test
  gives (a run that lasts, for what happens during it): the training containers' work is not run, only its
  outcome; the release Jobs' pods, whose program the harness runs (:mod:`e2e.component_images`), are left to it,
  and the capacity Jobs' pods, which hold their nodes until the release deletes them, keep running.
- ``pod-delete``: a pod being deleted goes (as kubelet confirms a graceful deletion).
- ``pod-node-stopped``: a pod annotated :data:`NOT_READY_SINCE` (the test annotates the pods of the node it stops)
  gets an event and nothing else. It must match: kwok re-matches a changed pod and cancels the stage it had delayed
  only when another stage matches (kwok v0.8.0 ``pkg/kwok/controllers/pod_controller.go`` ``preprocess``,
  ``addStageJob``), so without it a pod's pending completion would still come from a stopped node.
"""

from __future__ import annotations

from pathlib import Path

from trainium_eks.facts.control_plane import KUBERNETES_PATCH
from trainium_eks.manifests.jobs.job_release import RELEASE_COMPONENT
from trainium_eks.manifests.jobs.job_release_program import CAPACITY_COMPONENT

NOT_READY_SINCE = "e2e.trainium-eks/not-ready-since"
"""The annotation that makes kwok report a node not ready, and since when (RFC 3339): Karpenter's node repair acts
on the condition's ``lastTransitionTime``, so a test can say how long the node has been failing."""

_NOT_DELETED = """    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
"""
_NODE_CONDITION = """      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $now | Quote }}
        message: {{ .message | Quote }}
        reason: {{ .reason | Quote }}
        status: {{ .status | Quote }}
        type: {{ .type | Quote }}
"""
"""A node condition of kwok's defaults (``NodeConditions``), as kwok's own node stages write it, heartbeat now."""
_NODE_REPORTING = f"""    - key: '.metadata.annotations["{NOT_READY_SINCE}"]'
      operator: 'DoesNotExist'
"""

STAGES = f"""apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-ready
spec:
  resourceRef: {{apiGroup: v1, kind: Node}}
  selector:
    matchExpressions:
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values: ['True']
    - key: '.metadata.annotations["{NOT_READY_SINCE}"]'
      operator: 'DoesNotExist'
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      conditions:
      {{{{ range NodeConditions }}}}
{_NODE_CONDITION}      {{{{ end }}}}
      addresses:
      - {{address: "127.0.0.1", type: InternalIP}}
      - {{address: {{{{ .metadata.name | Quote }}}}, type: Hostname}}
      nodeInfo:
        architecture: amd64
        kubeletVersion: {KUBERNETES_PATCH}
        kubeProxyVersion: {KUBERNETES_PATCH}
        containerRuntimeVersion: kwok
        kernelVersion: kwok
        operatingSystem: linux
        osImage: kwok
        machineID: {{{{ .metadata.uid | Quote }}}}
        systemUUID: {{{{ .metadata.uid | Quote }}}}
        bootID: {{{{ .metadata.uid | Quote }}}}
      phase: Running
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-not-ready
spec:
  resourceRef: {{apiGroup: v1, kind: Node}}
  selector:
    matchExpressions:
    - key: '.metadata.annotations["{NOT_READY_SINCE}"]'
      operator: 'Exists'
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'In'
      values: ['True']
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      {{{{ $since := index .metadata.annotations "{NOT_READY_SINCE}" }}}}
      conditions:
      {{{{ range NodeConditions }}}}
      {{{{ if eq .type "Ready" }}}}
      - lastHeartbeatTime: {{{{ $now | Quote }}}}
        lastTransitionTime: {{{{ $since | Quote }}}}
        message: "kubelet stopped posting ready (the test's annotation)"
        reason: KubeletNotReady
        status: "False"
        type: Ready
      {{{{ else }}}}
{_NODE_CONDITION}      {{{{ end }}}}
      {{{{ end }}}}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-running
spec:
  resourceRef: {{apiGroup: v1, kind: Pod}}
  selector:
    matchExpressions:
{_NOT_DELETED}{_NODE_REPORTING}    - key: '.status.phase'
      operator: 'In'
      values: ['Pending']
    - key: '.spec.nodeName'
      operator: 'Exists'
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      {{{{ $ready := "True" }}}}
      {{{{ range .spec.containers }}}}{{{{ if .readinessProbe }}}}{{{{ $ready = "False" }}}}{{{{ end }}}}{{{{ end }}}}
      conditions:
      - {{type: Initialized, status: "True", lastTransitionTime: {{{{ $now | Quote }}}}}}
      - {{type: Ready, status: {{{{ $ready | Quote }}}}, lastTransitionTime: {{{{ $now | Quote }}}}}}
      - {{type: ContainersReady, status: {{{{ $ready | Quote }}}}, lastTransitionTime: {{{{ $now | Quote }}}}}}
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - image: {{{{ .image | Quote }}}}
        name: {{{{ .name | Quote }}}}
        ready: {{{{ if .readinessProbe }}}}false{{{{ else }}}}true{{{{ end }}}}
        started: true
        restartCount: 0
        state: {{running: {{startedAt: {{{{ $now | Quote }}}}}}}}
      {{{{ end }}}}
      initContainerStatuses:
      {{{{ range .spec.initContainers }}}}
      - image: {{{{ .image | Quote }}}}
        name: {{{{ .name | Quote }}}}
        ready: true
        restartCount: 0
        state:
          terminated:
            exitCode: 0
            reason: Completed
            startedAt: {{{{ $now | Quote }}}}
            finishedAt: {{{{ $now | Quote }}}}
      {{{{ end }}}}
      hostIP: "127.0.0.1"
      {{{{ $ips := PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" )
        ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}}}
      {{{{ with $ips }}}}
      podIP: {{{{ index . 0 | Quote }}}}
      {{{{ end }}}}
      phase: Running
      startTime: {{{{ $now | Quote }}}}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-job-complete
spec:
  resourceRef: {{apiGroup: v1, kind: Pod}}
  selector:
    matchExpressions:
{_NOT_DELETED}{_NODE_REPORTING}    - key: '.status.phase'
      operator: 'In'
      values: ['Running']
    - key: '.metadata.ownerReferences.[].kind'
      operator: 'In'
      values: ['Job']
    - key: '.metadata.labels["app.kubernetes.io/name"]'
      operator: 'NotIn'
      values: ['{RELEASE_COMPONENT}', '{CAPACITY_COMPONENT}']
{{job_delay}}  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      conditions:
      - {{type: Ready, status: "False", reason: PodCompleted, lastTransitionTime: {{{{ $now | Quote }}}}}}
      - {{type: ContainersReady, status: "False", reason: PodCompleted, lastTransitionTime: {{{{ $now | Quote }}}}}}
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - image: {{{{ .image | Quote }}}}
        name: {{{{ .name | Quote }}}}
        ready: false
        started: false
        restartCount: 0
        state:
          terminated:
            exitCode: 0
            reason: Completed
            startedAt: {{{{ $now | Quote }}}}
            finishedAt: {{{{ $now | Quote }}}}
      {{{{ end }}}}
      phase: Succeeded
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef: {{apiGroup: v1, kind: Pod}}
  selector:
    matchExpressions:
{_NODE_REPORTING}    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
  next:
    delete: true
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-node-stopped
spec:
  resourceRef: {{apiGroup: v1, kind: Pod}}
  selector:
    matchExpressions:
    - key: '.metadata.annotations["{NOT_READY_SINCE}"]'
      operator: 'Exists'
  next:
    event:
      type: Warning
      reason: NodeStopped
      message: "the node's kubelet has stopped (the test's annotation): nothing reports this pod's progress"
"""


def write_stages(path: Path, job_seconds: float = 0) -> Path:
    """Write :data:`STAGES` to ``path`` (kwok's ``--config``), a job's pod running ``job_seconds`` before it
    succeeds."""
    delay = f"  delay: {{durationMilliseconds: {round(job_seconds * 1000)}}}\n" if job_seconds else ""
    path.write_text(STAGES.replace("{job_delay}", delay))
    return path

"""``python -m trainium_eks status``: what happened to a stack's training jobs and to the nodes they ran on.

From the cluster, through kubectl pointed at the stack's cluster (as for ``fabric``: the command names the context it
read and, with AWS, says when that context is not the stack's cluster):

- **jobs** (:mod:`~trainium_eks.commands.training_jobs`): every Volcano job, TrainJob, JobSet of a user's own,
  PyTorchJob and batch Job in the namespace, with its state, its restarts (``job_of`` says where each kind keeps
  them), its pods running of all, and the last training step with its age: the progress file
  (:mod:`~trainium_eks.manifests.jobs.progress_watch`) of the first running pod that writes one, read with ``kubectl
  exec``; for a held job, its release's last event (capacity held, queued, not held, a gang stalled, fabric suspects);
- **nodes replaced and why** (:mod:`~trainium_eks.commands.node_events`): the events Karpenter records on Nodes and
  NodeClaims when it removes one or cannot (``REPLACEMENT_REASONS``); the lines of Karpenter's log that say it
  removed one (``KARPENTER_LOG_MESSAGES``: the only event of a node repair says when, not why), over ``--since``
  (default 24 hours) or from a saved log (``--karpenter-log``); the NodeClaims being deleted now; the nodes with a
  condition Karpenter's node repair acts on; and under each job, its pods' liveness kills for no progress, evictions
  and preemptions;
- **fabric suspects**: nodes with the ``trainium-eks/fabric-suspect`` taint, with the check that named them.

From AWS (boto3, the default credentials or ``--profile``; ``--no-aws`` leaves it out): the stack's status, its
``ClusterName`` output, whose endpoint (EKS ``DescribeCluster``) must be the server of kubectl's context, and in
node-group mode each managed node group's status, size and health issues (EKS ``DescribeNodegroup``,
``health.issues``: launches that failed, instances that did not join). AWS that cannot be reached is one line, and
the cluster is still read.

The API server keeps events for an hour (kube-apiserver's ``--event-ttl``, default ``1h``): a node replaced earlier
shows in Karpenter's log, as long as its pods keep it, and as a restart of its job. Exit status: 0 when no job has
failed, 1 when one has, 2 when the cluster cannot be read.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from trainium_eks.commands.kubectl import KubectlError, cluster_hint, kubectl, reason, run_kubectl
from trainium_eks.commands.node_events import (
    EVENT_TTL,
    KARPENTER_PODS,
    add_event_notes,
    deleting_nodeclaims,
    event_line,
    karpenter_removals,
    replacement_events,
    suspect_nodes,
    unhealthy_nodes,
)
from trainium_eks.commands.training_jobs import KINDS, Job, JobKind, Object, jobs_of, progress_pod, step_text
from trainium_eks.core.conventions import DEFAULT_NAMESPACE, FABRIC_SUSPECT_TAINT


class StatusError(KubectlError):
    """The cluster cannot be read: kubectl, the context, or an answer that is not what kubectl gives."""


def _items(text: str, what: str) -> List[Object]:
    try:
        return list(json.loads(text).get("items") or [])
    except (json.JSONDecodeError, AttributeError) as error:
        raise StatusError(f"kubectl {what} did not answer JSON: {error}") from error


NOT_SERVED = ("the server doesn't have a resource type", "could not find the requested resource")
"""kubectl's words for a resource the cluster does not serve (its CRD is not installed)."""


def _list(args: Sequence[str], stack: str, what: str) -> Optional[List[Object]]:
    """``kubectl get ... -o json`` items; None when the cluster does not serve the resource."""
    done = run_kubectl([*args, "-o", "json"], stack, what)
    if done.returncode != 0:
        if any(words in done.stderr for words in NOT_SERVED):
            return None
        raise StatusError(f"kubectl {what} failed ({reason(done.stderr, done.returncode)}): {cluster_hint(stack)}")
    return _items(done.stdout, what)


@dataclass
class ClusterState:
    """What the cluster says: jobs, events, nodes, NodeClaims (None: no Karpenter), kinds it does not serve, and
    Karpenter's log lines of removed nodes (:func:`karpenter_removals`) or why its log was not read."""

    jobs: List[Job]
    events: List[Object]
    nodes: List[Object]
    nodeclaims: Optional[List[Object]]
    missing_kinds: List[str]
    karpenter: List[str] = field(default_factory=list)


def karpenter_log(stack: str, since: str) -> Tuple[str, str]:
    """``(log, "")`` of every Karpenter pod (:data:`KARPENTER_PODS`) over ``since``, or ``("", why not)``."""
    namespace, selector = KARPENTER_PODS
    args = ["-n", namespace, "logs", "-l", selector, "--tail=-1", f"--since={since}", "--prefix"]
    done = run_kubectl([*args, "--max-log-requests=10"], stack, "logs")
    if done.returncode != 0:
        return "", reason(done.stderr, done.returncode)
    return done.stdout, ""


def read_cluster(
    namespace: str, stack: str, *, since: str = "24h", log: Optional[str] = None, now: Optional[float] = None
) -> ClusterState:
    """Every job of ``namespace``, its pods and their last step, the events of the cluster, its nodes and NodeClaims,
    and with Karpenter the nodes its log (``log``, else its pods' over ``since``) says it removed."""
    listed: Dict[JobKind, List[Object]] = {}
    missing = []
    for kind in KINDS:
        items = _list(["-n", namespace, "get", kind.resource], stack, f"get {kind.resource}")
        if items is None:
            missing.append(kind.resource)
        else:
            listed[kind] = items
    pods = _list(["-n", namespace, "get", "pods"], stack, "get pods") or []
    jobs = jobs_of(listed, pods)
    for job in jobs:
        found = progress_pod(job.pods)
        if found is None:
            continue
        pod, container, path = found
        name = str(pod["metadata"]["name"])
        done = run_kubectl(["-n", namespace, "exec", name, "-c", container, "--", "cat", path], stack, "exec")
        if done.returncode == 0:
            job.last_step = f"{step_text(done.stdout, time.time() if now is None else now)} (pod/{name})"
        else:
            job.last_step = f"progress of pod/{name} not read: {reason(done.stderr, done.returncode)}"
    events = _list(["get", "events", "--all-namespaces"], stack, "get events") or []
    add_event_notes(jobs, [e for e in events if (e.get("metadata") or {}).get("namespace") == namespace])
    nodes = _list(["get", "nodes"], stack, "get nodes") or []
    nodeclaims = _list(["get", "nodeclaims.karpenter.sh"], stack, "get nodeclaims")
    state = ClusterState(jobs, events, nodes, nodeclaims, missing)
    if nodeclaims is not None:
        why = ""
        if log is None:
            log, why = karpenter_log(stack, since)
        state.karpenter = karpenter_removals(log) or [f"(Karpenter's log not read: {why})" if why else "none"]
    return state


@dataclass
class AwsState:
    """What AWS says of the stack: its status, its cluster's name and endpoint, its managed node groups' lines."""

    stack_status: str
    cluster_name: Optional[str]
    endpoint: Optional[str]
    node_groups: List[str]


def nodegroup_line(group: Object) -> str:
    """A managed node group: name, status, nodes wanted, and each health issue (code, message, instances)."""
    scaling = group.get("scalingConfig") or {}
    issues = (group.get("health") or {}).get("issues") or ()
    health = "; ".join(
        f"{i.get('code')}: {i.get('message', '')} ({', '.join(i.get('resourceIds') or ()) or 'no instance named'})"
        for i in issues
    )
    return (
        f"{group.get('nodegroupName')}  {group.get('status')}  {scaling.get('desiredSize', '?')} nodes wanted  "
        f"{health or 'no health issue'}"
    )


def read_aws(session: Any, stack: str) -> AwsState:
    """The stack (CloudFormation ``DescribeStacks``), its cluster (``ClusterName`` output, EKS ``DescribeCluster``)
    and its managed node groups (``ListNodegroups``, ``DescribeNodegroup``); botocore's errors pass through."""
    cloudformation = session.client("cloudformation")
    found = cloudformation.describe_stacks(StackName=stack)["Stacks"][0]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in found.get("Outputs") or ()}
    name = outputs.get("ClusterName")
    if name is None:
        return AwsState(str(found.get("StackStatus")), None, None, [])
    eks = session.client("eks")
    endpoint = eks.describe_cluster(name=name)["cluster"].get("endpoint")
    groups = []
    for page in eks.get_paginator("list_nodegroups").paginate(clusterName=name):
        for group in page.get("nodegroups") or ():
            groups.append(nodegroup_line(eks.describe_nodegroup(clusterName=name, nodegroupName=group)["nodegroup"]))
    return AwsState(str(found.get("StackStatus")), name, endpoint, groups)


def _table(rows: Sequence[Sequence[str]]) -> List[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def render(state: ClusterState, namespace: str) -> List[str]:
    """The report of ``state``: jobs, nodes replaced and why, nodes being replaced or unhealthy, fabric suspects."""
    lines = [f"Jobs in namespace {namespace}:"]
    if state.jobs:
        rows = [("KIND", "NAME", "STATE", "RESTARTS", "PODS RUNNING", "LAST STEP")]
        for job in state.jobs:
            running = sum(1 for p in job.pods if (p.get("status") or {}).get("phase") == "Running")
            restarts = "-" if job.restarts is None else str(job.restarts)
            restarts += f" (+{job.recreated} recreated)" if job.recreated else ""
            rows.append((job.kind.title, job.name, job.state, restarts, f"{running}/{len(job.pods)}", job.last_step))
        table = _table(rows)
        lines.append(table[0])
        for job, row in zip(state.jobs, table[1:], strict=True):
            lines.append(row)
            lines.extend(f"      {note}" for note in job.notes)
    else:
        lines.append("  none")
    if state.missing_kinds:
        lines.append(f"  (not served by this cluster: {', '.join(state.missing_kinds)})")
    replaced = [event_line(e) for e in replacement_events(state.events)]
    lines += ["", f"Nodes removed or being removed, and why (events of the last {EVENT_TTL}):"]
    lines += [f"  {line}" for line in replaced] or ["  none"]
    if state.nodeclaims is not None:
        lines += ["", "Nodes Karpenter's log says it removed (a repair's reason is only there):"]
        lines += [f"  {line}" for line in state.karpenter]
        lines += ["", "NodeClaims being deleted now:"]
        lines += [f"  {line}" for line in deleting_nodeclaims(state.nodeclaims)] or ["  none"]
    lines += ["", "Nodes with a condition Karpenter's node repair acts on:"]
    lines += [f"  {line}" for line in unhealthy_nodes(state.nodes)] or ["  none"]
    lines += ["", f"Fabric suspects (nodes tainted {FABRIC_SUSPECT_TAINT}):"]
    lines += [f"  {line}" for line in suspect_nodes(state.nodes)] or ["  none"]
    return lines


def _duration(text: str) -> str:
    """``text`` if it is a duration kubectl's ``--since`` takes (a whole number and ``s``, ``m`` or ``h``)."""
    if not re.fullmatch(r"[1-9][0-9]*[smh]", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 90m or 24h")
    return text


def _context(stack: str) -> Tuple[str, str]:
    """kubectl's current context and its cluster's server."""
    context = kubectl(["config", "current-context"], stack, "config current-context").strip()
    server = kubectl(
        ["config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}"], stack, "config view"
    ).strip()
    return context, server


def main(argv: Optional[Sequence[str]] = None, *, session: Any = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainium_eks status", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", required=True, help="the stack whose cluster to read (kubectl's context)")
    parser.add_argument("--namespace", default=DEFAULT_NAMESPACE, help=f"default {DEFAULT_NAMESPACE}")
    parser.add_argument("--profile", help="the AWS CLI profile to use (default: the default credentials)")
    parser.add_argument("--region", help="the stack's region (default: the profile's or AWS_REGION)")
    parser.add_argument("--no-aws", action="store_true", help="read only the cluster, not the stack and node groups")
    parser.add_argument(
        "--since", default="24h", type=_duration, help="how far back to read Karpenter's log (kubectl's form: 90m, 2h)"
    )
    parser.add_argument("--karpenter-log", type=Path, help="read a saved Karpenter log instead of its pods'")
    options = parser.parse_args(argv)
    try:
        context, server = _context(options.stack)
    except KubectlError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    aws: Optional[AwsState] = None
    if not options.no_aws:
        from trainium_eks.commands.aws_errors import advice

        try:
            if session is None:
                import boto3

                session = boto3.Session(profile_name=options.profile, region_name=options.region)
            aws = read_aws(session, options.stack)
        except Exception as error:
            message = advice(error)
            if message is None:
                raise
            print(f"AWS not read ({message}); the cluster only:")
    if aws is not None:
        print(f"Stack {options.stack}: {aws.stack_status}, cluster {aws.cluster_name or '(no ClusterName output)'}")
        if aws.endpoint and aws.endpoint.rstrip("/") != server.rstrip("/"):
            print(
                f"error: kubectl's context {context} is not the cluster of stack {options.stack} ({server}, not "
                f"{aws.endpoint}): {cluster_hint(options.stack)}",
                file=sys.stderr,
            )
            return 2
        if aws.node_groups:
            print("Managed node groups (status, size, health issues):")
            print("\n".join(f"  {line}" for line in aws.node_groups))
    print(f"kubectl context {context}")
    try:
        log = options.karpenter_log.read_text(errors="replace") if options.karpenter_log else None
        state = read_cluster(options.namespace, options.stack, since=options.since, log=log)
    except OSError as error:
        print(f"error: {options.karpenter_log}: {error.strerror or error}", file=sys.stderr)
        return 2
    except KubectlError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print("\n".join(render(state, options.namespace)))
    return 1 if any(job.failed for job in state.jobs) else 0

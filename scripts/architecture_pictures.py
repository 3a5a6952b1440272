#!/usr/bin/env python3
"""Draw what each stack of the default app builds, from the stack itself: one SVG picture per stack, its constructs
in six groups (network, cluster, nodes, storage, in-cluster add-ons, jobs: :data:`GROUPS`), each construct with
the AWS resources it synthesizes (by type, most numerous first) or the Kubernetes objects it applies (by kind; a
held job by the kind and name its release Job creates). The pictures cannot drift: ``make docs`` draws them again,
and a test fails when a committed one differs from what the code draws.

    python scripts/architecture_pictures.py OUT_DIR            write OUT_DIR/architecture-<stack>.svg
    python scripts/architecture_pictures.py --check OUT_DIR    exit 1 when a picture there differs

A construct of a class no group names stops the drawing: a new construct is placed, not left out.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Sequence, Tuple
from xml.sax.saxutils import escape

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk  # noqa: E402

import app as default_app  # noqa: E402
from scripts.applied_objects import MANIFEST, applied_objects  # noqa: E402
from trainium_eks import constructs as library  # noqa: E402
from trainium_eks.core.conventions import HELD_JOB_LABEL  # noqa: E402

STACKS = ("TrainiumEks", "KubeflowTraining", "ComposerTraining")
HELM_CHART = "Custom::AWSCDK-EKS-HelmChart"

GROUPS: Tuple[Tuple[str, Tuple[type, ...]], ...] = (
    ("Network", (library.TrainingNetwork, library.DnsFirewall)),
    ("Cluster", (library.TrainingCluster, library.TrainingPodIdentity, library.Preflight, library.TrainingDashboard)),
    ("Nodes", (library.KarpenterController, library.TrainingNodePool, library.TrainingNodeGroup)),
    ("Storage", (library.LustreStorage, library.EfsStorage, library.TrainingImageRepository)),
    ("In-cluster add-ons", (library.ClusterAddons, library.KubeflowTrainer)),
    ("Jobs", (library.JobSequence, library.HybridTrainingWorkflow)),
)
"""The picture's panels, in reading order, and the construct classes each holds."""

MAX_TYPES = 5
"""Resource types (or object kinds) listed per construct; the rest are counted in one line."""
SECONDARY = ("Association", "Attachment", "Egress", "Ingress", "Permission", "Policy", "Route", "Binding")
"""Words of the types and kinds that connect or permit others, listed after the rest: a subnet before its route
table's association, a Role before its binding."""
JOB_KINDS = ("Job", "TrainJob", "PyTorchJob")
"""The kinds a job panel lists by name (a Volcano Job and a batch Job are both ``Job``; release Jobs are counted)."""
HASH = re.compile(r"-[0-9a-f]{10}$")
"""The spec hash a job's name ends with (:mod:`trainium_eks.manifests.jobs.job_naming`), left out of the picture so
that it changes with what a stack builds, not with every field of a pod spec."""
WRAP = 34
"""Characters per line of a panel (a monospace font)."""
FONT = 13
CHAR = 7.9
"""Width of one character of the 13 px monospace font, in pixels (0.6 em, with a margin)."""
LINE = 17
PAD = 12
PANEL = int(WRAP * CHAR + 2 * PAD)
GAP = 16
COLUMNS = 3


class Box(NamedTuple):
    """One construct of a panel: its title and its lines."""

    title: str
    lines: Tuple[str, ...]


def synthesized(name: str) -> Tuple[cdk.Stack, Dict[str, Any]]:
    """Stack ``name`` of the default app (cdk.json's context, only that stack) and its template."""
    context = json.loads((REPO / "cdk.json").read_text())["context"]
    with tempfile.TemporaryDirectory(prefix="architecture-") as outdir:
        app = cdk.App(outdir=outdir, context={**context, "aws:cdk:disable-asset-staging": True, "stacks": name})
        stack = default_app.build_app(app)[name]
        return stack, app.synth().get_stack_by_name(name).template


def short_type(resource_type: str) -> str:
    """``AWS::EC2::Subnet`` -> ``EC2 Subnet``; a custom resource by its own name."""
    parts = resource_type.split("::")
    if parts[0] == "AWS":
        return " ".join(parts[1:])
    return parts[-1].removeprefix("AWSCDK-")


def counted(counter: Counter, noun: str) -> List[str]:
    """The :data:`MAX_TYPES` first entries as ``name ×n`` (the most numerous first, those of :data:`SECONDARY` after
    the others), then one line for the rest."""
    ranked = sorted(counter.items(), key=lambda item: (any(word in item[0] for word in SECONDARY), -item[1], item[0]))
    lines = [f"{name} ×{count}" if count > 1 else name for name, count in ranked[:MAX_TYPES]]
    rest, kinds = sum(count for _, count in ranked[MAX_TYPES:]), len(ranked) - MAX_TYPES
    if rest:
        lines.append(f"+ {rest} more {noun}{'s' * (rest > 1)} of {kinds} kind{'s' * (kinds > 1)}")
    return lines


def box(construct: Any, stack: cdk.Stack, template: Dict[str, Any]) -> Box:
    """What ``construct`` synthesizes: its AWS resources by type, then its Kubernetes objects and Helm charts."""
    resources = template["Resources"]
    own: Dict[str, Any] = {}
    for element in construct.node.find_all():
        if isinstance(element, cdk.CfnResource):
            logical_id = stack.get_logical_id(element)
            if logical_id in resources:
                own[logical_id] = resources[logical_id]
    aws = Counter(short_type(r["Type"]) for r in own.values() if r["Type"] not in (MANIFEST, HELM_CHART))
    lines = counted(aws, "resource")
    charts = sorted(
        f"Helm chart {r['Properties']['Chart']} {r['Properties'].get('Version', '')}".rstrip()
        for r in own.values()
        if r["Type"] == HELM_CHART
    )
    objects = list(applied_objects({"Resources": own}))
    jobs = [obj for obj in objects if obj.get("kind") in JOB_KINDS and not is_release(obj)]
    releases = sum(1 for obj in objects if is_release(obj))
    for job in jobs:
        operator = " (Volcano)" if job["apiVersion"].startswith("batch.volcano.sh/") else ""
        lines.append(f"{job['kind']}{operator} {HASH.sub('', job['metadata']['name'])}")
    if releases == 1:
        lines.append("a release Job creates the held job")
    elif releases:
        lines.append(f"{releases} release Jobs create the held jobs")
    rest = [obj for obj in objects if obj not in jobs and not is_release(obj)]
    lines += charts + counted(Counter(obj["kind"] for obj in rest), "object")
    title = f"{construct.node.id}: {type(construct).__name__}"
    return Box(title, tuple(lines))


def is_release(obj: Dict[str, Any]) -> bool:
    """A release Job: the Job labelled with the held job it creates (``HELD_JOB_LABEL``, as
    :func:`scripts.applied_objects.applied_objects` finds it)."""
    return HELD_JOB_LABEL in (obj.get("metadata", {}).get("labels") or {})


def panels(stack: cdk.Stack, template: Dict[str, Any]) -> List[Tuple[str, List[Box]]]:
    """The stack's panels in :data:`GROUPS` order, each with its constructs in the stack's order."""
    grouped: Dict[str, List[Box]] = {name: [] for name, _ in GROUPS}
    for child in stack.node.children:
        if not any(isinstance(e, cdk.CfnResource) for e in child.node.find_all()):
            continue
        group = next((name for name, kinds in GROUPS if isinstance(child, kinds)), None)
        if group is None:
            raise SystemExit(f"{stack.stack_name}/{child.node.id}: {type(child).__name__} is in no group of GROUPS")
        grouped[group].append(box(child, stack, template))
    return [(name, boxes) for name, boxes in grouped.items() if boxes]


def wrapped(text: str, width: int = WRAP) -> List[str]:
    """``text`` in lines of at most ``width`` characters, broken at spaces but never before a count (``×n``)."""
    lines: List[str] = []
    for word in text.replace(" ×", "\u00a0×").split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return [line.replace("\u00a0", " ") for line in lines]


def panel_lines(boxes: Sequence[Box]) -> List[Tuple[str, str]]:
    """A panel's text as ``(style, line)``: each construct's title, then its lines indented by two, a line's
    continuation by four (so that one entry does not read as two)."""
    out: List[Tuple[str, str]] = []
    for index, item in enumerate(boxes):
        if index:
            out.append(("gap", ""))
        out += [("title", line) for line in wrapped(item.title)]
        for line in item.lines:
            first, *rest = wrapped(line, WRAP - 2)
            out += [("item", "  " + first)]
            out += [("item", "    " + part) for part in wrapped(" ".join(rest), WRAP - 4)] if rest else []
    return out


def svg(name: str, class_name: str, stack_panels: List[Tuple[str, List[Box]]]) -> str:
    """The picture: a heading, then the panels in rows of :data:`COLUMNS`."""
    rows = [stack_panels[i : i + COLUMNS] for i in range(0, len(stack_panels), COLUMNS)]
    heading = 40
    parts: List[str] = []
    y = heading
    for row in rows:
        texts = [panel_lines(boxes) for _, boxes in row]
        height = (max(len(t) for t in texts) + 1) * LINE + 2 * PAD + 4
        for column, ((title, _), text) in enumerate(zip(row, texts, strict=True)):
            x = GAP + column * (PANEL + GAP)
            parts.append(f'<rect x="{x}" y="{y}" width="{PANEL}" height="{height}" rx="8" class="panel"/>')
            parts.append(f'<text x="{x + PAD}" y="{y + PAD + FONT}" class="group">{escape(title)}</text>')
            for number, (style, line) in enumerate(text, start=1):
                if style != "gap":
                    baseline = y + PAD + FONT + number * LINE
                    parts.append(
                        f'<text x="{x + PAD}" y="{baseline}" class="{style}" xml:space="preserve">{escape(line)}</text>'
                    )
        y += height + GAP
    width = GAP + COLUMNS * (PANEL + GAP)
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y}" viewBox="0 0 {width} {y}" '
        f'font-family="ui-monospace, SFMono-Regular, Menlo, Consolas, monospace" font-size="{FONT}">\n'
        "<style>.panel{fill:#f6f8fa;stroke:#8c959f}.group{font-weight:bold;font-size:15px;fill:#0b4f8a}"
        ".title{font-weight:bold;fill:#1f2328}.item{fill:#3d444d}.heading{font-weight:bold;font-size:17px}</style>\n"
        f'<rect width="{width}" height="{y}" fill="#ffffff"/>\n'
        f'<text x="{GAP}" y="26" class="heading">{escape(name)} ({escape(class_name)}): what one cdk deploy builds'
        "</text>\n"
    )
    return head + "\n".join(parts) + "\n</svg>\n"


def pictures() -> Dict[str, str]:
    """``architecture-<stack>.svg`` -> its text, for each stack of the default app."""
    drawn = {}
    for name in STACKS:
        stack, template = synthesized(name)
        drawn[f"architecture-{name}.svg"] = svg(name, type(stack).__name__, panels(stack, template))
    return drawn


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the pictures in OUT_DIR, write nothing")
    parser.add_argument("out_dir", type=Path)
    arguments = parser.parse_args()
    stale = []
    for file_name, text in pictures().items():
        path = arguments.out_dir / file_name
        if arguments.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(str(path))
        else:
            path.write_text(text)
    if stale:
        print("pictures that differ from what the code draws (make docs draws them):", *stale, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

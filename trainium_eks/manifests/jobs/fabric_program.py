"""Fabric acceptance: run a collective benchmark across a job's nodes, parse it, and judge the fabric it measured.

This file is a program as well as a module. Its source without this docstring runs as ``python3 -c`` on node 0 of a
fabric acceptance job (:mod:`~trainium_eks.manifests.jobs.fabric_check`), in the job's own image, with the job's
devices, EFA interfaces and environment, with Python's standard library only::

    python3 fabric_program.py --benchmark nccom|nccl --floor-gbps F --link-gbps L --efa-devices N
        --marker TEXT [--min-size BYTES] [--hosts A,B,...] [--node-names N,M,...] [--ranks-per-node K]
        [--timeout-seconds T] [--pair-timeout-seconds P] [--root-comm-port PORT] [--collector-port PORT]
        [--result-file PATH] [--device-dir DIR] -- <benchmark argv...>

It counts ``/dev/infiniband/uverbs*`` in its pod (the devices the EFA device plugin gave it; ``--device-dir`` moves
the directory, for tests only) and stops at once unless there are ``N``; runs the benchmark, streaming its output as it
comes and keeping it; parses the bus bandwidth by message size; looks in the output for what says which transport
carried the traffic; prints a short table, then one line: ``--marker`` followed by the result as JSON
(:class:`FabricResult`, the last such line of a log is the result: :func:`result_from_log`). ``--marker`` is
:data:`trainium_eks.core.conventions.FABRIC_RESULT_MARKER`, which the chart passes (:func:`program_arguments`):
one definition, in the library, and none to keep in step here; the program itself never imports the library.

**Hosts and bisection.** With ``--hosts`` (the job's hosts, node 0 first), the benchmark's argv is a template whose
placeholders (``{hosts}``, ``{ranks}``, ``{nodes}``, ``{slots}``, ``{first}``, ``{launcher}`` (node 0, where the program
and the benchmark's launcher run: nccom-test collects its data there), ``{timeout}``, ``{collector_port}``:
:func:`benchmark_command`) are filled for the hosts of each run, and ``--root-comm-port`` sets
``NEURON_RT_ROOT_COMM_ID`` to the run's first host (nccom-test.rst: the first host's address and a free port). Each run
listens on ports of its own (the root and collector ports plus the run's number): a run right after another on the same
first host does not wait for the ports the last one held to be released. When the run on every host is below the floor
and there are three hosts or more, the program measures pairs of them (:func:`bisect`, each run under
``--pair-timeout-seconds``, at most :data:`MAX_PAIR_RUNS` runs) to find the nodes that pull the figure down: a node
below the floor with a node that cleared it with another is a *suspect*. Two nodes are one pair, the whole check, and
cannot be told apart; with no pair clearing the floor the fabric, not a node, is below it. ``--result-file`` receives a
summary (:func:`summary`: the verdict, the pairs, the suspects as indices into ``--hosts`` and, from ``--node-names``,
their nodes) in at most 4 KiB: the check writes it to its container's termination message, which the kubelet copies into
the pod's status for the check's release to read.

Exit status (:data:`EXIT_CODES`): 0 pass; 3 below the floor; 4 the transport is not EFA, or not shown to be (too few
uverbs devices, a log line of a fallback, no evidence); 5 the benchmark failed or its output cannot be read; 6 below
the floor, and suspects named; 2 a usage error. Every outcome but a usage error ends with the result line.

**Units.** Rows carry decimal GB/s (10^9 bytes/s) and Gbps (GB/s x 8), whatever the benchmark prints: nccl-tests'
GB/s are decimal (``src/all_reduce.cu`` ``AllReduceGetBw``: bytes / 1.0E9 / seconds; nccl-tests a0b82b2), nccom-test's
are gibibytes per second (Neuron SDK ``tools/neuron-sys-tools/nccom-test.rst``: "gibibytes (1GiB = 1,073,741,824
bytes) per second"), converted here. Bus bandwidth is the benchmark's own (all-reduce factor ``2(r-1)/r`` of the
algorithm bandwidth in both: nccl-tests ``doc/PERFORMANCE.md``, nccom-test.rst "Bus Bandwidth Calculation").

**Output formats** (the parsers read them by their header names, so added or reordered columns do not break them):

- nccom-test (aws-neuronx-tools; nccom-test.rst at aws-neuron-sdk v2.29.1, the pinned DLC's SDK, and 81ce03a): a
  header line ``size(B) count(elems) type time:avg(us) algbw(GB/s) busbw(GB/s)`` (older releases and some examples
  print ``time(us)``; options add
  ``time:pNN(us)``, ``total_input_size(B)``/``total_output_size(B)`` or ``algorithm`` columns), one row per size, then
  ``Avg bus bandwidth: <x>GB/s``. A failed size prints ``<size>    Failure running neuron-bench - log file ...`` and
  the run ends ``N errors found - test failed``. ``--report-to-json-file PATH`` (documented since Neuron 2.24) writes
  ``{"results": [{"size(B)", "count(elems)", "type", "algbw(GB/s)", "busbw(GB/s)", "time:avg(us)"}]}``: when the
  benchmark's argv has it, that file is read first (:func:`parse_nccom_json`), the table only if it is missing.
- nccl-tests ``all_reduce_perf`` (``src/util.cu`` ``writeResultHeader``/``writeBenchmarkLineBody``/
  ``writeResultFooter``): comment lines ``#  out-of-place  in-place``, ``# size count type redop root time algbw
  busbw #wrong time algbw busbw #wrong`` (older releases: no ``root``, ``error`` for ``#wrong``; ``-I`` adds per-
  iteration columns, ``-S`` a timestamp) and units; rows of numbers (``#wrong`` may be ``N/A``); then ``# Out of
  bounds values : N OK|FAILED`` and ``# Avg bus bandwidth : x``. A row's bandwidth is the better of its out-of-place
  and in-place figures. Under ``mpirun --tag-output`` (aws-k8s-tester does it) every line starts ``[1,0]<stdout>:``,
  which the parsers drop.

**Transport evidence** (:func:`transport_evidence`). NCCL: aws-ofi-nccl logs ``NET/OFI Selected provider is <p>,
fabric is <f> (found N nics)`` (``src/nccl_ofi_net.cpp``, v1.14.0 to v1.21.1; ``Selected Provider is <p> (found N
nics)`` before v1.14.0) at INFO, and NCCL logs ``Using network <name>`` (``src/init.cc``, v2.30.7-1) where the name
is the plugin's, ``Libfabric`` (``src/nccl_ofi_interface_nvidia.cpp``; ``AWS Libfabric`` up to 1.11 and with
``NCCL_NET="AWS Libfabric"``, ``OFI`` with ``NCCL_NET=OFI``), or NCCL's own ``IB`` or ``Socket``
(``src/transport/net_ib/common.cc``, ``net_socket.cc``). NCCL tries the external plugin first and falls back to its
own transports when it fails (``src/plugin/net.cc`` ``ncclNetInit``), so an NCCL run proves EFA only in its log: run
it with ``NCCL_DEBUG=INFO``. EFA is: a provider line naming ``efa``, and no ``Using network`` other than the plugin's.

Neuron: the collectives library (CCOM) embeds aws-ofi-nccl (``src/nccl_ofi_interface_neuron.cpp``, plugin name
``AWS Libfabric``) and logs through it; without EFA it says ``CCOM WARN OFI plugin initNet() failed is EFA enabled?``
and ``Unable to run multi-instance workload.  Ofi plugin is not installed or EFA is not enabled`` (Neuron SDK
``neuron-runtime/nrt-troubleshoot.rst``, "EFA is not enabled in trn1.32xlarge" and "Missing efa installer package";
``CCOM WARN NET/OFI aws-ofi-nccl initialization failed`` in the logs quoted in
``nki/get-started/quickstart-implement-run-kernel.rst``): those lines mean not EFA. Whether ``Selected provider is
efa`` reaches the log at ``NCCL_DEBUG=INFO`` (Neuron's own advice for "Neuron NCCL debug" is ``NCCL_DEBUG=WARN``,
archive/nxd-training/training-troubleshooting.rst) could not be verified: no published Neuron log shows it. It counts
when present; when absent, a Neuron run counts as EFA by its configuration: ``FI_PROVIDER=efa`` in this process's
environment (libfabric's ``fabric.7``: "The FI_PROVIDER variable is set to a comma separated list of providers to
include", so libfabric offers no other provider, and the plugin cannot pick tcp or sockets), the ``N`` uverbs devices,
and a multi-node benchmark that completed (the Neuron runtime has no non-EFA transport between instances for device
collectives; it fails, as quoted above). That inference is recorded as ``how: configuration`` in the result.

Sources read 2026-12-01: aws/aws-ofi-nccl v1.21.1 (and the tags named); NVIDIA/nccl v2.30.7-1; NVIDIA/nccl-tests
a0b82b2; aws-neuron/aws-neuron-sdk v2.29.1 and 81ce03a (v2.32.0+5); ofiwg/libfabric ``man/fabric.7.md``;
aws/aws-k8s-tester 9c7b987 (``test/cases/neuron/manifests/multi-node-test-neuron.yaml``,
``test/cases/nvidia/mpi_test.go``, which looks for ``[send] via NET/.*Libfabric/.*/GDRDMA`` on P4/P5).
"""

import argparse
import glob
import json
import math
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

PASS = 0
USAGE = 2
BELOW_FLOOR = 3
NOT_EFA = 4
BENCHMARK_FAILED = 5
SUSPECT_NODES = 6
EXIT_CODES = {
    "pass": PASS,
    "below-floor": BELOW_FLOOR,
    "not-efa": NOT_EFA,
    "benchmark-failed": BENCHMARK_FAILED,
    "suspect-nodes": SUSPECT_NODES,
}
"""Exit status of each verdict; 2 is a usage error (no result line)."""

PLACEHOLDERS = ("{ranks}", "{nodes}", "{hosts}", "{slots}", "{first}", "{launcher}", "{timeout}", "{collector_port}")
"""What the benchmark's command may hold in place of the hosts it runs on (:func:`benchmark_command`)."""
MAX_PAIR_RUNS = 10
"""The most benchmark runs a bisection makes (:func:`bisect`)."""
SUMMARY_BYTES = 4096
"""The most a termination message holds (the kubelet cuts it there): the summary (:func:`summary`) fits in it."""

BENCHMARKS = ("nccom", "nccl")
UVERBS_DIR = "/dev/infiniband"
GIB = 1024**3
DECIMAL_GB = 10**9

EFA_NETWORKS = ("Libfabric", "AWS Libfabric", "OFI")
"""Names NCCL gives the aws-ofi-nccl network in ``Using network <name>``."""

_TAG = re.compile(r"^\[\d+,\d+\]<(?:stdout|stderr)>:")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_PROVIDER = re.compile(r"NET/OFI Selected provider is ([^\s,]+)", re.IGNORECASE)
_NETWORK = re.compile(r"\b(?:NCCL|CCOM) INFO Using network (\S.*?)\s*$")
_NOT_EFA = (
    re.compile(r"OFI plugin initNet\(\) failed"),
    re.compile(r"Unable to run multi-instance workload"),
    re.compile(r"aws-ofi-nccl initialization failed"),
)
"""Lines that say the collectives could not use EFA (Neuron's CCOM, aws-ofi-nccl)."""
_NCCOM_FAILED = re.compile(r"Failure running neuron-bench|errors? found - test failed")
_OUT_OF_BOUNDS = re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)\s*(FAILED|OK)?")


@dataclass(frozen=True)
class Row:
    """One message size of a benchmark: its bytes, time (us) and algorithm and bus bandwidth in decimal GB/s."""

    bytes: int
    time_us: float
    algbw_gbs: float
    busbw_gbs: float

    @property
    def algbw_gbps(self) -> float:
        return self.algbw_gbs * 8

    @property
    def busbw_gbps(self) -> float:
        return self.busbw_gbs * 8

    def as_json(self) -> Dict[str, Any]:
        return {
            "bytes": self.bytes,
            "time_us": self.time_us,
            "algbw_gbs": self.algbw_gbs,
            "busbw_gbs": self.busbw_gbs,
            "algbw_gbps": round(self.algbw_gbps, 3),
            "busbw_gbps": round(self.busbw_gbps, 3),
        }


@dataclass(frozen=True)
class FabricResult:
    """What a fabric check found: the rows by message size, the floor and link rate it was judged against, the
    transport evidence, the verdict (a key of :data:`EXIT_CODES`) and why.

    ``min_size``: the smallest message size whose bus bandwidth counts (None: only the largest measured)."""

    benchmark: str
    rows: Tuple[Row, ...]
    floor_gbps: float
    link_gbps: float
    verdict: str
    reason: str
    transport: Mapping[str, Any] = field(default_factory=dict)
    min_size: Optional[int] = None
    hosts: Tuple[str, ...] = ()
    pairs: Tuple["PairRun", ...] = ()
    suspects: Tuple[int, ...] = ()
    node_names: Tuple[str, ...] = ()

    @property
    def checked_rows(self) -> Tuple[Row, ...]:
        """The rows the floor applies to: ``min_size`` bytes and above, or the largest size."""
        if not self.rows:
            return ()
        smallest = self.min_size if self.min_size is not None else max(row.bytes for row in self.rows)
        return tuple(row for row in self.rows if row.bytes >= smallest)

    @property
    def checked_busbw_gbps(self) -> Optional[float]:
        """The best bus bandwidth among :attr:`checked_rows` (what the floor is compared with), Gbps."""
        checked = self.checked_rows
        return max(row.busbw_gbps for row in checked) if checked else None

    @property
    def peak_busbw_gbps(self) -> Optional[float]:
        return max(row.busbw_gbps for row in self.rows) if self.rows else None

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.verdict, BENCHMARK_FAILED)

    def as_json(self) -> Dict[str, Any]:
        peak = self.peak_busbw_gbps
        checked = self.checked_busbw_gbps
        return {
            "benchmark": self.benchmark,
            "rows": [row.as_json() for row in self.rows],
            "peak_busbw_gbs": None if peak is None else round(peak / 8, 4),
            "peak_busbw_gbps": None if peak is None else round(peak, 3),
            "checked_busbw_gbps": None if checked is None else round(checked, 3),
            "min_size": self.min_size,
            "floor_gbps": self.floor_gbps,
            "floor_gbs": round(self.floor_gbps / 8, 4),
            "link_gbps": self.link_gbps,
            "transport": dict(self.transport),
            "verdict": self.verdict,
            "reason": self.reason,
            "hosts": list(self.hosts),
            "pairs": [pair.as_json() for pair in self.pairs],
            "suspects": list(self.suspects),
            "node_names": list(self.node_names),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "FabricResult":
        """The result a marker line carries; raises ValueError when it is not one."""
        try:
            rows = tuple(
                Row(int(r["bytes"]), float(r["time_us"]), float(r["algbw_gbs"]), float(r["busbw_gbs"]))
                for r in data.get("rows") or ()
            )
            return cls(
                benchmark=str(data["benchmark"]),
                rows=rows,
                floor_gbps=float(data["floor_gbps"]),
                link_gbps=float(data["link_gbps"]),
                verdict=str(data["verdict"]),
                reason=str(data.get("reason", "")),
                transport=dict(data.get("transport") or {}),
                min_size=None if data.get("min_size") is None else int(data["min_size"]),
                hosts=tuple(str(host) for host in data.get("hosts") or ()),
                pairs=tuple(PairRun.from_json(pair) for pair in data.get("pairs") or ()),
                suspects=tuple(int(index) for index in data.get("suspects") or ()),
                node_names=tuple(str(node) for node in data.get("node_names") or ()),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise ValueError(f"not a fabric result: {error!r}") from error


@dataclass(frozen=True)
class PairRun:
    """One run of the benchmark on two of the job's nodes (their indices among the hosts), its verdict (a key of
    :data:`EXIT_CODES`) and the bus bandwidth the floor was compared with (None when it measured none)."""

    nodes: Tuple[int, int]
    verdict: str
    busbw_gbps: Optional[float]

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    def as_json(self) -> Dict[str, Any]:
        busbw = None if self.busbw_gbps is None else round(self.busbw_gbps, 3)
        return {"nodes": list(self.nodes), "verdict": self.verdict, "busbw_gbps": busbw, "passed": self.passed}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "PairRun":
        first, second = (int(index) for index in data["nodes"])
        busbw = data.get("busbw_gbps")
        return cls((first, second), str(data["verdict"]), None if busbw is None else float(busbw))


def clean_lines(text: str) -> List[str]:
    """``text``'s lines without terminal escapes, carriage-return progress and ``mpirun --tag-output`` prefixes."""
    return [_TAG.sub("", _ANSI.sub("", line)) for line in text.splitlines()]


def _time_column(tokens: Sequence[str]) -> Optional[int]:
    for wanted in ("time:avg(us)", "time(us)"):
        if wanted in tokens:
            return tokens.index(wanted)
    return next((i for i, token in enumerate(tokens) if token.startswith("time")), None)


def parse_nccom_test(text: str) -> List[Row]:
    """The rows of nccom-test's table (see the module docstring); busbw and algbw converted from GiB/s."""
    rows: List[Row] = []
    header: Optional[Tuple[int, int, int, int, int]] = None
    for line in clean_lines(text):
        tokens = line.split()
        if "size(B)" in tokens and "busbw(GB/s)" in tokens and "algbw(GB/s)" in tokens:
            time = _time_column(tokens)
            header = None
            if time is not None:
                header = (
                    len(tokens),
                    tokens.index("size(B)"),
                    time,
                    tokens.index("algbw(GB/s)"),
                    tokens.index("busbw(GB/s)"),
                )
            continue
        if header is None or len(tokens) != header[0]:
            continue
        _, size, time, algbw, busbw = header
        try:
            rows.append(
                Row(
                    int(tokens[size]),
                    float(tokens[time]),
                    float(tokens[algbw]) * GIB / DECIMAL_GB,
                    float(tokens[busbw]) * GIB / DECIMAL_GB,
                )
            )
        except ValueError:
            continue
    return rows


def parse_nccom_json(data: Any) -> List[Row]:
    """The rows of nccom-test's ``--report-to-json-file`` report (``{"results": [...]}``); [] when it is not one."""
    results = data.get("results") if isinstance(data, dict) else None
    rows: List[Row] = []
    for entry in results if isinstance(results, list) else ():
        if not isinstance(entry, dict):
            continue
        time_key = next((k for k in ("time:avg(us)", "time(us)") if k in entry), None)
        time_key = time_key or next((k for k in entry if str(k).startswith("time")), None)
        try:
            rows.append(
                Row(
                    int(entry["size(B)"]),
                    float(entry[time_key]) if time_key else math.nan,
                    float(entry["algbw(GB/s)"]) * GIB / DECIMAL_GB,
                    float(entry["busbw(GB/s)"]) * GIB / DECIMAL_GB,
                )
            )
        except (KeyError, TypeError, ValueError):
            continue
    return rows


def parse_all_reduce_perf(text: str) -> List[Row]:
    """The rows of nccl-tests' ``all_reduce_perf`` (see the module docstring): per size, the better of the
    out-of-place and in-place bus bandwidth, with its algorithm bandwidth and time."""
    rows: List[Row] = []
    columns: Optional[Dict[str, List[int]]] = None
    width = 0
    for line in clean_lines(text):
        stripped = line.strip()
        if stripped.startswith("#"):
            tokens = stripped[1:].split()
            if tokens[:2] == ["size", "count"] and "busbw" in tokens:
                columns = {
                    name: [i for i, token in enumerate(tokens) if token in names]
                    for name, names in (("time", ("time", "cputime")), ("algbw", ("algbw",)), ("busbw", ("busbw",)))
                }
                if not all(columns.values()):
                    columns = None
                    continue
                width = max(max(indices) for indices in columns.values()) + 1
            continue
        tokens = stripped.split()
        if columns is None or len(tokens) < width:
            continue
        try:
            size = int(tokens[0])
            int(tokens[1])
            figures = [
                (
                    float(tokens[columns["busbw"][i]]),
                    float(tokens[columns["algbw"][i]]),
                    float(tokens[columns["time"][i]]),
                )
                for i in range(min(len(indices) for indices in columns.values()))
            ]
        except ValueError:
            continue
        busbw, algbw, time = max(figures)
        rows.append(Row(size, time, algbw, busbw))
    return rows


def benchmark_errors(benchmark: str, text: str) -> Optional[str]:
    """What the benchmark's own output says went wrong (a failed size, data out of bounds), or None."""
    for line in clean_lines(text):
        if benchmark == "nccom" and _NCCOM_FAILED.search(line):
            return line.strip()
        match = _OUT_OF_BOUNDS.search(line) if benchmark == "nccl" else None
        if match and (match.group(2) == "FAILED" or int(match.group(1)) > 0):
            return line.strip()
    return None


def count_uverbs(directory: str = UVERBS_DIR) -> int:
    """How many ``uverbs*`` devices ``directory`` holds: the EFA devices the pod was given."""
    return len(glob.glob(os.path.join(directory, "uverbs*")))


def transport_evidence(
    text: str,
    benchmark: str,
    *,
    fi_provider: Optional[str] = None,
    efa_devices: Optional[int] = None,
    expected_efa_devices: Optional[int] = None,
) -> Dict[str, Any]:
    """What the output (and, for a Neuron run, the configuration) says about the transport: ``verdict`` ``efa``,
    ``not-efa`` or ``unconfirmed``, ``how`` (``log`` or ``configuration``), the providers and networks named, the
    evidence lines and a reason. See the module docstring for the lines and their sources."""
    providers: List[str] = []
    networks: List[str] = []
    against: List[str] = []
    evidence: List[str] = []
    for line in clean_lines(text):
        provider = _PROVIDER.search(line)
        network = _NETWORK.search(line)
        failed = any(pattern.search(line) for pattern in _NOT_EFA)
        if provider and provider.group(1).lower() not in providers:
            providers.append(provider.group(1).lower())
            evidence.append(line.strip()[:240])
        if network and network.group(1) not in networks:
            networks.append(network.group(1))
            evidence.append(line.strip()[:240])
        if failed and len(against) < 3:
            against.append(line.strip()[:240])
    other_providers = [p for p in providers if p != "efa"]
    other_networks = [n for n in networks if n not in EFA_NETWORKS]
    found = {
        "providers": providers,
        "networks": networks,
        "fi_provider": fi_provider,
        "efa_devices": efa_devices,
        "expected_efa_devices": expected_efa_devices,
        "evidence": (against + evidence)[:6],
    }
    if against or other_providers or other_networks:
        what = (
            f"libfabric provider {', '.join(other_providers)}"
            if other_providers
            else f"NCCL network {', '.join(other_networks)}"
            if other_networks
            else against[0]
        )
        return {
            **found,
            "verdict": "not-efa",
            "how": "log",
            "reason": f"the output says the transport is not EFA: {what}",
        }
    if "efa" in providers:
        return {**found, "verdict": "efa", "how": "log", "reason": "aws-ofi-nccl selected the efa provider"}
    devices_match = efa_devices is not None and efa_devices == expected_efa_devices
    if benchmark == "nccom" and fi_provider == "efa" and devices_match:
        return {
            **found,
            "verdict": "efa",
            "how": "configuration",
            "reason": f"FI_PROVIDER=efa and {efa_devices} EFA devices; no provider line in the output",
        }
    hint = "run NCCL with NCCL_DEBUG=INFO" if benchmark == "nccl" else "set FI_PROVIDER=efa (or NCCL_DEBUG=INFO)"
    return {
        **found,
        "verdict": "unconfirmed",
        "how": "",
        "reason": f"nothing in the output or the configuration shows the transport was EFA: {hint}",
    }


def judge(
    benchmark: str,
    rows: Sequence[Row],
    *,
    returncode: Optional[int],
    errors: Optional[str],
    transport: Mapping[str, Any],
    floor_gbps: float,
    link_gbps: float,
    min_size: Optional[int] = None,
    failure: str = "",
) -> FabricResult:
    """The verdict: a transport the output shows not to be EFA comes first (it explains any failure), then a failed
    or unreadable benchmark, then a transport not shown to be EFA, then the floor."""

    def result(verdict: str, reason: str) -> FabricResult:
        return FabricResult(benchmark, tuple(rows), floor_gbps, link_gbps, verdict, reason, dict(transport), min_size)

    if transport.get("verdict") == "not-efa":
        return result("not-efa", str(transport.get("reason")))
    if returncode != 0 or errors:
        said = f": {errors}" if errors else (f": {failure}" if failure else "")
        status = "could not start" if returncode is None else f"exited {returncode}"
        return result("benchmark-failed", f"the benchmark {status}{said}")
    if not rows:
        return result("benchmark-failed", f"no {benchmark} result rows in the benchmark's output")
    if transport.get("verdict") != "efa":
        return result("not-efa", str(transport.get("reason")))
    probe = result("pass", "")
    checked = probe.checked_busbw_gbps
    if checked is None:
        return result("benchmark-failed", f"no message size of {min_size} bytes or more was measured")
    smallest = min(row.bytes for row in probe.checked_rows)
    where = (
        f"{size_text(smallest)}" if smallest == max(row.bytes for row in rows) else f"{size_text(smallest)} and above"
    )
    share = f"{100 * checked / link_gbps:.0f} % of the {link_gbps:g} Gbps link"
    what = f"{'best ' if len(probe.checked_rows) > 1 else ''}bus bandwidth {checked:.1f} Gbps ({share}) at {where}"
    if checked < floor_gbps:
        return result("below-floor", f"{what} < floor {floor_gbps:g} Gbps")
    return result("pass", f"{what} >= floor {floor_gbps:g} Gbps")


def size_text(value: int) -> str:
    for unit, scale in (("GiB", GIB), ("MiB", 1024**2), ("KiB", 1024)):
        if value >= scale and value % scale == 0:
            return f"{value // scale} {unit}"
    return f"{value} B"


def render(result: FabricResult, title: str = "") -> str:
    """The table of a result: size, bus bandwidth in GB/s and Gbps, % of the link, whether each checked size clears
    the floor; then the floor, the transport and the verdict."""
    checked = set(result.checked_rows)
    header = ["size", "busbw GB/s", "busbw Gbps", "% of link", "vs floor"]
    lines = [f"{title or 'fabric check'} ({result.benchmark} all-reduce): {result.verdict.upper()}"]
    table = [header]
    for row in result.rows:
        mark = ("ok" if row.busbw_gbps >= result.floor_gbps else "BELOW") if row in checked else ""
        share = f"{100 * row.busbw_gbps / result.link_gbps:.1f}" if result.link_gbps else "n/a"
        table.append([size_text(row.bytes), f"{row.busbw_gbs:.2f}", f"{row.busbw_gbps:.1f}", share, mark])
    if not result.rows:
        table = [["(no measurement)"]]
        header = table[0]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    for line in table:
        cells = [line[i].rjust(widths[i]) for i in range(len(header))]
        lines.append("  " + "  ".join(cells).rstrip())
    transport = result.transport or {}
    how = f" ({transport.get('how')})" if transport.get("how") else ""
    lines.append(
        f"  floor {result.floor_gbps:g} Gbps ({result.floor_gbps / 8:.2f} GB/s), link {result.link_gbps:g} Gbps; "
        f"transport: {transport.get('verdict', 'n/a')}{how}"
    )
    lines += _pair_lines(result)
    lines.append(f"  {result.verdict}: {result.reason}")
    return "\n".join(lines)


def _pair_lines(result: FabricResult) -> List[str]:
    """The pairs a bisection measured, and the suspects it named, as lines of :func:`render`."""
    if not result.pairs:
        return []

    def node(index: int) -> str:
        where = [part for part in (*result.hosts[index : index + 1], *result.node_names[index : index + 1]) if part]
        return f"node {index}" + (f" ({', '.join(where)})" if where else "")

    lines = ["  pairs measured (nodes, bus bandwidth the floor was compared with, verdict):"]
    for pair in result.pairs:
        figure = "n/a" if pair.busbw_gbps is None else f"{pair.busbw_gbps:.1f} Gbps"
        mark = "ok" if pair.passed else pair.verdict.upper()
        lines.append(f"    {f'{pair.nodes[0]} + {pair.nodes[1]}':<9} {figure:>11}  {mark}")
    if result.suspects:
        lines.append("  suspects: " + ", ".join(node(index) for index in result.suspects))
    return lines


def summary(result: FabricResult) -> str:
    """The result in at most :data:`SUMMARY_BYTES` bytes of JSON, for the container's termination message, which its
    release reads from the pod's status: verdict, reason, the checked bus bandwidth, floor, pairs, suspects and the
    suspects' nodes (when ``--node-names`` gave them: Volcano deletes the pods still running when it ends the check,
    so theirs are gone by then; the rows stay in the log)."""
    checked = result.checked_busbw_gbps
    data = {
        "verdict": result.verdict,
        "reason": result.reason,
        "busbw_gbps": None if checked is None else round(checked, 3),
        "floor_gbps": result.floor_gbps,
        "suspects": list(result.suspects),
        "pairs": [pair.as_json() for pair in result.pairs],
    }
    if result.node_names:
        data["suspect_nodes"] = [result.node_names[index] for index in result.suspects]
    text = json.dumps(data, sort_keys=True)
    if len(text.encode()) > SUMMARY_BYTES:
        data["reason"] = result.reason[: max(0, len(result.reason) - (len(text.encode()) - SUMMARY_BYTES) - 3)] + "..."
        text = json.dumps(data, sort_keys=True)
    return text


def benchmark_command(
    template: Sequence[str],
    hosts: Sequence[str],
    ranks_per_node: int,
    timeout: int,
    collector_port: Optional[int] = None,
    launcher: Optional[str] = None,
) -> List[str]:
    """The benchmark's command for ``hosts``: in ``template``, a word ``{hosts}`` becomes one word per host and, in
    every word, ``{ranks}`` the ranks of all hosts, ``{nodes}`` their number, ``{slots}`` ``host:ranks`` of each
    joined by commas (mpirun's ``--host``), ``{first}`` the first host, ``{launcher}`` ``launcher`` (default: the
    first host), ``{timeout}`` ``timeout`` seconds and ``{collector_port}`` ``collector_port``."""
    values = {
        "{collector_port}": str(collector_port),
        "{launcher}": launcher or hosts[0],
        "{ranks}": str(ranks_per_node * len(hosts)),
        "{nodes}": str(len(hosts)),
        "{slots}": ",".join(f"{host}:{ranks_per_node}" for host in hosts),
        "{first}": hosts[0],
        "{timeout}": str(timeout),
    }
    command: List[str] = []
    for word in template:
        if word == "{hosts}":
            command += list(hosts)
            continue
        for placeholder, value in values.items():
            word = word.replace(placeholder, value)
        command.append(word)
    return command


def bisect(
    count: int, measure: Callable[[Tuple[int, int]], PairRun], max_runs: int = MAX_PAIR_RUNS
) -> Tuple[Tuple[PairRun, ...], Tuple[int, ...], str]:
    """Find the nodes of a gang of ``count`` (3 or more) that pull its figure below the floor: measure disjoint pairs
    (``0+1``, ``2+3``, ...; with an odd count the last node with node 0), then each node of a pair below the floor with
    a node of a pair that passed (the reference): a node below the floor with the reference, or already with another
    node that cleared it (an odd count's last pair), is a suspect. With no pair passing, no node can be told from the
    fabric and none is named. At most ``max_runs`` runs. Returns the runs, the suspects (indices) and what the
    bisection found, in a sentence."""
    runs: List[PairRun] = []
    pairs = [(index, index + 1) for index in range(0, count - 1, 2)]
    if count % 2:
        pairs.append((count - 1, 0))
    good: List[int] = []
    below: List[Tuple[int, int]] = []
    for pair in pairs:
        if len(runs) == max_runs:
            break
        runs.append(measure(pair))
        if runs[-1].passed:
            good += [index for index in pair if index not in good]
        else:
            below.append(pair)
    unmeasured = sorted(
        {index for pair in pairs[len(runs) :] for index in pair} - {i for run in runs for i in run.nodes}
    )
    capped = f" (stopped after {max_runs} runs; nodes {unmeasured} not measured)" if unmeasured else ""
    if not below and unmeasured:
        return tuple(runs), (), f"every pair measured cleared the floor{capped}: no suspect among the nodes measured"
    if not below:
        return tuple(runs), (), "every pair measured cleared the floor: no single node pulls the figure down"
    if not good:
        return tuple(runs), (), f"no pair measured cleared the floor{capped}: the fabric, not a node"
    reference = good[0]
    suspects: List[int] = []
    for index in (index for pair in below for index in pair):
        if index in good or index in suspects:
            continue
        if any(index in run.nodes and set(run.nodes) & set(good) - {index} for run in runs):
            suspects.append(index)  # already below the floor with a node that cleared it (an odd count's last pair)
            continue
        if len(runs) == max_runs:
            capped = capped[:-1] + "; " if capped else " ("
            capped += f"stopped after {max_runs} runs; node {index} and any after it not measured with a reference)"
            break
        runs.append(measure((index, reference)))
        if runs[-1].passed:
            good.append(index)
        else:
            suspects.append(index)
    if not suspects:
        found = f"no node of the pairs that did not clear the floor failed it with node {reference}{capped}: no suspect"
    else:
        named = ", ".join(f"node {index}" for index in suspects)
        found = f"{named} did not clear the floor with a node that cleared it with another{capped}"
    return tuple(runs), tuple(suspects), found


def result_line(result: FabricResult, marker: str) -> str:
    """The one line that carries the result: ``marker`` and the result as JSON."""
    return marker + json.dumps(result.as_json(), sort_keys=True)


def result_from_log(text: str, marker: Optional[str] = None) -> FabricResult:
    """The result of a fabric check's log: the last line with ``marker`` (default: the library's
    :data:`~trainium_eks.core.conventions.FABRIC_RESULT_MARKER`); raises ValueError when there is none."""
    if marker is None:
        from trainium_eks.core.conventions import FABRIC_RESULT_MARKER

        marker = FABRIC_RESULT_MARKER
    for line in reversed(text.splitlines()):
        where = line.find(marker)
        if where >= 0:
            try:
                return FabricResult.from_json(json.loads(line[where + len(marker) :]))
            except json.JSONDecodeError as error:
                raise ValueError(f"the fabric result line is not JSON: {error}") from error
    raise ValueError(f"no line starting {marker!r}: the fabric check has not finished, or did not run")


def program_arguments(
    *,
    benchmark: str,
    floor_gbps: float,
    link_gbps: float,
    efa_devices: int,
    benchmark_argv: Sequence[str],
    min_size: Optional[int] = None,
    marker: Optional[str] = None,
    ranks_per_node: Optional[int] = None,
    timeout_seconds: Optional[int] = None,
    pair_timeout_seconds: Optional[int] = None,
    root_comm_port: Optional[int] = None,
    collector_port: Optional[int] = None,
    result_file: Optional[str] = None,
) -> List[str]:
    """The program's arguments (what follows ``python3 -c <source>``), with the library's result marker; ``--hosts``
    is the caller's to add, as it is known only in the pod."""
    if marker is None:
        from trainium_eks.core.conventions import FABRIC_RESULT_MARKER

        marker = FABRIC_RESULT_MARKER
    argv = ["--benchmark", benchmark, "--floor-gbps", f"{floor_gbps:g}", "--link-gbps", f"{link_gbps:g}"]
    argv += ["--efa-devices", str(efa_devices), "--marker", marker]
    for option, value in (
        ("--min-size", min_size),
        ("--ranks-per-node", ranks_per_node),
        ("--timeout-seconds", timeout_seconds),
        ("--pair-timeout-seconds", pair_timeout_seconds),
        ("--root-comm-port", root_comm_port),
        ("--collector-port", collector_port),
        ("--result-file", result_file),
    ):
        if value is not None:
            argv += [option, str(value)]
    return argv + ["--", *benchmark_argv]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fabric_program.py", usage="%(prog)s --benchmark nccom|nccl ... -- <benchmark argv...>"
    )
    parser.add_argument("--benchmark", choices=BENCHMARKS, required=True)
    parser.add_argument("--floor-gbps", type=float, required=True)
    parser.add_argument("--link-gbps", type=float, required=True)
    parser.add_argument("--efa-devices", type=int, required=True)
    parser.add_argument("--marker", required=True)
    parser.add_argument("--min-size", type=int)
    parser.add_argument("--hosts", help="the job's hosts, node 0 first, joined by commas (for the placeholders)")
    parser.add_argument("--ranks-per-node", type=int, default=1)
    parser.add_argument("--timeout-seconds", type=int, default=1800, help="{timeout} of the run on every host")
    parser.add_argument("--pair-timeout-seconds", type=int, default=240, help="{timeout} of a run on two hosts")
    parser.add_argument("--root-comm-port", type=int, help="NEURON_RT_ROOT_COMM_ID=<first host>:<port + run>")
    parser.add_argument("--collector-port", type=int, help="{collector_port} of the first run (then + 1 each run)")
    parser.add_argument("--result-file", help="where to write the result's summary (a termination message)")
    parser.add_argument("--node-names", help="the node of each host, in --hosts order, joined by commas (- unknown)")
    parser.add_argument("--device-dir", default=UVERBS_DIR, help="where the uverbs devices are (tests only)")
    return parser


def parse_arguments(argv: Sequence[str]) -> Tuple[argparse.Namespace, List[str]]:
    """(options, benchmark argv); exits with status 2 and the usage on an error."""
    parser = _parser()
    if "--" not in argv:
        parser.error("give the benchmark's command after --")
    split = list(argv).index("--")
    options = parser.parse_args(list(argv[:split]))
    benchmark = list(argv[split + 1 :])
    if not benchmark:
        parser.error("give the benchmark's command after --")
    if not (0 < options.floor_gbps <= options.link_gbps < math.inf):
        parser.error(f"--floor-gbps {options.floor_gbps:g} and --link-gbps {options.link_gbps:g}: 0 < floor <= link")
    if options.efa_devices < 1:
        parser.error(f"--efa-devices {options.efa_devices}: at least 1 (the pod's EFA interfaces)")
    if options.min_size is not None and options.min_size < 0:
        parser.error(f"--min-size {options.min_size}: a size in bytes, 0 or more")
    if not options.marker.strip():
        parser.error("--marker: the text that starts the result line")
    options.hosts = [host for host in (options.hosts or "").split(",") if host]
    options.node_names = (
        [node if node != "-" else "" for node in options.node_names.split(",")] if options.node_names else []
    )
    if options.node_names and len(options.node_names) != len(options.hosts):
        parser.error(f"--node-names names {len(options.node_names)} nodes, --hosts {len(options.hosts)} hosts")
    placeholders = sorted({p for word in benchmark for p in PLACEHOLDERS if p in word})
    if placeholders and not options.hosts:
        parser.error(f"the benchmark's command holds {', '.join(placeholders)}: give --hosts")
    if "{collector_port}" in placeholders and options.collector_port is None:
        parser.error("the benchmark's command holds {collector_port}: give --collector-port")
    for option in ("ranks_per_node", "timeout_seconds", "pair_timeout_seconds"):
        if getattr(options, option) < 1:
            parser.error(f"--{option.replace('_', '-')} {getattr(options, option)}: 1 or more")
    return options, benchmark


def run_benchmark(
    argv: Sequence[str], out: Any = None, env: Optional[Mapping[str, str]] = None
) -> Tuple[Optional[int], str, str]:
    """Run ``argv`` (in ``env``, default this process's environment) with its stderr joined to its stdout, copying
    each line to ``out`` (default stdout) as it comes; (exit status or None when it could not start, the output, why
    it could not start)."""
    out = out or sys.stdout
    try:
        process = subprocess.Popen(
            list(argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            bufsize=1,
            env=None if env is None else dict(env),
        )
    except OSError as error:
        return None, "", f"{argv[0]}: {error.strerror or error}"
    kept: List[str] = []
    assert process.stdout is not None
    for line in process.stdout:
        out.write(line)
        out.flush()
        kept.append(line)
    return process.wait(), "".join(kept), ""


def _json_report(argv: Sequence[str]) -> Optional[str]:
    """The path nccom-test writes its JSON report to, when ``argv`` asks for one."""
    for index, arg in enumerate(argv):
        if arg == "--report-to-json-file" and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith("--report-to-json-file="):
            return arg.split("=", 1)[1]
    return None


def measure(
    options: argparse.Namespace, argv: Sequence[str], environ: Mapping[str, str], efa_devices: int
) -> FabricResult:
    """Run the benchmark ``argv`` and judge what it printed (rows from nccom-test's JSON report first, written afresh
    by this run, else from the output; the transport; the floor)."""
    bench = options.benchmark
    report = _json_report(argv) if bench == "nccom" else None
    if report and os.path.isfile(report):
        os.remove(report)
    returncode, output, failure = run_benchmark(argv, env=dict(environ))
    rows: List[Row] = []
    if report and os.path.isfile(report):
        try:
            with open(report) as handle:
                rows = parse_nccom_json(json.load(handle))
        except (OSError, ValueError):
            rows = []
    if not rows:
        rows = parse_nccom_test(output) if bench == "nccom" else parse_all_reduce_perf(output)
    transport = transport_evidence(
        output,
        bench,
        fi_provider=environ.get("FI_PROVIDER"),
        efa_devices=efa_devices,
        expected_efa_devices=options.efa_devices,
    )
    return judge(
        bench,
        rows,
        returncode=returncode,
        errors=benchmark_errors(bench, output),
        transport=transport,
        floor_gbps=options.floor_gbps,
        link_gbps=options.link_gbps,
        min_size=options.min_size,
        failure=failure,
    )


def run_on(
    options: argparse.Namespace,
    template: Sequence[str],
    hosts: Sequence[str],
    timeout: int,
    environ: Mapping[str, str],
    efa_devices: int,
    run: int = 0,
) -> FabricResult:
    """:func:`measure` on ``hosts`` (all when no ``--hosts`` was given: ``template`` is then the command as it is),
    the ``run``-th run of this check (from 0), on its own ports."""
    collector = None if options.collector_port is None else options.collector_port + run
    launcher = options.hosts[0] if options.hosts else None
    argv = list(template)
    if hosts:
        argv = benchmark_command(template, hosts, options.ranks_per_node, timeout, collector, launcher)
    run_environ = dict(environ)
    if hosts and options.root_comm_port is not None:
        run_environ["NEURON_RT_ROOT_COMM_ID"] = f"{hosts[0]}:{options.root_comm_port + run}"
    print(f"fabric check: running {' '.join(argv)}", flush=True)
    return measure(options, argv, run_environ, efa_devices)


def finish(result: FabricResult, options: argparse.Namespace) -> int:
    """Print the table and the result line, write the summary to ``--result-file``; the exit status."""
    print(render(result), flush=True)
    print(result_line(result, options.marker), flush=True)
    if options.result_file:
        try:
            with open(options.result_file, "w") as handle:
                handle.write(summary(result))
        except OSError as error:
            print(f"fabric check: could not write {options.result_file}: {error}", flush=True)
    return result.exit_code


def main(argv: Optional[Sequence[str]] = None, environ: Mapping[str, str] = os.environ) -> int:
    options, template = parse_arguments(sys.argv[1:] if argv is None else argv)
    hosts = tuple(options.hosts)
    found = count_uverbs(options.device_dir)
    if found != options.efa_devices:
        reason = (
            f"{found} EFA devices ({options.device_dir}/uverbs*) in this pod, {options.efa_devices} expected: the pod "
            "must request vpc.amazonaws.com/efa equal to the node's EFA interfaces, and the EFA device plugin run there"
        )
        transport = {"verdict": "not-efa", "efa_devices": found, "expected_efa_devices": options.efa_devices}
        result = FabricResult(
            options.benchmark,
            (),
            options.floor_gbps,
            options.link_gbps,
            "not-efa",
            reason,
            transport,
            options.min_size,
            hosts=hosts,
            node_names=tuple(options.node_names),
        )
        print(f"fabric check: {reason}", flush=True)
        return finish(result, options)
    print(f"fabric check: {found} EFA devices", flush=True)
    result = run_on(options, template, hosts, options.timeout_seconds, environ, found)
    result = replace(result, hosts=hosts, node_names=tuple(options.node_names))
    if result.verdict != "below-floor" or len(hosts) < 3:
        return finish(result, options)
    print(render(result), flush=True)
    print(f"fabric check: below the floor on {len(hosts)} nodes; measuring pairs of them", flush=True)

    runs = [0]

    def pair_run(pair: Tuple[int, int]) -> PairRun:
        runs[0] += 1
        pair_hosts = [hosts[i] for i in pair]
        measured = run_on(options, template, pair_hosts, options.pair_timeout_seconds, environ, found, runs[0])
        print(render(measured, title=f"pair {pair[0]} + {pair[1]}"), flush=True)
        return PairRun(pair, measured.verdict, measured.checked_busbw_gbps)

    pairs, suspects, found_text = bisect(len(hosts), pair_run)
    verdict = "suspect-nodes" if suspects else result.verdict
    reason = f"{result.reason}; {found_text}"
    return finish(replace(result, verdict=verdict, reason=reason, pairs=pairs, suspects=suspects), options)


if __name__ == "__main__":
    sys.exit(main())

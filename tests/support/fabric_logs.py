"""Benchmark output for the fabric tests, written in the documented formats of nccom-test's user guide (aws-neuron-sdk
``tools/neuron-sys-tools/nccom-test.rst``) and nccl-tests' ``src/util.cu``; the figures are made up to be consistent
(algbw = size / time, busbw = algbw x 2(r-1)/r), not measurements. And the verdict of the fabric program on them."""

from trainium_eks.manifests.jobs.fabric_program import (
    benchmark_errors,
    judge,
    parse_all_reduce_perf,
    parse_nccom_test,
    transport_evidence,
)

# 2 x trn1.32xlarge, 64 ranks (nccom-test -r 64 -N 2 -b 8 -e 2G -f 2 -d fp32 allr --hosts ...); a subset of sizes.
NCCOM_HEALTHY = """\
       size(B)    count(elems)    type    time:avg(us)    algbw(GB/s)    busbw(GB/s)
             8               2    fp32          410.12           0.00           0.00
          1024             256    fp32          452.87           0.00           0.00
       1048576          262144    fp32         1290.55           0.76           1.49
      33554432         8388608    fp32         2405.10          12.99          25.58
     268435456        67108864    fp32         9800.42          25.51          50.22
    1073741824       268435456    fp32        36750.00          27.21          53.58
    2147483648       536870912    fp32        72600.18          27.55          54.24
Avg bus bandwidth:      26.4414GB/s
"""

NCCOM_SLOW = """\
       size(B)    count(elems)    type    time:avg(us)    algbw(GB/s)    busbw(GB/s)
      33554432         8388608    fp32         6100.00           5.12          10.09
    2147483648       536870912    fp32       393000.00           5.09          10.02
Avg bus bandwidth:      10.0550GB/s
"""

# Older releases print time(us); a failed size prints a failure instead of figures, naming its log file in the
# container's temporary folder (elided here: the parser reads only the failure).
NCCOM_OLD_WITH_A_FAILURE = """\
           size(B)    count(elems)    type    time(us)    algbw(GB/s)    busbw(GB/s)
           1048576          262144    fp32        1328           0.74           1.45
          33554432    Failure running neuron-bench - log file .../nccom_test_log_7pqpdfjf.log
1 errors found - test failed
"""

NCCOM_WITH_ALGORITHM_AND_PERCENTILES = """\
size(B)  count(elems)  type  time:avg(us)  time:p50(us)  time:p99(us)  algbw(GB/s)  busbw(GB/s)  algorithm
 2097152        524288  fp32        686.32           686           690         3.06         5.73        rdh
536870912    134217728  fp32       9689.51          9689          9701        55.41       103.89  kangaring
Avg bus bandwidth:	54.8100GB/s
"""

NCCOM_NO_EFA = """\
2026-Dec-01 10:00:03.0080 93703:93705 [0] nccl_net_ofi_init:1415 CCOM WARN NET/OFI aws-ofi-nccl initialization failed
2026-Dec-01 10:00:03.0080 93703:93705 [0] init.cc:99 CCOM WARN OFI plugin initNet() failed is EFA enabled?
2026-Dec-01 10:00:15.0924 93703:93705 [0] init.cc:655 CCOM WARN Unable to run multi-instance workload.  Ofi plugin \
is not installed or EFA is not enabled
       size(B)    count(elems)    type    time:avg(us)    algbw(GB/s)    busbw(GB/s)
    2147483648    Failure running neuron-bench - log file .../nccom_test_log_x.log
1 errors found - test failed
"""

TAG = "[1,0]<stdout>:"


def nccl_header() -> str:
    """The result header of nccl-tests, as ``writeResultHeader`` (``src/util.cu``) prints it."""
    lines = [
        "#",
        "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          " % (("",) * 5),
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s "
        % (
            "size",
            "count",
            "type",
            "redop",
            "root",
            "time",
            "algbw",
            "busbw",
            "#wrong",
            "time",
            "algbw",
            "busbw",
            "#wrong",
        ),
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s "
        % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", ""),
    ]
    return "".join(TAG + line + "\n" for line in lines)


def nccl_row(size, out_of_place, in_place, wrong="0") -> str:
    """A result line as ``writeBenchmarkLinePreamble``/``writeBenchmarkLineBody`` print it: size, count, type, redop,
    root, then time, algbw, busbw and #wrong out of place and in place."""
    line = "%12li  %12li  %8s  %6s  %6s" % (size, size // 4, "float", "sum", "    -1")
    for time, algbw, busbw in (out_of_place, in_place):
        line += "  %7s  %6s  %6s  %6s" % (time, algbw, busbw, wrong)
    return TAG + line + "\n"


def nccl_footer(out_of_bounds=0, average="23.0257") -> str:
    """The footer of ``writeResultFooter``."""
    state = "FAILED" if out_of_bounds else "OK"
    lines = [
        "# %-20s : %d %s" % ("Out of bounds values", out_of_bounds, state),
        "# %-20s : %s " % ("Avg bus bandwidth", average),
        "#",
        "# Collective test concluded: all_reduce_perf",
    ]
    return "".join(TAG + line + "\n" for line in lines)


NCCL_HEADER = nccl_header()

# 2 x p4d.24xlarge, 16 ranks (mpirun --tag-output -np 16 ... -x NCCL_DEBUG=INFO all_reduce_perf -b 8 -e 2G -f 2 -c 1).
NCCL_HEALTHY = (
    """\
[1,0]<stdout>:# nThread 1 nGpus 1 minBytes 8 maxBytes 2147483648 step: 2(factor) warmup iters: 1 iters: 10 \
agg iters: 1 validation: 1 graph: 0
[1,0]<stdout>:#
[1,0]<stdout>:# Using devices
[1,0]<stdout>:#  Rank  0 Group  0 Pid     42 on   fabric-0 device  0 [0000:10:1c] NVIDIA A100-SXM4-40GB
[1,0]<stdout>:#  Rank  8 Group  0 Pid     40 on   fabric-1 device  0 [0000:10:1c] NVIDIA A100-SXM4-40GB
[1,0]<stdout>:fabric-0:42:60 [0] NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.21.1
[1,0]<stdout>:fabric-0:42:60 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa (found 4 nics)
[1,0]<stdout>:fabric-0:42:60 [0] NCCL INFO Using network Libfabric
[1,8]<stdout>:fabric-1:40:58 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa (found 4 nics)
[1,8]<stdout>:fabric-1:40:58 [0] NCCL INFO Using network Libfabric
[1,0]<stdout>:fabric-0:42:71 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/Libfabric/0/GDRDMA
"""
    + NCCL_HEADER
    + nccl_row(8, ("75.31", "0.00", "0.00"), ("74.90", "0.00", "0.00"))
    + nccl_row(1024, ("76.02", "0.01", "0.03"), ("75.88", "0.01", "0.03"))
    + nccl_row(1048576, ("160.5", "6.53", "12.25"), ("161.0", "6.51", "12.21"))
    + nccl_row(33554432, ("2210.7", "15.18", "28.46"), ("2215.3", "15.15", "28.40"))
    + nccl_row(268435456, ("13100.0", "20.49", "38.42"), ("13150.0", "20.41", "38.28"))
    + nccl_row(1073741824, ("49800.0", "21.56", "40.43"), ("49900.0", "21.52", "40.35"))
    + nccl_row(2147483648, ("97000.0", "22.14", "41.51"), ("96500.0", "22.25", "41.73"))
    + nccl_footer()
)

NCCL_SOCKET = (
    """\
[1,0]<stdout>:fabric-0:42:60 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so.
[1,0]<stdout>:fabric-0:42:60 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.1.17<0>
[1,0]<stdout>:fabric-0:42:60 [0] NCCL INFO Using network Socket
"""
    + NCCL_HEADER
    + nccl_row(2147483648, ("3300000", "0.65", "1.22"), ("3290000", "0.65", "1.22"), wrong="N/A")
    + nccl_footer(average="1.22")
)

NCCL_SLOW_EFA = (
    """\
[1,0]<stdout>:fabric-0:42:60 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa (found 1 nics)
[1,0]<stdout>:fabric-0:42:60 [0] NCCL INFO Using network Libfabric
"""
    + NCCL_HEADER
    + nccl_row(2147483648, ("429500", "5.00", "9.38"), ("430100", "4.99", "9.36"))
    + nccl_footer(average="9.38")
)

# nccl-tests of 2019 (no root column, "error" instead of "#wrong"), aws-ofi-nccl before 1.14 ("Provider").
NCCL_OLD = """\
NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)
#                                                     out-of-place                       in-place
#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2   float     sum    163.4    0.00    0.00  2e-07    164.4    0.00    0.00  1e-07
  1073741824     268435456   float     sum    1.2e+05    8.95   16.78  2e-07    1.1e+05    9.76   18.30  2e-07
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 8.1
"""

NCCL_CORRUPT = (
    NCCL_HEADER
    + nccl_row(2147483648, ("97000.0", "22.14", "41.51"), ("96500.0", "22.25", "41.73"), wrong="12")
    + nccl_footer(out_of_bounds=24)
)


def verdict(text, benchmark="nccom", returncode=0, floor=200.0, link=800.0, min_size=None, fi_provider="efa"):
    rows = parse_nccom_test(text) if benchmark == "nccom" else parse_all_reduce_perf(text)
    transport = transport_evidence(text, benchmark, fi_provider=fi_provider, efa_devices=8, expected_efa_devices=8)
    return judge(
        benchmark,
        rows,
        returncode=returncode,
        errors=benchmark_errors(benchmark, text),
        transport=transport,
        floor_gbps=floor,
        link_gbps=link,
        min_size=min_size,
    )

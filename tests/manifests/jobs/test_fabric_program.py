"""The fabric acceptance program: its parsers on output written in the benchmarks' documented formats, the transport
evidence, the verdict, and the program itself run as the job runs it (``python3 -c <source> ...``, standard library
only) with a fake benchmark and a fake uverbs directory.

The samples below are written in the formats of nccom-test's user guide (aws-neuron-sdk
``tools/neuron-sys-tools/nccom-test.rst``) and nccl-tests' ``src/util.cu``; their figures are made up to be
consistent (algbw = size / time, busbw = algbw x 2(r-1)/r), not measurements."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.fabric_logs import (
    NCCL_CORRUPT,
    NCCL_HEADER,
    NCCL_HEALTHY,
    NCCL_OLD,
    NCCL_SLOW_EFA,
    NCCL_SOCKET,
    NCCOM_HEALTHY,
    NCCOM_NO_EFA,
    NCCOM_OLD_WITH_A_FAILURE,
    NCCOM_SLOW,
    NCCOM_WITH_ALGORITHM_AND_PERCENTILES,
    verdict,
)
from trainium_eks.core.conventions import FABRIC_RESULT_MARKER
from trainium_eks.manifests.jobs.fabric_check import FABRIC_PROGRAM_SOURCE
from trainium_eks.manifests.jobs.fabric_program import (
    BELOW_FLOOR,
    BENCHMARK_FAILED,
    GIB,
    NOT_EFA,
    PASS,
    USAGE,
    FabricResult,
    PairRun,
    Row,
    benchmark_command,
    benchmark_errors,
    bisect,
    parse_all_reduce_perf,
    parse_arguments,
    parse_nccom_json,
    parse_nccom_test,
    program_arguments,
    render,
    result_from_log,
    result_line,
    summary,
    transport_evidence,
)


def program_source() -> str:
    """The program as the job ships it (:data:`~trainium_eks.manifests.jobs.fabric_check.FABRIC_PROGRAM_SOURCE`)."""
    return FABRIC_PROGRAM_SOURCE


def uverbs(tmp_path: Path, count: int) -> Path:
    devices = tmp_path / "infiniband"
    devices.mkdir()
    for index in range(count):
        (devices / f"uverbs{index}").write_text("")
    (devices / "rdma_cm").write_text("")
    return devices


def fake_benchmark(tmp_path: Path, output: str, exit_code: int = 0, json_report: str = "") -> list:
    """The argv of a fake benchmark that prints ``output`` line by line (and writes ``json_report`` to the path after
    ``--report-to-json-file``, as nccom-test does), records that it ran, and exits ``exit_code``."""
    (tmp_path / "output.txt").write_text(output)
    (tmp_path / "report.json").write_text(json_report)
    script = tmp_path / "bench.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys, pathlib
            here = pathlib.Path({str(tmp_path)!r})
            (here / "ran").write_text(" ".join(sys.argv[1:]))
            if "--report-to-json-file" in sys.argv and (here / "report.json").read_text():
                target = sys.argv[sys.argv.index("--report-to-json-file") + 1]
                pathlib.Path(target).write_text((here / "report.json").read_text())
            for line in (here / "output.txt").read_text().splitlines():
                print(line, flush=True)
            sys.exit({exit_code})
            """
        )
    )
    return [sys.executable, str(script)]


def run_program(args, env=None):
    """The program run as the job runs it, isolated from the library and site-packages (standard library only)."""
    return subprocess.run(
        [sys.executable, "-I", "-S", "-c", program_source(), *args],
        capture_output=True,
        text=True,
        env=env or {"PATH": "/usr/bin:/bin"},
        timeout=120,
    )


def marker_result(stdout: str) -> FabricResult:
    return result_from_log(stdout, FABRIC_RESULT_MARKER)


def base_args(devices: Path, benchmark="nccom", floor=200, link=800, efa=8):
    return program_arguments(benchmark=benchmark, floor_gbps=floor, link_gbps=link, efa_devices=efa, benchmark_argv=[])[
        :-1
    ] + ["--device-dir", str(devices), "--"]


# --- parsers ----------------------------------------------------------------------------------------------------


def test_nccom_rows_are_read_by_their_header_and_converted_from_gib_per_second():
    rows = parse_nccom_test(NCCOM_HEALTHY)
    assert [row.bytes for row in rows] == [8, 1024, 1048576, 33554432, 268435456, 1073741824, 2147483648]
    last = rows[-1]
    assert last.time_us == 72600.18
    assert last.busbw_gbs == pytest.approx(54.24 * GIB / 1e9)
    assert last.busbw_gbps == pytest.approx(54.24 * GIB * 8 / 1e9)
    assert last.algbw_gbs == pytest.approx(27.55 * GIB / 1e9)


def test_nccom_old_time_column_and_a_failed_size():
    rows = parse_nccom_test(NCCOM_OLD_WITH_A_FAILURE)
    assert [(row.bytes, row.time_us) for row in rows] == [(1048576, 1328.0)]
    assert "Failure running neuron-bench" in benchmark_errors("nccom", NCCOM_OLD_WITH_A_FAILURE)
    assert benchmark_errors("nccom", NCCOM_HEALTHY) is None


def test_nccom_extra_columns_do_not_move_the_figures():
    rows = parse_nccom_test(NCCOM_WITH_ALGORITHM_AND_PERCENTILES)
    assert [(row.bytes, row.time_us) for row in rows] == [(2097152, 686.32), (536870912, 9689.51)]
    assert rows[1].busbw_gbs == pytest.approx(103.89 * GIB / 1e9)


def test_nccom_json_report():
    report = {
        "results": [
            {
                "size(B)": 1024,
                "count(elems)": 256,
                "type": "fp32",
                "algbw(GB/s)": 0.165,
                "busbw(GB/s)": 0.160,
                "time:avg(us)": 6.19,
            },
            {
                "size(B)": 524288,
                "count(elems)": 131072,
                "type": "fp32",
                "algbw(GB/s)": 22.69,
                "busbw(GB/s)": 21.98,
                "time:avg(us)": 23.11,
            },
        ]
    }
    rows = parse_nccom_json(report)
    assert [(row.bytes, row.time_us) for row in rows] == [(1024, 6.19), (524288, 23.11)]
    assert rows[1].busbw_gbs == pytest.approx(21.98 * GIB / 1e9)
    assert parse_nccom_json({"nothing": []}) == [] and parse_nccom_json([1, 2]) == []


def test_nccl_rows_take_the_better_of_out_of_place_and_in_place_and_drop_the_mpirun_tags():
    rows = parse_all_reduce_perf(NCCL_HEALTHY)
    assert [row.bytes for row in rows] == [8, 1024, 1048576, 33554432, 268435456, 1073741824, 2147483648]
    assert rows[-1] == Row(2147483648, 96500.0, 22.25, 41.73)  # in-place was better
    assert rows[-2] == Row(1073741824, 49800.0, 21.56, 40.43)  # out-of-place was better
    assert benchmark_errors("nccl", NCCL_HEALTHY) is None


def test_nccl_without_the_root_column_and_with_exponents():
    rows = parse_all_reduce_perf(NCCL_OLD)
    assert rows[-1] == Row(1073741824, 1.1e5, 9.76, 18.30)


def test_nccl_na_in_the_wrong_column_and_out_of_bounds_data():
    assert parse_all_reduce_perf(NCCL_SOCKET)[0].busbw_gbs == 1.22
    assert "24 FAILED" in benchmark_errors("nccl", NCCL_CORRUPT)


def test_the_parsers_find_nothing_in_the_other_benchmark_or_in_noise():
    assert parse_nccom_test(NCCL_HEALTHY) == []
    assert parse_all_reduce_perf(NCCOM_HEALTHY) == []
    assert parse_all_reduce_perf("1 2 3\n# size count\n") == []


# --- transport evidence -----------------------------------------------------------------------------------------


def test_nccl_over_efa_in_the_log():
    found = transport_evidence(NCCL_HEALTHY, "nccl")
    assert (found["verdict"], found["how"], found["providers"], found["networks"]) == (
        "efa",
        "log",
        ["efa"],
        ["Libfabric"],
    )
    assert any("Selected provider is efa" in line for line in found["evidence"])


def test_aws_ofi_nccl_before_1_14_spells_it_provider():
    assert transport_evidence(NCCL_OLD, "nccl")["verdict"] == "efa"


def test_nccl_socket_is_not_efa():
    found = transport_evidence(NCCL_SOCKET, "nccl")
    assert found["verdict"] == "not-efa" and "Socket" in found["reason"]


def test_a_libfabric_provider_other_than_efa_is_not_efa():
    text = "h:1:2 [0] NCCL INFO NET/OFI Selected provider is tcp, fabric is 10.0.0.0/16 (found 1 nics)\n"
    assert transport_evidence(text, "nccl")["verdict"] == "not-efa"


def test_nccl_without_debug_lines_is_unconfirmed_even_with_fi_provider_efa():
    found = transport_evidence(NCCL_HEADER, "nccl", fi_provider="efa", efa_devices=4, expected_efa_devices=4)
    assert found["verdict"] == "unconfirmed" and "NCCL_DEBUG=INFO" in found["reason"]


def test_neuron_says_when_it_has_no_efa():
    found = transport_evidence(NCCOM_NO_EFA, "nccom", fi_provider="efa", efa_devices=8, expected_efa_devices=8)
    assert found["verdict"] == "not-efa" and "aws-ofi-nccl initialization failed" in found["reason"]


def test_neuron_without_log_lines_counts_as_efa_by_its_configuration_only():
    by_config = transport_evidence(NCCOM_HEALTHY, "nccom", fi_provider="efa", efa_devices=8, expected_efa_devices=8)
    assert (by_config["verdict"], by_config["how"]) == ("efa", "configuration")
    assert transport_evidence(NCCOM_HEALTHY, "nccom", efa_devices=8, expected_efa_devices=8)["verdict"] == "unconfirmed"
    wrong_count = transport_evidence(NCCOM_HEALTHY, "nccom", fi_provider="efa", efa_devices=7, expected_efa_devices=8)
    assert wrong_count["verdict"] == "unconfirmed"
    listed = transport_evidence(NCCOM_HEALTHY, "nccom", fi_provider="efa,tcp", efa_devices=8, expected_efa_devices=8)
    assert listed["verdict"] == "unconfirmed"


def test_a_provider_line_in_a_neuron_log_counts():
    text = "CCOM INFO NET/OFI Selected provider is efa, fabric is efa (found 8 nics)\n" + NCCOM_HEALTHY
    assert transport_evidence(text, "nccom")["verdict"] == "efa"


# --- verdict, result line ---------------------------------------------------------------------------------------


def test_the_floor_applies_to_the_largest_size_unless_a_minimum_is_given():
    healthy = verdict(NCCOM_HEALTHY)
    assert healthy.verdict == "pass" and healthy.checked_busbw_gbps == pytest.approx(54.24 * GIB * 8 / 1e9)
    assert [row.bytes for row in healthy.checked_rows] == [2147483648]
    # 32 MiB and up: the best of those sizes counts.
    assert verdict(NCCOM_HEALTHY, min_size=33554432, floor=460).verdict == "pass"
    assert verdict(NCCOM_HEALTHY, floor=470).verdict == "below-floor"
    slow = verdict(NCCOM_SLOW)
    assert slow.verdict == "below-floor" and "< floor 200" in slow.reason and slow.exit_code == BELOW_FLOOR


def test_a_failed_benchmark_and_no_rows_fail_as_the_benchmark():
    assert verdict(NCCOM_HEALTHY, returncode=1).verdict == "benchmark-failed"
    assert verdict("nothing to see\n").verdict == "benchmark-failed"
    assert verdict(NCCL_CORRUPT, benchmark="nccl").verdict == "benchmark-failed"
    assert verdict(NCCOM_HEALTHY, min_size=4 * GIB).verdict == "benchmark-failed"


def test_a_transport_the_log_shows_not_to_be_efa_explains_a_failure():
    assert verdict(NCCOM_NO_EFA, returncode=1).verdict == "not-efa"
    assert verdict(NCCOM_HEALTHY, fi_provider=None).verdict == "not-efa"  # unconfirmed on a benchmark that passed
    assert verdict(NCCOM_HEALTHY, returncode=1, fi_provider=None).verdict == "benchmark-failed"


def test_the_result_line_round_trips_and_the_last_one_wins():
    first = verdict(NCCOM_SLOW)
    last = verdict(NCCOM_HEALTHY)
    log = f"noise\n{result_line(first, FABRIC_RESULT_MARKER)}\nmore\n{result_line(last, FABRIC_RESULT_MARKER)}\n"
    read = result_from_log(log)  # the library's marker by default
    assert read == last
    data = json.loads(result_line(last, FABRIC_RESULT_MARKER)[len(FABRIC_RESULT_MARKER) :])
    assert data["rows"][-1]["bytes"] == 2147483648 and data["rows"][-1]["busbw_gbps"] == pytest.approx(465.93, 0.01)
    assert (data["floor_gbps"], data["link_gbps"], data["verdict"]) == (200.0, 800.0, "pass")
    assert data["transport"]["how"] == "configuration"
    assert data["peak_busbw_gbs"] == pytest.approx(58.24, 0.01)


def test_a_log_without_a_result_says_so():
    with pytest.raises(ValueError, match="has not finished"):
        result_from_log("nothing\n")
    with pytest.raises(ValueError, match="not JSON"):
        result_from_log(FABRIC_RESULT_MARKER + "{broken\n")


def test_the_table_shows_size_bandwidth_share_of_the_link_and_the_floor():
    table = render(verdict(NCCOM_HEALTHY), title="train-1")
    assert table.splitlines()[0] == "train-1 (nccom all-reduce): PASS"
    assert "2 GiB" in table and "58.24" in table and "465.9" in table and "58.2" in table
    assert "floor 200 Gbps (25.00 GB/s), link 800 Gbps; transport: efa (configuration)" in table
    assert "BELOW" in render(verdict(NCCOM_SLOW))


def test_the_arguments_the_chart_passes_parse_back_with_the_library_marker():
    argv = program_arguments(
        benchmark="nccl",
        floor_gbps=100,
        link_gbps=400,
        efa_devices=4,
        benchmark_argv=["mpirun", "-np", "16"],
        min_size=1 << 20,
    )
    options, benchmark = parse_arguments(argv)
    assert benchmark == ["mpirun", "-np", "16"]
    assert (options.benchmark, options.floor_gbps, options.link_gbps, options.efa_devices) == ("nccl", 100, 400, 4)
    assert options.marker == FABRIC_RESULT_MARKER and options.min_size == 1 << 20


@pytest.mark.parametrize(
    "argv",
    [
        ["--benchmark", "nccom", "--floor-gbps", "1", "--link-gbps", "2", "--efa-devices", "8", "--marker", "m"],
        [
            "--benchmark",
            "nccom",
            "--floor-gbps",
            "3",
            "--link-gbps",
            "2",
            "--efa-devices",
            "8",
            "--marker",
            "m",
            "--",
            "x",
        ],
        [
            "--benchmark",
            "gloo",
            "--floor-gbps",
            "1",
            "--link-gbps",
            "2",
            "--efa-devices",
            "8",
            "--marker",
            "m",
            "--",
            "x",
        ],
        [
            "--benchmark",
            "nccl",
            "--floor-gbps",
            "1",
            "--link-gbps",
            "2",
            "--efa-devices",
            "0",
            "--marker",
            "m",
            "--",
            "x",
        ],
        ["--benchmark", "nccl", "--floor-gbps", "1", "--link-gbps", "2", "--efa-devices", "4", "--", "x"],
    ],
    ids=["no-benchmark", "floor-above-link", "unknown-benchmark", "no-efa", "no-marker"],
)
def test_usage_errors_exit_2(argv):
    with pytest.raises(SystemExit) as stopped:
        parse_arguments(argv)
    assert stopped.value.code == USAGE


# --- the program, run as the job runs it ---------------------------------------------------------------------------


def test_a_healthy_neuron_run_streams_the_output_then_the_table_and_the_result(tmp_path):
    devices = uverbs(tmp_path, 8)
    bench = fake_benchmark(tmp_path, NCCOM_HEALTHY)
    done = run_program(base_args(devices) + bench, env={"PATH": "/usr/bin:/bin", "FI_PROVIDER": "efa"})
    assert done.returncode == PASS, done.stdout + done.stderr
    out = done.stdout
    assert out.index("2147483648       536870912") < out.index("(nccom all-reduce): PASS")
    assert out.splitlines()[-1].startswith(FABRIC_RESULT_MARKER)
    result = marker_result(out)
    assert result.verdict == "pass" and len(result.rows) == 7
    assert result.transport["efa_devices"] == 8 and result.transport["how"] == "configuration"


def test_too_few_uverbs_devices_stop_before_the_benchmark(tmp_path):
    devices = uverbs(tmp_path, 7)
    bench = fake_benchmark(tmp_path, NCCOM_HEALTHY)
    done = run_program(base_args(devices) + bench, env={"PATH": "/usr/bin:/bin", "FI_PROVIDER": "efa"})
    assert done.returncode == NOT_EFA
    assert not (tmp_path / "ran").exists()
    assert f"7 EFA devices ({devices}/uverbs*) in this pod, 8 expected" in done.stdout
    result = marker_result(done.stdout)
    assert (result.verdict, result.rows, result.transport["efa_devices"]) == ("not-efa", (), 7)


def test_a_neuron_run_without_fi_provider_efa_is_not_accepted(tmp_path):
    devices = uverbs(tmp_path, 8)
    done = run_program(base_args(devices) + fake_benchmark(tmp_path, NCCOM_HEALTHY))
    assert done.returncode == NOT_EFA
    assert "FI_PROVIDER=efa" in marker_result(done.stdout).reason


def test_nccl_over_sockets_fails_as_not_efa_and_slow_efa_as_below_floor(tmp_path):
    devices = uverbs(tmp_path, 4)
    args = base_args(devices, benchmark="nccl", floor=100, link=400, efa=4)
    socket = run_program(args + fake_benchmark(tmp_path, NCCL_SOCKET))
    assert socket.returncode == NOT_EFA and "NCCL network Socket" in marker_result(socket.stdout).reason
    slow = run_program(args + fake_benchmark(tmp_path, NCCL_SLOW_EFA))
    assert slow.returncode == BELOW_FLOOR and marker_result(slow.stdout).verdict == "below-floor"
    healthy = run_program(args + fake_benchmark(tmp_path, NCCL_HEALTHY))
    assert healthy.returncode == PASS and marker_result(healthy.stdout).transport["how"] == "log"


def test_a_benchmark_that_fails_cannot_start_or_prints_nothing_readable(tmp_path):
    devices = uverbs(tmp_path, 8)
    env = {"PATH": "/usr/bin:/bin", "FI_PROVIDER": "efa"}
    failed = run_program(base_args(devices) + fake_benchmark(tmp_path, NCCOM_HEALTHY, exit_code=1), env=env)
    assert failed.returncode == BENCHMARK_FAILED and "exited 1" in marker_result(failed.stdout).reason
    missing = run_program(base_args(devices) + [str(tmp_path / "no-such-benchmark")], env=env)
    assert missing.returncode == BENCHMARK_FAILED and "could not start" in marker_result(missing.stdout).reason
    garbled = run_program(base_args(devices) + fake_benchmark(tmp_path, "Segmentation fault\n"), env=env)
    assert garbled.returncode == BENCHMARK_FAILED and "no nccom result rows" in marker_result(garbled.stdout).reason


def test_nccom_json_report_is_preferred_to_the_table(tmp_path):
    devices = uverbs(tmp_path, 8)
    report = {
        "results": [
            {
                "size(B)": 4294967296,
                "count(elems)": 1,
                "type": "fp32",
                "algbw(GB/s)": 30.0,
                "busbw(GB/s)": 59.06,
                "time:avg(us)": 143165.58,
            }
        ]
    }
    bench = fake_benchmark(tmp_path, NCCOM_HEALTHY, json_report=json.dumps(report))
    target = tmp_path / "nccom-results.json"
    done = run_program(
        base_args(devices) + bench + ["--report-to-json-file", str(target)],
        env={"PATH": "/usr/bin:/bin", "FI_PROVIDER": "efa"},
    )
    assert done.returncode == PASS, done.stdout
    assert [row.bytes for row in marker_result(done.stdout).rows] == [4294967296]


def test_a_usage_error_exits_2_without_a_result_line(tmp_path):
    done = run_program(["--benchmark", "nccom", "--floor-gbps", "1"])
    assert done.returncode == USAGE and FABRIC_RESULT_MARKER not in done.stdout
    assert "usage: fabric_program.py" in done.stderr


# --- bisection: which node pulls the figure down --------------------------------------------------------------------


def measured_with(slow):
    """A measure of pairs: below the floor when the pair holds a node of ``slow``; the pairs asked, in order."""
    asked = []

    def measure(pair):
        asked.append(pair)
        below = bool(set(pair) & set(slow))
        return PairRun(pair, "below-floor" if below else "pass", 90.0 if below else 380.0)

    return measure, asked


@pytest.mark.parametrize(
    "count,slow,asked,suspects",
    [
        (4, {2}, [(0, 1), (2, 3), (2, 0), (3, 0)], (2,)),
        (6, {4}, [(0, 1), (2, 3), (4, 5), (4, 0), (5, 0)], (4,)),
        (5, {4}, [(0, 1), (2, 3), (4, 0)], (4,)),
        (3, {0}, [(0, 1), (2, 0)], ()),
        (6, {1, 4}, [(0, 1), (2, 3), (4, 5), (0, 2), (4, 2), (5, 2)], (1, 4)),
    ],
    ids=["one-of-four", "one-of-six-the-readme", "odd-last-pair-reused", "no-reference", "two-of-six"],
)
def test_a_bisection_names_each_node_below_the_floor_with_a_node_that_cleared_it(count, slow, asked, suspects):
    measure, seen = measured_with(slow)
    runs, found, sentence = bisect(count, measure)
    assert seen == asked and found == suspects
    assert [run.nodes for run in runs] == asked
    if suspects:
        named = ", ".join(f"node {index}" for index in suspects)
        assert sentence == f"{named} did not clear the floor with a node that cleared it with another"
    else:
        assert sentence == "no pair measured cleared the floor: the fabric, not a node"


def test_a_bisection_names_no_node_when_every_pair_clears_the_floor_and_stops_at_its_runs():
    measure, seen = measured_with(set())
    runs, found, sentence = bisect(4, measure)
    assert (seen, found) == ([(0, 1), (2, 3)], ())
    assert sentence == "every pair measured cleared the floor: no single node pulls the figure down"
    measure, seen = measured_with({23})
    runs, found, sentence = bisect(24, measure, max_runs=10)
    assert len(seen) == 10 and found == ()
    assert sentence == (
        "every pair measured cleared the floor (stopped after 10 runs; nodes [20, 21, 22, 23] not measured): "
        "no suspect among the nodes measured"
    ), "a gang of more than 20 nodes is not measured whole: it says which nodes were not"
    measure, seen = measured_with({1, 19})
    runs, found, sentence = bisect(20, measure, max_runs=11)
    assert len(seen) == 11 and found == (1,)
    assert sentence.endswith("(stopped after 11 runs; node 18 and any after it not measured with a reference)")


def test_the_benchmark_command_for_any_hosts_fills_the_placeholders():
    template = [
        "timeout",
        "{timeout}",
        "bench",
        "-r",
        "{ranks}",
        "-N",
        "{nodes}",
        "--hosts",
        "{hosts}",
        "-c",
        "{first}",
    ]
    template += ["--host", "{slots}", "--port", "{collector_port}"]
    assert benchmark_command(template, ["a", "b", "c"], 8, 240, 60007) == [
        "timeout",
        "240",
        "bench",
        "-r",
        "24",
        "-N",
        "3",
        "--hosts",
        "a",
        "b",
        "c",
        "-c",
        "a",
        "--host",
        "a:8,b:8,c:8",
        "--port",
        "60007",
    ]


def test_placeholders_without_hosts_and_counts_below_one_are_usage_errors():
    base = ["--benchmark", "nccom", "--floor-gbps", "1", "--link-gbps", "2", "--efa-devices", "8", "--marker", "m"]
    with pytest.raises(SystemExit):
        parse_arguments(base + ["--", "bench", "--hosts", "{hosts}"])
    with pytest.raises(SystemExit):
        parse_arguments(base + ["--hosts", "a,b", "--ranks-per-node", "0", "--", "bench"])
    with pytest.raises(SystemExit):
        parse_arguments(base + ["--hosts", "a,b", "--", "bench", "--port", "{collector_port}"])
    options, _ = parse_arguments(base + ["--hosts", "a,b,", "--", "bench", "{hosts}"])
    assert options.hosts == ["a", "b"]


def test_the_summary_fits_a_termination_message_and_carries_pairs_and_suspects():
    pairs = tuple(PairRun((index, 0), "below-floor", 90.123456) for index in range(1, 11))
    result = FabricResult("nccom", (), 200, 800, "suspect-nodes", "x" * 10_000, pairs=pairs, suspects=(3,))
    text = summary(result)
    assert len(text.encode()) <= 4096
    data = json.loads(text)
    assert data["suspects"] == [3] and data["pairs"][0] == {
        "nodes": [1, 0],
        "verdict": "below-floor",
        "busbw_gbps": 90.123,
        "passed": False,
    }
    assert data["reason"].endswith("...") and data["floor_gbps"] == 200
    back = FabricResult.from_json(json.loads(json.dumps(result.as_json())))
    assert back.pairs == tuple(PairRun(p.nodes, p.verdict, 90.123) for p in pairs) and back.suspects == (3,)


PAIR_BENCHMARK = """
import json, os, sys, pathlib
here = pathlib.Path({here!r})
argv = sys.argv[1:]
hosts = argv[argv.index("--hosts") + 1 : argv.index("--data-collector-host")]
with open(here / "runs.jsonl", "a") as log:
    log.write(json.dumps({{"argv": argv, "root": os.environ.get("NEURON_RT_ROOT_COMM_ID")}}) + "\\n")
output = here / ("slow.txt" if {slow!r} in hosts else "healthy.txt")
print(output.read_text(), flush=True)
"""


def pair_benchmark(tmp_path: Path, slow: str) -> list:
    """A fake nccom-test whose figure is below the floor when ``slow`` is among its ``--hosts``; it logs each run."""
    (tmp_path / "healthy.txt").write_text(NCCOM_HEALTHY)
    (tmp_path / "slow.txt").write_text(NCCOM_SLOW)
    script = tmp_path / "nccom-test.py"
    script.write_text(PAIR_BENCHMARK.format(here=str(tmp_path), slow=slow))
    return [sys.executable, str(script), "-r", "{ranks}", "-N", "{nodes}", "--hosts", "{hosts}"]


def test_below_the_floor_on_four_nodes_the_program_names_the_slow_one_and_writes_its_summary(tmp_path):
    devices = uverbs(tmp_path, 8)
    hosts = ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"]
    args = base_args(devices)[:-1] + ["--hosts", ",".join(hosts), "--ranks-per-node", "32"]
    args += ["--root-comm-port", "63182", "--result-file", str(tmp_path / "termination-log"), "--"]
    bench = pair_benchmark(tmp_path, slow="10.0.0.3") + ["--data-collector-host", "{first}"]
    done = run_program(args + bench, env={"PATH": "/usr/bin:/bin", "FI_PROVIDER": "efa"})
    assert done.returncode == 6, done.stdout + done.stderr
    runs = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    ran = [run["argv"][run["argv"].index("--hosts") + 1 : run["argv"].index("--data-collector-host")] for run in runs]
    assert ran == [hosts, hosts[:2], hosts[2:], [hosts[2], hosts[0]], [hosts[3], hosts[0]]]
    assert [run["argv"][1] for run in runs] == ["128", "64", "64", "64", "64"], "-r: 32 ranks a node"
    roots = [f"{ran[i][0]}:{63182 + i}" for i in range(5)]
    assert [run["root"] for run in runs] == roots, "node 0 of each run is the root, on a port of the run's own"
    summary_data = json.loads((tmp_path / "termination-log").read_text())
    assert summary_data["verdict"] == "suspect-nodes" and summary_data["suspects"] == [2]
    assert [pair["passed"] for pair in summary_data["pairs"]] == [True, False, False, True]
    result = marker_result(done.stdout)
    assert result.suspects == (2,) and result.hosts == tuple(hosts)
    assert "node 2 did not clear the floor with a node that cleared it with another" in result.reason
    assert "suspects: node 2 (10.0.0.3)" in render(result)


def test_below_the_floor_on_two_nodes_no_pair_can_tell_them_apart(tmp_path):
    devices = uverbs(tmp_path, 8)
    args = base_args(devices)[:-1] + ["--hosts", "10.0.0.1,10.0.0.3", "--result-file", str(tmp_path / "t"), "--"]
    bench = pair_benchmark(tmp_path, slow="10.0.0.3") + ["--data-collector-host", "{first}"]
    done = run_program(args + bench, env={"PATH": "/usr/bin:/bin", "FI_PROVIDER": "efa"})
    assert done.returncode == BELOW_FLOOR
    assert len((tmp_path / "runs.jsonl").read_text().splitlines()) == 1, "two nodes: the whole check is the one pair"
    assert json.loads((tmp_path / "t").read_text())["suspects"] == []

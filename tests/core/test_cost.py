"""What a training system costs: the constructs' prices per hour, the stacks' cost outputs, and the ``cost`` command."""

import json
import struct
from datetime import timedelta

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam

from tests.support.apps import COMPOSER_TRAINING, REPO, TRAINIUM_EKS, build_default_stack, new_app
from trainium_eks.commands import cost as command
from trainium_eks.constructs.cluster import TrainingCluster
from trainium_eks.constructs.lustre_storage import LustreStorage
from trainium_eks.constructs.network import TrainingNetwork
from trainium_eks.constructs.training_node_group import TrainingNodeGroup
from trainium_eks.core.cost import NO_PRICE_WARNING, CostLine, total
from trainium_eks.facts.pricing import HOURS_PER_MONTH

GP3_PER_GIB_HOUR = 0.08 / HOURS_PER_MONTH


def network_stack(region="us-east-1", az_id="use1-az6"):
    env = cdk.Environment(region=region) if region else None
    stack = cdk.Stack(new_app(), "Costs", env=env)
    return stack, TrainingNetwork(stack, "Network", node_az_id=az_id)


def imported_cluster(stack, network):
    return eks.Cluster.from_cluster_attributes(
        stack,
        "Imported",
        cluster_name="c",
        vpc=network.vpc,
        cluster_security_group_id="sg-0123456789abcdef0",
        kubectl_provider=eks.KubectlProvider.from_kubectl_provider_attributes(
            stack,
            "Kubectl",
            service_token="arn:aws:lambda:us-east-1:123456789012:function:kubectl",
            role=iam.Role.from_role_arn(stack, "KubectlRole", "arn:aws:iam::123456789012:role/kubectl"),
        ),
    )


def warnings_of(stack):
    return [
        m.entry.data
        for m in cdk.App.of(stack).synth().get_stack_by_name(stack.stack_name).messages
        if m.level.name == "WARNING"
    ]


# --- The constructs' prices ---------------------------------------------------------------------------------------


def test_node_group_price_is_its_instances_and_root_volumes_in_the_stacks_region():
    stack, network = network_stack()
    nodes = TrainingNodeGroup(
        stack, "Nodes", cluster=imported_cluster(stack, network), subnet=network.node_subnet, node_count=2
    )
    assert nodes.usd_per_hour == pytest.approx(2 * 21.50 + 2 * 500 * GP3_PER_GIB_HOUR)
    assert nodes.cost_line == CostLine(
        "Trainium nodes", "2 x trn1.32xlarge standing, 500 GiB gp3 each", nodes.usd_per_hour, idle=True
    ), "a managed node group's nodes bill whether a job runs or not"


def test_an_environment_agnostic_stack_has_no_price_and_says_so_at_synth():
    stack, network = network_stack(region=None, az_id="usw2-az4")
    nodes = TrainingNodeGroup(
        stack, "Nodes", cluster=imported_cluster(stack, network), subnet=network.node_subnet, node_count=2
    )
    assert nodes.usd_per_hour is None and network.usd_per_hour is None
    messages = [m for m in warnings_of(stack) if "No verified on-demand price" in m]
    assert any("2 x trn1.32xlarge in an environment-agnostic stack" in m for m in messages)
    assert any(NO_PRICE_WARNING in m for m in messages)


def test_network_price_is_one_nat_gateway_per_az():
    _, network = network_stack()
    assert network.nat_gateway_count == 2
    assert network.usd_per_hour == pytest.approx(2 * 0.045)


def test_lustre_price_follows_size_and_throughput_tier():
    stack, network = network_stack()
    storage = LustreStorage(stack, "Lustre", vpc=network.vpc, subnet=network.node_subnet)
    assert storage.usd_per_hour == pytest.approx(1200 * 0.21 / HOURS_PER_MONTH)
    faster = LustreStorage(
        stack,
        "Faster",
        vpc=network.vpc,
        subnet=network.node_subnet,
        storage_capacity_gib=2400,
        throughput_per_tib=1000,
    )
    assert faster.usd_per_hour == pytest.approx(2400 * 0.60 / HOURS_PER_MONTH)


@pytest.mark.parametrize("version, rate", [("1.36", 0.10), ("1.34", 0.60)])
def test_control_plane_price_knows_extended_support(version, rate):
    stack, network = network_stack()
    cluster = TrainingCluster(stack, "Cluster", vpc=network.vpc, kubernetes_version=version)
    assert cluster.control_plane_usd_per_hour == pytest.approx(rate)
    assert cluster.system_nodes_usd_per_hour == pytest.approx(2 * 0.2016 + 2 * 100 * GP3_PER_GIB_HOUR)
    assert [line.idle for line in cluster.cost_lines] == [True, True]


def test_total_names_what_it_lacks():
    summed = total([CostLine("a", "1", 1.5, True), CostLine("b", "1", None, True), CostLine("c", "1", 0.25, False)])
    assert summed.usd_per_hour == pytest.approx(1.75) and summed.missing == ("b",)


# --- The stacks' outputs --------------------------------------------------------------------------------------------


def test_stack_outputs_are_the_sums_of_its_cost_lines_and_list_every_line():
    _, stack = build_default_stack(COMPOSER_TRAINING, region="us-east-1", composerAzId="use1-az6")
    outputs = assertions.Template.from_stack(stack).to_json()["Outputs"]
    idle = [line for line in stack.cost_lines if line.idle]
    assert float(outputs["IdleClusterUsdPerHour"]["Value"]) == pytest.approx(total(idle).usd_per_hour, abs=0.005)
    for line in idle:
        assert line.component in outputs["IdleClusterUsdPerHour"]["Description"]
    assert "Lower bound" not in outputs["IdleClusterUsdPerHour"]["Description"]
    gp3 = 0.08 / 730
    expected_idle = 0.10 + 2 * 0.045 + 2 * (0.2016 + 100 * gp3) + 0.30 / 730
    assert float(outputs["IdleClusterUsdPerHour"]["Value"]) == pytest.approx(expected_idle, abs=0.005)
    assert float(outputs["TrainingNodesUsdPerHour"]["Value"]) == pytest.approx(1.006 + 200 * gp3, abs=0.005), (
        "a GPU node's root volume is 200 GiB"
    )


def test_the_seed_stack_in_us_east_1_splits_idle_and_training_cost():
    _, stack = build_default_stack(TRAINIUM_EKS, region="us-east-1", trainiumAzId="use1-az6")
    outputs = assertions.Template.from_stack(stack).to_json()["Outputs"]
    gp3 = 0.08 / 730
    lustre = 1200 * 0.21 / 730  # PERSISTENT_2 at 250 MB/s/TiB
    idle = 0.10 + 2 * 0.045 + 2 * (0.2016 + 100 * gp3) + lustre
    assert float(outputs["IdleClusterUsdPerHour"]["Value"]) == pytest.approx(idle, abs=0.005)
    assert float(outputs["TrainingNodesUsdPerHour"]["Value"]) == pytest.approx(2 * (21.50 + 500 * gp3), abs=0.005)


def test_a_missing_price_makes_the_output_a_stated_lower_bound():
    _, stack = build_default_stack(TRAINIUM_EKS)  # us-west-2: no verified FSx for Lustre price
    description = assertions.Template.from_stack(stack).to_json()["Outputs"]["IdleClusterUsdPerHour"]["Description"]
    assert "FSx for Lustre (1200 GiB at 250 MB/s/TiB) no verified price" in description
    assert description.endswith("Lower bound: without FSx for Lustre.")


# --- The command ----------------------------------------------------------------------------------------------------


def vcjob(phase="Completed", running="2026-11-30T10:00:00Z", end="2026-11-30T11:30:00Z"):
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "resnet-baseline-0123456789"},
        "status": {
            "state": {"phase": phase, "lastTransitionTime": end},
            "conditions": [
                {"status": "Pending", "lastTransitionTime": "2026-11-30T09:00:00Z"},
                {"status": "Running", "lastTransitionTime": running},
                {"status": phase, "lastTransitionTime": end},
            ],
        },
    }


@pytest.mark.parametrize(
    "text, expected",
    [("1h20m", timedelta(hours=1, minutes=20)), ("45m", timedelta(minutes=45)), ("1.5h", timedelta(hours=1.5))],
)
def test_durations_in_gos_form(text, expected):
    assert command.parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "soon", "1d", "h", "-5m"])
def test_bad_durations_are_refused(text):
    with pytest.raises(command.CostError, match="such as 1h20m"):
        command.parse_duration(text)


def test_a_volcano_run_lasts_from_running_to_completed_not_from_creation():
    run = command.run_of(vcjob())
    assert run == command.Run("vcjob/resnet-baseline-0123456789", timedelta(hours=1, minutes=30))


def test_a_batch_job_lasts_from_start_to_completion():
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "cifar10-data-0123456789"},
        "status": {"startTime": "2026-11-30T10:00:00Z", "completionTime": "2026-11-30T10:03:00Z"},
    }
    assert command.run_of(job).duration == timedelta(minutes=3)


@pytest.mark.parametrize(
    "job, message",
    [
        (vcjob(phase="Running"), "not Completed"),
        ({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "status": {}}, "has not completed"),
        ({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "t"}}, "--duration"),
    ],
)
def test_unfinished_or_unknown_jobs_are_refused(job, message):
    with pytest.raises(command.CostError, match=message):
        command.run_of(job)


def test_render_marks_missing_prices_and_compares_runs():
    stack = command.StackCost(
        "S",
        "us-west-2",
        [
            CostLine("EKS control plane", "1", 0.10, True),
            CostLine("Disk", "1", None, True),
            CostLine("GPU", "1", 2.0, False),
        ],
    )
    runs = [command.Run("baseline", timedelta(hours=2)), command.Run("recipe", timedelta(hours=1))]
    text = command.render(stack, hours=10, runs=runs)
    assert "n/a" in text and "* idle cluster: without Disk (no verified price in us-west-2)" in text
    assert "21.00 *" in text, "whole stack over 10 hours, a lower bound"
    assert "baseline: 2:00:00 = 2.00 h, 4.20 USD (4.00)" in text
    assert "recipe: 1:00:00 = 1.00 h, 2.10 USD (2.00); 0.50 x the time of baseline, +2.10 USD saved" in text


def test_nodes_launched_for_a_run_bill_from_its_creation_to_the_end_of_the_idle_timeout():
    job = vcjob()
    job["metadata"]["creationTimestamp"] = "2026-11-30T09:54:00Z"
    run = command.run_of(job)
    assert (run.duration, run.waited) == (timedelta(hours=1, minutes=30), timedelta(minutes=6))
    stack = command.StackCost(
        "S",
        "us-west-2",
        [
            CostLine("EKS control plane", "1", 0.10, True),
            CostLine("Trainium nodes", "2 x trn1.32xlarge while a job runs", 40.0, False, tail_hours=1 / 6),
        ],
    )
    nodes = 40.0 * (1.5 + 0.1 + 1 / 6)
    assert command.run_nodes_usd(stack.lines[1:], run) == pytest.approx(nodes)
    text = command.render(stack, runs=[run])
    assert f"1:30:00 = 1.50 h, {0.10 * 1.5 + nodes:,.2f} USD ({nodes:,.2f})" in text


def test_a_batch_job_waits_from_creation_to_its_start():
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "creationTimestamp": "2026-11-30T09:55:00Z"},
        "status": {"startTime": "2026-11-30T10:00:00Z", "completionTime": "2026-11-30T10:03:00Z"},
    }
    assert command.run_of(job).waited == timedelta(minutes=5)


COMPOSER_IN_US_EAST_1 = (
    *("--project", str(REPO), "--stack", COMPOSER_TRAINING),
    *("-c", "region=us-east-1", "-c", "composerAzId=use1-az6"),
)
"""The cost command's arguments for the ComposerTraining stack in us-east-1 (priced there)."""


def summary(name, final, seconds, points):
    """The last line a Composer run prints (images/composer-resnet/train_composer.py)."""
    return json.dumps({"run_name": name, "final_accuracy": final, "fit_s": seconds, "accuracy_by_epoch": points})


def test_later_runs_are_priced_to_the_first_runs_accuracy_as_mosaicml_compares_recipes(tmp_path, capsys):
    baseline, mild, short = (tmp_path / f"{name}.log" for name in ("baseline", "mild", "short"))
    baseline.write_text("epoch 1\n" + summary("resnet-baseline", 0.90, 3600, [[1, 1800, 0.80], [2, 3600, 0.90]]))
    mild.write_text(summary("resnet-mild", 0.91, 1800, [[1, 900, 0.85], [2, 1350, 0.905], [3, 1800, 0.91]]) + "\n")
    short.write_text(summary("resnet-short", 0.70, 600, [[1, 600, 0.70]]))
    argv = list(COMPOSER_IN_US_EAST_1)
    for path in (baseline, mild, short):
        argv += ["--run-summary", str(path)]
    assert command.main(argv) == 0
    out = capsys.readouterr().out
    lines = {line.split(":")[0].strip(): line for line in out.splitlines() if line.startswith("    resnet-")}
    assert lines["resnet-baseline"].startswith("    resnet-baseline: 90.00 % after 1.00 h, ")
    assert "; reached resnet-baseline's 90.00 % after 0.38 h (0.38 x its time, " in lines["resnet-mild"]
    assert lines["resnet-short"].endswith("; never reached resnet-baseline's 90.00 %")


def test_a_restarted_run_is_priced_for_the_fit_time_of_all_its_attempts(tmp_path, capsys):
    """A run restarted from its checkpoint took the fit time of every attempt (``total_fit_s``), not its last
    attempt's (``fit_s``), and its accuracy history counts seconds from its first attempt; a resumed run's summary
    that holds only its last attempt is priced as it is and says so."""
    restarted, recipe, old = (tmp_path / f"{name}.json" for name in ("restarted", "recipe", "old"))
    points = [[1, 1500, 0.80], [2, 2400, 0.85], [3, 3600, 0.90]]
    run = {"run_name": "resnet-baseline", "final_accuracy": 0.90, "accuracy_by_epoch": points}
    restarted.write_text(json.dumps({**run, "start_epoch": 2, "fit_s": 1200, "attempts": 2, "total_fit_s": 3600}))
    recipe.write_text(summary("resnet-mild", 0.91, 2700, [[1, 900, 0.85], [2, 1800, 0.90], [3, 2700, 0.91]]))
    last_only = {"run_name": "resnet-old", "final_accuracy": 0.90, "start_epoch": 2, "fit_s": 1800}
    old.write_text(json.dumps({**last_only, "accuracy_by_epoch": [[3, 1800, 0.90]]}))
    argv = list(COMPOSER_IN_US_EAST_1)
    for path in (restarted, recipe, old):
        argv += ["--run-summary", str(path)]
    assert command.main(argv) == 0
    out = capsys.readouterr().out
    lines = {line.split(":")[0].strip(): line for line in out.splitlines() if line.startswith("    resnet-")}
    assert lines["resnet-baseline"].startswith("    resnet-baseline: 90.00 % after 1.00 h, ")
    assert lines["resnet-baseline"].endswith(" USD (2 attempts)")
    assert "; reached resnet-baseline's 90.00 % after 0.50 h (0.50 x its time, " in lines["resnet-mild"]
    assert lines["resnet-old"].startswith("    resnet-old: 90.00 % after 0.50 h, ")
    assert " (last attempt only, from epoch 2: the earlier ones are not in it); reached " in lines["resnet-old"]
    assert "  accuracy (fit time of every attempt from each run's summary; " in out


@pytest.mark.parametrize(
    "text, message",
    [
        ("no json here", "no JSON line"),
        (json.dumps({"run_name": "x"}), "no final_accuracy"),
        (json.dumps({"final_accuracy": 0.9, "accuracy_by_epoch": [[1, 0.9]]}), "[[epoch, seconds, accuracy], ...]"),
    ],
)
def test_a_file_that_is_not_a_run_summary_is_refused(tmp_path, capsys, text, message):
    path = tmp_path / "log.txt"
    path.write_text(text)
    argv = ["--project", str(REPO), "--stack", COMPOSER_TRAINING, "--run-summary", str(path)]
    assert command.main(argv) == 2
    assert message in capsys.readouterr().err


def test_the_command_prices_the_app_and_two_runs(tmp_path, capsys):
    baseline, recipe = tmp_path / "baseline.json", tmp_path / "recipe.json"
    baseline.write_text(json.dumps(vcjob()))
    recipe.write_text(json.dumps(vcjob(end="2026-11-30T10:45:00Z")))
    status = command.main(
        [
            *COMPOSER_IN_US_EAST_1,
            "--job-status",
            str(baseline),
            "--job-status",
            str(recipe),
            "--chart",
            str(tmp_path / "cost.png"),
        ]
    )
    out = capsys.readouterr().out
    assert status == 0, out
    assert out.startswith("ComposerTraining (us-east-1), on-demand list prices")
    assert "1 x g5.xlarge" in out and "0.50 x the time of vcjob/resnet-baseline-0123456789" in out
    png = (tmp_path / "cost.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", png[16:24])[0] > 500


@pytest.mark.parametrize(
    "argv, message",
    [
        (["-c", "nodeCount=zero"], "nodeCount='zero'"),
        (["-c", "oops"], "key=value"),
        (["--hours", "-1"], "positive number of hours"),
        (["--duration", "1h"], "give --stack"),
    ],
)
def test_bad_input_ends_with_one_message_and_status_2(argv, message, capsys):
    assert command.main(["--project", str(REPO), *argv]) == 2
    assert message in capsys.readouterr().err


def test_outside_the_project_the_command_says_where_to_run(tmp_path, capsys):
    assert command.main(["--project", str(tmp_path)]) == 2
    assert "not the project directory" in capsys.readouterr().err

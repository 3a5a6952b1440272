"""The documentation's figures that are cheap to compute are what the commands compute today: the test count (Tests),
the rehearsal's scenario count (Deploy behaviour), the cost table (Cost) and the README's stacks table."""

import re
import subprocess
import sys

from tests.support.apps import REPO
from tests.support.documentation import README, page

README_COUNT = re.compile(r"`make test` runs, offline \(([0-9,]+) tests")


def test_the_readme_quotes_the_number_of_tests_pytest_collects():
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    # "N tests collected", or "N/M tests collected (K deselected)": make test leaves out the e2e tests (marker e2e).
    found = re.search(r"^([0-9]+)(?:/[0-9]+)? tests collected", collected.stdout, flags=re.MULTILINE)
    assert found, collected.stdout[-2000:] + collected.stderr[-2000:]
    quoted = README_COUNT.search(page("tests.md"))
    assert quoted, "docs/tests.md names the count"
    assert int(quoted.group(1).replace(",", "")) == int(found.group(1)), "update the test count of docs/tests.md"


def test_the_readme_quotes_the_number_of_rehearsal_scenarios():
    from rehearsal.scenarios import all_scenarios

    quoted = re.search(r"([0-9]+) scenarios: a fresh deploy of each", page("deploy-behaviour.md"))
    assert quoted and int(quoted.group(1)) == len(all_scenarios()), (
        "update the scenario count of docs/deploy-behaviour.md"
    )


def _quoted_figure(lines) -> str:
    """A sum as ``python -m trainium_eks cost`` prints it (of the lines rounded to cents, so that the table adds up
    as printed), ``+ FSx`` where FSx has no price."""
    summed = sum(round(line.usd_per_hour, 2) for line in lines if line.usd_per_hour is not None)
    unpriced = any(line.usd_per_hour is None and line.component == "FSx for Lustre" for line in lines)
    return f"{summed:.2f}" + (" + FSx" if unpriced else "")


def test_the_readmes_idle_and_training_table_is_what_the_cost_command_computes():
    """Cost section: each stack's idle and training sums, with Karpenter and with standing node groups."""
    from trainium_eks.commands.cost import stack_costs

    cost = page("cost.md")
    karpenter = {c.name: c for c in stack_costs(REPO, [])}
    standing = {c.name: c for c in stack_costs(REPO, ["provisioning=node-group"])}
    for name in ("TrainiumEks", "KubeflowTraining", "ComposerTraining"):
        cells = [
            _quoted_figure([line for line in costs.lines if line.idle is idle])
            for costs in (karpenter[name], standing[name])
            for idle in (True, False)
        ]
        row = f"| {name} | " + " | ".join(cells) + " |"
        assert row in cost, f"update the table of docs/cost.md: {row}"


def test_the_readmes_stacks_table_quotes_the_cost_commands_figures():
    """The README's table of the three stacks: idle and running-job figures with Karpenter, and idle with standing node
    groups, as the Cost page's table has them."""
    from trainium_eks.commands.cost import stack_costs

    karpenter = {c.name: c for c in stack_costs(REPO, [])}
    standing = {c.name: c for c in stack_costs(REPO, ["provisioning=node-group"])}
    rows = {
        line.split("`")[1]: line.split("|")
        for line in README.read_text().splitlines()
        if re.match(r"\| `[A-Za-z]+` \(`[A-Za-z]+Stack`\) \|", line)
    }
    for name in ("TrainiumEks", "KubeflowTraining", "ComposerTraining"):
        idle, job = (_quoted_figure([line for line in karpenter[name].lines if line.idle is i]) for i in (True, False))
        standing_idle = _quoted_figure([line for line in standing[name].lines if line.idle])
        cells = [cell.strip() for cell in rows[name][4:7]]
        quoted = [cells[0].split(" (")[0], cells[1], cells[2]]
        assert quoted == [idle, job, standing_idle], f"update the README's {name} row"

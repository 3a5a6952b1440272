"""The README's figures that are cheap to compute are what the commands compute today: the test count, the
rehearsal's scenario count, the cost table."""

import re
import subprocess
import sys

from tests.support.apps import REPO

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
    quoted = README_COUNT.search((REPO / "README.md").read_text())
    assert quoted, "the README's Tests section names the count"
    assert int(quoted.group(1).replace(",", "")) == int(found.group(1)), "update the README's test count"


def test_the_readme_quotes_the_number_of_rehearsal_scenarios():
    from rehearsal.scenarios import all_scenarios

    quoted = re.search(r"([0-9]+) scenarios: a fresh deploy of each", (REPO / "README.md").read_text())
    assert quoted and int(quoted.group(1)) == len(all_scenarios()), "update the README's scenario count"


def _quoted_figure(lines) -> str:
    """A sum as ``python -m trainium_eks cost`` prints it (of the lines rounded to cents, so that the table adds up
    as printed), ``+ FSx`` where FSx has no price."""
    summed = sum(round(line.usd_per_hour, 2) for line in lines if line.usd_per_hour is not None)
    unpriced = any(line.usd_per_hour is None and line.component == "FSx for Lustre" for line in lines)
    return f"{summed:.2f}" + (" + FSx" if unpriced else "")


def test_the_readmes_idle_and_training_table_is_what_the_cost_command_computes():
    """Cost section: each stack's idle and training sums, with Karpenter and with standing node groups."""
    from trainium_eks.commands.cost import stack_costs

    readme = (REPO / "README.md").read_text()
    karpenter = {c.name: c for c in stack_costs(REPO, [])}
    standing = {c.name: c for c in stack_costs(REPO, ["provisioning=node-group"])}
    for name in ("TrainiumEks", "KubeflowTraining", "ComposerTraining"):
        cells = [
            _quoted_figure([line for line in costs.lines if line.idle is idle])
            for costs in (karpenter[name], standing[name])
            for idle in (True, False)
        ]
        row = f"| {name} | " + " | ".join(cells) + " |"
        assert row in readme, f"update the README's Cost table: {row}"

"""python -m trainium_eks cost: each table adds up as printed."""

import re

import pytest

from tests.support.apps import REPO
from trainium_eks.commands import cost

FIGURE = re.compile(r"(-?[0-9][0-9,]*\.[0-9]{2})(?: \*)?$")


@pytest.fixture(scope="module")
def tables():
    return {costs.name: cost.render(costs, hours=10) for costs in cost.stack_costs(REPO, [])}


def columns(line):
    """The USD figures at the end of a table line (per hour, and over the hours)."""
    cells = re.split(r"\s{2,}", line.strip())
    return [float(FIGURE.match(cell).group(1).replace(",", "")) for cell in cells[-2:] if FIGURE.match(cell)]


@pytest.mark.parametrize("stack", ["TrainiumEks", "KubeflowTraining", "ComposerTraining"])
def test_every_sum_is_the_sum_of_the_figures_printed_above_it(tables, stack):
    lines = tables[stack].splitlines()
    rule = next(index for index, line in enumerate(lines) if set(line.strip()) <= {"-", " "} and line.strip())
    components = [columns(line) for line in lines[2:rule]]
    sums = {line.split("  ")[1].strip(): columns(line) for line in lines[rule + 1 : rule + 4]}
    priced = [figures for figures in components if len(figures) == 2]
    whole = [round(sum(figures[i] for figures in priced), 2) for i in (0, 1)]
    assert sums["whole stack"] == whole, tables[stack]
    both = [round(sums["idle cluster"][i] + sums["training nodes"][i], 2) for i in (0, 1)]
    assert both == whole, tables[stack]


def test_a_stack_the_app_does_not_have_is_named_with_the_nearest_one(capsys):
    assert cost.main(["--stack", "Composer", "--project", str(REPO)]) == 2
    error = capsys.readouterr().err
    assert error.strip() == "error: --stack Composer: the app has no such stack; did you mean ComposerTraining?"


def test_a_stack_far_from_every_name_gets_the_list(capsys):
    assert cost.main(["--stack", "Mine", "--project", str(REPO)]) == 2
    assert "the app's stacks are TrainiumEks, KubeflowTraining, ComposerTraining" in capsys.readouterr().err

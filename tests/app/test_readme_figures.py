"""The README's test count is what pytest collects today."""

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
    found = re.search(r"^([0-9]+) tests collected", collected.stdout, flags=re.MULTILINE)
    assert found, collected.stdout[-2000:] + collected.stderr[-2000:]
    quoted = README_COUNT.search((REPO / "README.md").read_text())
    assert quoted, "the README's Tests section names the count"
    assert int(quoted.group(1).replace(",", "")) == int(found.group(1)), "update the README's test count"

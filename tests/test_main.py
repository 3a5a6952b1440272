"""python -m trainium_eks: dispatch, one-line errors, and a help without markup."""

import subprocess
import sys

import pytest
from botocore import exceptions

import trainium_eks.__main__ as cli
from tests.support.apps import REPO


def test_an_unknown_command_is_named_in_one_line_with_the_commands(capsys):
    assert cli.main(["bogus"]) == 2
    err = capsys.readouterr().err
    commands = "admin-role, run, cost, preflight, fabric, release, status"
    assert err == f"error: unknown command 'bogus': one of {commands} (python -m trainium_eks --help)\n"


def test_help_is_plain_text(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m trainium_eks <command>") and "``" not in out


def test_a_botocore_error_of_a_command_is_one_line_and_exit_1(monkeypatch, capsys):
    class Failing:
        @staticmethod
        def main(argv):
            raise exceptions.NoCredentialsError()

    monkeypatch.setattr(cli.importlib, "import_module", lambda name: Failing)
    assert cli.main(["admin-role"]) == 1
    assert capsys.readouterr().err.startswith("error: no AWS credentials: sign in")


def test_a_defect_still_shows_its_traceback(monkeypatch):
    class Broken:
        @staticmethod
        def main(argv):
            raise KeyError("a defect")

    monkeypatch.setattr(cli.importlib, "import_module", lambda name: Broken)
    with pytest.raises(KeyError):
        cli.main(["run"])


def test_admin_role_without_credentials_prints_one_line_and_no_traceback(tmp_path):
    env = {
        "PATH": "/usr/bin:/bin",
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    done = subprocess.run(
        [sys.executable, "-m", "trainium_eks", "admin-role"], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert done.returncode == 1
    assert done.stderr.startswith("error: no AWS credentials") and "Traceback" not in done.stderr

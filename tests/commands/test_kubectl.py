"""kubectl as the commands run it: its output, an exit status the caller accepts, or one line saying what to do."""

import sys

import pytest

from trainium_eks.commands.kubectl import KubectlError, kubectl


def fake(tmp_path, status, out="", err=""):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "kubectl"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nsys.stdout.write({out!r} + sys.stdin.read())\n"
        f"sys.stderr.write({err!r})\nsys.exit({status})\n"
    )
    script.chmod(0o755)
    return bin_dir


def test_its_output_with_the_input_given(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(fake(tmp_path, 0, out="job.batch/x ")))
    assert kubectl(["create", "-f", "-"], "TrainiumEks", "create", stdin="{}") == "job.batch/x {}"


def test_an_exit_status_the_caller_accepts_is_an_answer_and_any_other_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(fake(tmp_path, 1, out="no", err="\nError from server (Forbidden): nope\n")))
    assert kubectl(["auth", "can-i"], "TrainiumEks", "auth can-i", ok_codes=(0, 1)) == "no"
    with pytest.raises(KubectlError) as raised:
        kubectl(["get", "pods"], "TrainiumEks", "get pods")
    assert str(raised.value).startswith("kubectl get pods failed (Error from server (Forbidden): nope): point kubectl")


def test_without_kubectl_it_says_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(KubectlError, match="kubectl is not installed"):
        kubectl(["version"], "TrainiumEks", "version")

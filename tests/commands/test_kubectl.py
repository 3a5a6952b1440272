"""kubectl as the commands run it: its output, an exit status the caller accepts, or one line saying what to do."""

import sys

import pytest

from trainium_eks.commands.kubectl import KubectlError, kubectl, reason


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


def test_a_failure_is_one_line_the_last_that_is_not_a_log_line_or_a_warning(tmp_path, monkeypatch):
    stderr = (
        'E1205 12:00:00.1 memcache.go:265] "Unhandled Error" err="couldn\'t get current server API group list"\n'
        "Warning: deprecated\n"
        "The connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?\n"
    )
    monkeypatch.setenv("PATH", str(fake(tmp_path, 1, err=stderr)))
    with pytest.raises(KubectlError) as raised:
        kubectl(["get", "pods"], "TrainiumEks", "get pods")
    assert str(raised.value).startswith("kubectl get pods failed (The connection to the server 127.0.0.1:6443 was")
    assert "point kubectl at the cluster of stack TrainiumEks" in str(raised.value)
    assert reason("", 3) == "exit 3"


def test_without_kubectl_it_says_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(KubectlError, match="kubectl is not installed"):
        kubectl(["version"], "TrainiumEks", "version")

"""MountedProgram: a program without its docstring, in a ConfigMap named after its digest."""

import hashlib

import pytest

from trainium_eks.core.validation import ConfigurationError
from trainium_eks.manifests.jobs.mounted_program import MountedProgram, MountedProgramChart, program_source


def test_the_program_runs_as_code_only_and_a_program_without_a_module_docstring_is_refused(tmp_path):
    program = tmp_path / "p.py"
    program.write_text(
        '"""Doc\n\nmore."""\n\nimport os  # a comment\nx = """s"""\n"""What x is."""\n\n\n'
        'def f():\n    """Doc of f."""\n\n\nclass C:\n    """Doc of C."""\n\n    y = 1\n    """What y is."""\n'
    )
    assert program_source(program) == "import os\nx = 's'\n\ndef f():\n    pass\n\nclass C:\n    y = 1\n"
    program.write_text("import os\n")
    with pytest.raises(ValueError, match="starts with its module docstring"):
        program_source(program)


def test_the_configmap_is_named_after_the_programs_digest_and_holds_it_under_its_file_name():
    program = MountedProgram(name="demo-program", file="demo.py", mount="/opt/demo", source="print(1)\n")
    digest = hashlib.sha256(b"print(1)\n").hexdigest()[:10]
    assert program.config_map == f"trainium-eks-demo-program-{digest}" and program.path == "/opt/demo/demo.py"
    (config_map,) = MountedProgramChart(program, component="demo", namespace="jobs").manifests()
    assert config_map["metadata"]["name"] == program.config_map and config_map["metadata"]["namespace"] == "jobs"
    assert config_map["data"] == {"demo.py": "print(1)\n"}
    other = MountedProgram(name="demo-program", file="demo.py", mount="/opt/demo", source="print(2)\n")
    assert other.config_map != program.config_map, "a changed program is a new ConfigMap"
    with pytest.raises(ConfigurationError, match="namespace"):
        MountedProgramChart(program, component="demo", namespace="Jobs")

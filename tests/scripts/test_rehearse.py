"""scripts/rehearse.py: each synth warning is printed once for the whole rehearsal, read from the cloud assemblies."""

import importlib.util
from pathlib import Path

import aws_cdk as cdk

from tests.support.apps import REPO

SPEC = importlib.util.spec_from_file_location("rehearse", REPO / "scripts" / "rehearse.py")
rehearse = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(rehearse)


def test_the_rehearsals_apps_keep_their_warnings_out_of_the_validation_report():
    apps = rehearse.Apps()
    app = apps.new(stacks="TrainiumEks")
    assert app.node.try_get_context("@aws-cdk/core:annotationsInValidationReport") is False
    assert app.node.try_get_context("stacks") == "TrainiumEks"
    assert apps.outdirs == [Path(app.outdir)]


def test_a_warning_is_new_once_across_stacks_and_assemblies(tmp_path):
    outdirs = []
    for number in range(2):
        app = cdk.App(outdir=str(tmp_path / f"assembly-{number}"), context=rehearse.QUIET)
        for name in ("One", "Two"):
            stack = cdk.Stack(app, name)
            cdk.CfnWaitConditionHandle(stack, "Nothing")
            cdk.Annotations.of(stack).add_warning_v2("test:same", "the same warning")
        cdk.Annotations.of(stack).add_warning_v2("test:other", f"a warning of assembly {number}")
        app.synth()
        outdirs.append(Path(app.outdir))
    seen = set()
    same, other = "the same warning [ack: test:same]", "a warning of assembly {} [ack: test:other]"
    assert rehearse.new_warnings(outdirs[:1], seen) == [same, other.format(0)]
    assert rehearse.new_warnings(outdirs, seen) == [other.format(1)]
    assert rehearse.new_warnings(outdirs, seen) == []

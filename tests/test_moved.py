"""Old import paths of moved modules keep working for one release, warning; the library itself uses the new ones."""

import importlib
import subprocess
import sys
import warnings

import pytest

from tests.conftest import REPO
from trainium_eks.moved import MOVED_MODULES


@pytest.mark.parametrize("old, new", sorted(MOVED_MODULES.items()))
def test_an_old_path_imports_with_a_warning_naming_the_new_one_and_gives_the_same_names(old, new):
    sys.modules.pop(old, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    assert [str(w.message) for w in caught if w.category is DeprecationWarning] == [
        f"{old} moved to {new}; the old path works until the next release"
    ]
    target = importlib.import_module(new)
    public = [name for name in vars(target) if not name.startswith("_")]
    assert public and all(getattr(module, name) is getattr(target, name) for name in public)


def test_the_library_and_the_default_app_use_no_old_path():
    code = "import warnings; warnings.simplefilter('error', DeprecationWarning); import app; import trainium_eks.commands"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]

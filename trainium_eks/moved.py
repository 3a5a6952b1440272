"""Old import paths of moved modules and renamed names: they keep working for one release, with a DeprecationWarning.

``import trainium_eks.catalog`` (moved to :mod:`trainium_eks.facts.catalog`) still imports, warns once and gives the
new module's names; a renamed name (``TrainingStack``, now ``TrainiumEksStack``) still resolves from its old module,
warning where it is used. Installed by ``trainium_eks/__init__.py`` as a finder on ``sys.meta_path``.
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings
from typing import Any, Callable, Mapping, Optional, Sequence, TypeVar

MOVED_MODULES: Mapping[str, str] = {
    "trainium_eks.catalog": "trainium_eks.facts.catalog",
    "trainium_eks.pricing": "trainium_eks.facts.pricing",
    "trainium_eks.versions": "trainium_eks.facts.versions",
    "trainium_eks.regions": "trainium_eks.facts.regions",
    "trainium_eks.validation": "trainium_eks.core.validation",
    "trainium_eks.nag": "trainium_eks.core.nag",
    "trainium_eks.conventions": "trainium_eks.core.conventions",
    "trainium_eks.cost": "trainium_eks.core.cost",
    "trainium_eks.template_limits": "trainium_eks.core.template_limits",
    "trainium_eks.system_stack": "trainium_eks.stacks.training_cluster_stack",
    "trainium_eks.training_stack": "trainium_eks.stacks.trainium_eks_stack",
    "trainium_eks.kubeflow_stack": "trainium_eks.stacks.kubeflow_training_stack",
    "trainium_eks.composer_stack": "trainium_eks.stacks.composer_training_stack",
    "trainium_eks.app_context": "trainium_eks.stacks.app_context",
    "trainium_eks.bert_phase1": "trainium_eks.workloads.bert_phase1",
    "trainium_eks.cifar10_ddp": "trainium_eks.workloads.cifar10_ddp",
    "trainium_eks.composer_resnet": "trainium_eks.workloads.composer_resnet",
    "trainium_eks.composer_recipe": "trainium_eks.workloads.composer_recipe",
    "trainium_eks.manifests.efa_device_plugin": "trainium_eks.manifests.addons.efa_device_plugin",
    "trainium_eks.manifests.neuron_device_plugin": "trainium_eks.manifests.addons.neuron_device_plugin",
    "trainium_eks.manifests.nvidia_device_plugin": "trainium_eks.manifests.addons.nvidia_device_plugin",
    "trainium_eks.manifests.tensorboard": "trainium_eks.manifests.addons.tensorboard",
    "trainium_eks.manifests.etcd": "trainium_eks.manifests.addons.etcd",
    "trainium_eks.manifests.volcano_queue": "trainium_eks.manifests.addons.volcano_queue",
    "trainium_eks.manifests.training_runtime": "trainium_eks.manifests.addons.training_runtime",
    "trainium_eks.manifests.job_chart": "trainium_eks.manifests.jobs.job_chart",
    "trainium_eks.manifests.job_naming": "trainium_eks.manifests.jobs.job_naming",
    "trainium_eks.manifests.distributed_workload": "trainium_eks.manifests.jobs.distributed_workload",
    "trainium_eks.manifests.distributed_job_chart": "trainium_eks.manifests.jobs.distributed_job_chart",
    "trainium_eks.manifests.training_job": "trainium_eks.manifests.jobs.volcano_job",
    "trainium_eks.manifests.train_job": "trainium_eks.manifests.jobs.train_job",
    "trainium_eks.manifests.pytorch_job": "trainium_eks.manifests.jobs.pytorch_job",
    "trainium_eks.manifests.dataset_staging": "trainium_eks.manifests.jobs.dataset_staging",
    "trainium_eks.manifests.topology": "trainium_eks.manifests.jobs.topology",
    "trainium_eks.manifests.fsx_volume": "trainium_eks.manifests.storage.lustre_volume",
    "trainium_eks.manifests.efs_volume": "trainium_eks.manifests.storage.efs_volume",
    "trainium_eks.manifests.training_namespace": "trainium_eks.manifests.access.training_namespace",
    "trainium_eks.manifests.workflow_access": "trainium_eks.manifests.access.workflow_access",
    "trainium_eks.constructs.accelerated_node_group": "trainium_eks.constructs.training_node_group",
}
"""Old module path -> where the module lives now (modules that existed in the last release)."""

RENAMED: Mapping[str, Mapping[str, str]] = {
    "trainium_eks.stacks.training_cluster_stack": {"TrainingSystemStack": "TrainingClusterStack"},
    "trainium_eks.stacks.trainium_eks_stack": {"TrainingStack": "TrainiumEksStack"},
    "trainium_eks.constructs.training_node_group": {"AcceleratedNodeGroup": "TrainingNodeGroup"},
    "trainium_eks.manifests.jobs.volcano_job": {"TrainingJobChart": "VolcanoJobChart"},
    "trainium_eks.manifests.storage.lustre_volume": {"FsxVolumeChart": "LustreVolumeChart"},
}
"""New module path -> {old name: new name} of the names renamed in it."""


class _MovedModule(types.ModuleType):
    """The module at an old path: every attribute read from the new module, renamed names under their old name."""

    def __init__(self, old: str, new: str) -> None:
        super().__init__(old, f"Moved to {new}.")
        self.__dict__["_new"] = new

    def __getattr__(self, name: str) -> Any:
        new = self.__dict__["_new"]
        target = importlib.import_module(new)
        renamed = RENAMED.get(new, {})
        if name in renamed:
            warnings.warn(f"{self.__name__}.{name} is now {new}.{renamed[name]}", DeprecationWarning, stacklevel=2)
            return getattr(target, renamed[name])
        return getattr(target, name)

    def __dir__(self) -> Sequence[str]:
        return sorted(set(dir(importlib.import_module(self.__dict__["_new"]))) | set(RENAMED.get(self._new, {})))


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old paths of :data:`MOVED_MODULES` and loads them as :class:`_MovedModule`."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname in MOVED_MODULES:
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _MovedModule(spec.name, MOVED_MODULES[spec.name])

    def exec_module(self, module: types.ModuleType) -> None:
        warnings.warn(
            f"{module.__name__} moved to {MOVED_MODULES[module.__name__]}; the old path works until the next release",
            DeprecationWarning,
            stacklevel=2,
        )


def deprecated_names(module: str, names: Mapping[str, str], namespace: Mapping[str, Any]) -> Any:
    """A module ``__getattr__`` that gives each old name of ``names`` (old -> new) from ``namespace``, with a
    DeprecationWarning: for a package whose re-exported names were renamed."""

    def __getattr__(name: str) -> Any:  # noqa: N807 - the module protocol's name
        if name in names:
            warnings.warn(f"{module}.{name} is now {module}.{names[name]}", DeprecationWarning, stacklevel=2)
            return namespace[names[name]]
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


def moved_names(module: str, names: Mapping[str, str]) -> Any:
    """A module ``__getattr__`` that gives each name of ``names`` (old name -> its new dotted path, ``module.name``)
    from its new module, with a DeprecationWarning: for names that moved out of a module that stays."""

    def __getattr__(name: str) -> Any:  # noqa: N807 - the module protocol's name
        if name in names:
            warnings.warn(f"{module}.{name} is now {names[name]}", DeprecationWarning, stacklevel=2)
            new_module, new_name = names[name].rsplit(".", 1)
            return getattr(importlib.import_module(new_module), new_name)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


def renamed_props(owner: str, given: Mapping[str, Any], renames: Mapping[str, str]) -> Mapping[str, Any]:
    """The props of ``given`` (a construct's ``**renamed``) under their new names (``renames``: old -> new), each with
    a DeprecationWarning; any other name is refused as Python refuses an unknown keyword."""
    unknown = sorted(set(given) - set(renames))
    if unknown:
        raise TypeError(f"{owner}() got an unexpected keyword argument {unknown[0]!r}")
    for old in given:
        warnings.warn(f"{owner}({old}=...) is now {renames[old]}=...", DeprecationWarning, stacklevel=3)
    return {renames[old]: value for old, value in given.items()}


F = TypeVar("F", bound=Callable[..., Any])


def removed_props(owner: str, removed: Mapping[str, str]) -> Callable[[F], F]:
    """A decorator of ``owner``'s constructor that refuses the props of ``removed`` (old name -> what replaced it or
    why it went) with one ConfigurationError naming each and its replacement, instead of Python's TypeError for an
    unknown keyword. The signature is the constructor's own (``functools.wraps``)."""

    def decorate(function: F) -> F:
        @functools.wraps(function)
        def checked(*args: Any, **kwargs: Any) -> Any:
            given = sorted(name for name in kwargs if name in removed)
            if given:
                from trainium_eks.core.validation import Problems

                problems = Problems(owner)
                for name in given:
                    problems.add(name, kwargs[name], f"removed: {removed[name]}")
                problems.raise_if_any()
            return function(*args, **kwargs)

        return checked  # type: ignore[return-value]

    return decorate


def renamed_attribute(owner: str, old: str, new: str) -> property:
    """A read-only property ``old`` of ``owner`` that gives attribute ``new``, with a DeprecationWarning."""

    def read(self: Any) -> Any:
        warnings.warn(f"{owner}.{old} is now {owner}.{new}", DeprecationWarning, stacklevel=2)
        return getattr(self, new)

    return property(read, doc=f"Deprecated name of ``{new}``.")


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, _MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MovedModuleFinder())

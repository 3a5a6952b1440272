"""MountedProgram: a program of the library that pods run from a ConfigMap of their namespace, and that ConfigMap."""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path

from trainium_eks.core.validation import Problems, check_dns_label
from trainium_eks.manifests.chart import LibraryChart


def program_source(path: Path) -> str:
    """The Python file ``path`` as code only: without its docstrings (the module's, its classes' and functions', and
    the strings that document its names) and its comments, as :func:`ast.unparse` writes the parsed file. That is what
    the names of the jobs that run it depend on (the documentation names the library's modules, which may move, and
    is edited without the program changing), and what every template that ships it carries (a third of the release
    program's text was documentation). The file must start with its module docstring."""
    source = path.read_text()
    if not source.startswith('"""'):
        raise ValueError(f"{path.name} starts with its module docstring")
    return ast.unparse(_Undocumented().visit(ast.parse(source))) + "\n"


class _Undocumented(ast.NodeTransformer):
    """Removes every statement that is a bare string (a docstring, or a name's documentation) from each body."""

    def generic_visit(self, node: ast.AST) -> ast.AST:
        super().generic_visit(node)
        for field in ("body", "orelse", "finalbody"):
            statements = getattr(node, field, None)
            if isinstance(statements, list) and statements and isinstance(statements[0], ast.stmt):
                kept = [statement for statement in statements if not _is_bare_string(statement)]
                setattr(node, field, kept or ([ast.Pass()] if field == "body" else []))
        return node


def _is_bare_string(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


@dataclass(frozen=True)
class MountedProgram:
    """A program (Python's standard library only) that pods run as ``python3 <path> <arguments>`` from the ConfigMap
    :attr:`config_map` of their namespace, mounted read-only at ``mount`` (the same as ``python3 -c <source>``:
    ``__name__`` is ``__main__``, ``sys.argv[1:]`` the arguments).

    Once per namespace in a ConfigMap rather than in every pod template: a job held by a release Job travels inside
    that Job's ``HELD_JOB`` as JSON, and the template carries the Job as a JSON string, so text in a pod template is
    escaped twice or three times over, in every job. The ConfigMap is named after the program's digest: the names of
    the jobs that mount it cover the program, and a changed program is a new ConfigMap, never one changed in place.

    :param name: The program's name: the ConfigMap is ``trainium-eks-<name>-<digest>``.
    :param file: The file name inside the mount.
    :param mount: Where the pods mount the ConfigMap.
    :param source: The program.
    """

    name: str
    file: str
    mount: str
    source: str

    @property
    def config_map(self) -> str:
        """``trainium-eks-<name>-<10 hex digits of the source's SHA-256>``."""
        return f"trainium-eks-{self.name}-{hashlib.sha256(self.source.encode()).hexdigest()[:10]}"

    @property
    def path(self) -> str:
        """Where the pods find the program."""
        return f"{self.mount}/{self.file}"


class MountedProgramChart(LibraryChart):
    """The ConfigMap of a :class:`MountedProgram` in ``namespace`` (key: its file).

    :param program: Required.
    :param component: The chart's ``app.kubernetes.io/name``. Required.
    :param namespace: Required.
    """

    def __init__(self, program: MountedProgram, *, component: str, namespace: str) -> None:
        problems = Problems(f"{program.name} chart")
        check_dns_label(problems, "namespace", namespace)
        problems.raise_if_any()
        super().__init__(component, namespace=namespace)
        self.add_object(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": self.metadata(program.config_map),
                "data": {program.file: program.source},
            }
        )

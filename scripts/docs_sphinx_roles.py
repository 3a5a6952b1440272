"""The API reference's griffe extension (mkdocs.yml): the docstrings' Sphinx roles (``:class:`TrainingCluster```,
``:data:`~trainium_eks.facts.versions.KUBERNETES_VERSIONS```, ...) become mkdocs-autorefs cross-references, checked.

mkdocstrings renders docstrings as Markdown, where a role is only text. Here each role's target is resolved much as
Sphinx would, from the scope of the object whose docstring it is in (its members, its class's, its module's names and
imports; and, beyond Sphinx, the members a class inherits and the attributes its methods assign to ``self``), or taken
as written when it is a dotted path from ``trainium_eks``:

- a target in trainium_eks that exists becomes an optional reference: a link where the reference documents it, code
  text where it does not (most modules are not in the reference, only what the subpackages re-export);
- a target outside trainium_eks (aws-cdk-lib, the standard library) is code text: nothing offline documents it;
- a target that names nothing (a trainium_eks path that does not exist, or a bare name that no scope of the docstring
  defines) is logged as a warning, which fails ``mkdocs build --strict``, and stays code text.
"""

import functools
import logging
import re
from typing import Any, Iterator, Optional, Set

import griffe

ROLE = re.compile(r":(?:py:)?(?P<role>mod|class|func|meth|attr|data|obj|exc|const):`(?P<text>[^`]+)`")
"""A Sphinx role of the Python domain with its target, as in ``:class:`~a.b.C```."""

PARAM = re.compile(r"^\s*:(?:param|parameter|arg|argument|key|keyword)\s+(?:[^:]+\s+)?(\w+):", re.MULTILINE)
"""A ``:param name:`` (or ``:param type name:``) field of a docstring, as griffe's Sphinx parser reads it."""

PACKAGE = "trainium_eks"


def objects(obj: griffe.Object) -> Iterator[griffe.Object]:
    """``obj`` and every object defined inside it (not the names it imports)."""
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from objects(member)


def scoped(obj: griffe.Object, name: str) -> Optional[str]:
    """The full path of the object that ``name`` (one name, no dots) means in the docstring of ``obj``, as Sphinx
    looks a role's target up: a member of ``obj``, of its class (inherited ones too) or of its module, or a name the
    module imports; None when none defines it."""
    scope: Optional[griffe.Object] = obj
    while scope is not None:
        member = scope.members.get(name)
        if member is None and scope.is_class:
            try:
                member = scope.inherited_members.get(name)
            except griffe.AliasResolutionError:
                member = None
        if member is not None:
            return member.target_path if member.is_alias else member.path
        if scope.is_class and assigned_to_self(scope, name):
            return f"{scope.path}.{name}"
        scope = scope.parent
    return None


def assigned_to_self(cls: griffe.Object, name: str) -> bool:
    """Whether a method of ``cls`` or of a class it inherits from assigns ``self.<name>``: an instance attribute that
    griffe does not collect (it does only from ``__init__``, and not from a tuple's unpacking)."""
    assignment = re.compile(rf"\bself\.{re.escape(name)}\b[^=\n]*=(?!=)")
    try:
        classes = [cls, *cls.mro()]
    except (ValueError, griffe.AliasResolutionError):
        classes = [cls]
    return any(assignment.search(each.source) for each in classes)


def target(obj: griffe.Object, name: str) -> Optional[str]:
    """The full path that ``name`` (a role's target, without ``~``) names in the docstring of ``obj``, or None when it
    names nothing: a path from trainium_eks that does not exist, or a name that no scope of ``obj`` defines. A dotted
    path whose first name no scope defines is taken as written (an absolute path outside the package)."""
    first, _, rest = name.lstrip(".").partition(".")
    if first == PACKAGE:
        path = name
    else:
        found = scoped(obj, first)
        if found is None:
            return name if rest else None
        path = f"{found}.{rest}" if rest else found
    if (path == PACKAGE or path.startswith(PACKAGE + ".")) and not exists(obj.modules_collection, path):
        return None
    return path


def exists(collection: griffe.ModulesCollection, path: str) -> bool:
    """Whether ``path`` is an object of the loaded packages, or an attribute that a method of its class assigns."""
    try:
        collection[path]
        return True
    except (KeyError, griffe.AliasResolutionError):
        pass
    owner, _, name = path.rpartition(".")
    try:
        cls = collection[owner]
    except (KeyError, griffe.AliasResolutionError):
        return False
    return cls.is_class and assigned_to_self(cls, name)


def reference(obj: griffe.Object, match: "re.Match[str]") -> str:
    """The Markdown of one role of ``obj``'s docstring."""
    text = re.sub(r"\s+", "", match["text"])  # a target that the docstring wraps onto the next line
    name = text.removeprefix("~")
    title = name.rpartition(".")[2] if text.startswith("~") else name
    path = target(obj, name)
    if path is None:
        where = f"{obj.relative_filepath}:{obj.docstring.lineno}" if obj.docstring else obj.path
        griffe.logger.warning(f"{where}: {match[0]} in the docstring of {obj.path} names nothing")
        return f"`{title}`"
    if path == PACKAGE or path.startswith(PACKAGE + "."):
        return f'<autoref identifier="{path}" optional>`{title}`</autoref>'
    return f"`{title}`"


class KeywordArguments(logging.Filter):
    """Drops griffe's warnings that a docstring documents a parameter its signature lacks, for the parameters that the
    signature takes through ``**kwargs`` (the job charts document the props they pass on to their base class). Any
    other parameter that a signature lacks still fails the build; a misspelt name of those cannot be told from a prop
    passed on."""

    def __init__(self) -> None:
        super().__init__()
        self.expected: Set[str] = set()

    def add(self, obj: griffe.Object) -> None:
        """Expect the warnings about the ``:param:`` fields of ``obj``'s docstring that its ``**kwargs`` takes."""
        try:
            parameters = obj.parameters  # a class's are its __init__'s
        except AttributeError:
            return
        if obj.docstring is None or not any(each.kind is griffe.ParameterKind.var_keyword for each in parameters):
            return
        where = f"{obj.relative_filepath}:{obj.docstring.lineno}"
        for name in PARAM.findall(obj.docstring.value):
            if name not in parameters:
                self.expected.add(f"{where}: Parameter '{name}' does not appear in the function signature")
                self.expected.add(f"{where}: No matching parameter for '{name}'")

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(message.endswith(expected) for expected in self.expected)


class SphinxRoles(griffe.Extension):
    """Rewrites the roles of every docstring of trainium_eks once the package is loaded (before any is parsed), and
    expects the parser's warnings about parameters taken through ``**kwargs``."""

    def __init__(self) -> None:
        super().__init__()
        self.keyword_arguments = KeywordArguments()
        # griffe's own logger, or mkdocstrings' for griffe (mkdocs counts the warnings of the latter in strict mode).
        for name in ("griffe", "mkdocs.plugins.griffe"):
            logging.getLogger(name).addFilter(self.keyword_arguments)

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if pkg.name != PACKAGE:
            return
        for obj in objects(pkg):
            if obj.docstring is not None:
                obj.docstring.value = ROLE.sub(functools.partial(reference, obj), obj.docstring.value)
                self.keyword_arguments.add(obj)

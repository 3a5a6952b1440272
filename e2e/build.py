"""Build the Go components of the end-to-end tests (:data:`trainium_eks.facts.control_plane.COMPONENTS`) into a
cache outside the checkout, keyed by what decides their bytes, so that a second clone reuses them.

``python -m e2e.build`` builds what is missing and prints where each binary is; ``--tidy`` runs ``go mod tidy`` in
each module folder first (after a version change). The cache (``$TRAINIUM_EKS_E2E_CACHE``, default
``~/.cache/trainium-eks-e2e``) holds the module downloads (``gomod``), Go's build cache (``gobuild``) and one
folder of binaries per component and key (``bin/<name>-<key>``). The key digests the Go version, the module's
go.mod and go.sum, the packages and the ldflags: a changed pin builds anew, an unchanged one is found.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from trainium_eks.facts.control_plane import COMPONENTS, GoComponent

MODULES = Path(__file__).resolve().parent / "modules"
"""The Go modules of ours, one folder per component."""


def cache_root() -> Path:
    """Where builds are cached (``$TRAINIUM_EKS_E2E_CACHE``, else ``~/.cache/trainium-eks-e2e``)."""
    configured = os.environ.get("TRAINIUM_EKS_E2E_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "trainium-eks-e2e"


def go_environment(cache: Path) -> Dict[str, str]:
    """The go command's environment: the cache's module and build folders, no toolchain download, no cgo."""
    env = dict(os.environ)
    env.update(
        GOMODCACHE=str(cache / "gomod"),
        GOCACHE=str(cache / "gobuild"),
        GOFLAGS="-modcacherw -mod=readonly",
        GOTOOLCHAIN="local",
        CGO_ENABLED="0",
    )
    return env


def go_version() -> str:
    """``go version`` (part of every key)."""
    return subprocess.run(["go", "version"], check=True, capture_output=True, text=True).stdout.strip()


def ldflags(component: GoComponent) -> str:
    """The ``-ldflags`` value: stripped, with the component's ``-X`` settings."""
    settings = [f"-X {setting.format(version=component.version)}" for setting in component.ldflags]
    return " ".join(["-s", "-w", *settings])


def key(component: GoComponent, go: str) -> str:
    """The digest of everything that decides the component's binaries (the module's own Go files included)."""
    digest = hashlib.sha256()
    folder = MODULES / component.name
    for part in (go, ldflags(component), repr(component.binaries), repr(component.patch)):
        digest.update(part.encode() + b"\0")
    files = ["go.mod", "go.sum"] + ([component.patch.file] if component.patch else [])
    own = sorted(str(path.relative_to(folder)) for path in folder.rglob("*.go"))  # the module's own packages
    files += [name for name in own if name not in files]
    for name in files:
        digest.update(name.encode() + b"\0" + (folder / name).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def patched_workspace(component: GoComponent, cache: Path, env: Dict[str, str]) -> Path:
    """For a component with a :class:`~trainium_eks.facts.control_plane.SourcePatch`: a fresh copy of the patched
    module (from the module cache) with the patch's file added, and a ``go.work`` that uses the component's module
    and replaces the patched one by the copy; returns the ``go.work`` (the build's ``GOWORK``)."""
    patch = component.patch
    assert patch is not None
    folder = MODULES / component.name
    listed = subprocess.run(
        ["go", "mod", "download", "-json", f"{patch.module}@{patch.version}"],
        cwd=folder,
        env={**env, "GOWORK": "off"},
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    source = Path(json.loads(listed)["Dir"])
    copy = cache / "src" / f"{patch.module.replace('/', '_')}@{patch.version}-{key(component, go_version())}"
    if not copy.is_dir():
        partial = copy.with_name(copy.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(source, partial)
        for path in [partial, *partial.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)
        shutil.copyfile(folder / patch.file, partial / patch.directory / f"zz_trainium_eks{patch.file}")
        partial.rename(copy)
    go_directive = next(line for line in (folder / "go.mod").read_text().splitlines() if line.startswith("go "))
    work = cache / "work" / f"{component.name}.go.work"
    work.parent.mkdir(parents=True, exist_ok=True)
    work.write_text(f"{go_directive}\n\nuse {folder}\n\nreplace {patch.module} => {copy}\n")
    return work


def binary_folder(component: GoComponent, cache: Optional[Path] = None, go: Optional[str] = None) -> Path:
    """Where the component's binaries are (or will be) for its current key."""
    return (cache or cache_root()) / "bin" / f"{component.name}-{key(component, go or go_version())}"


def build(component: GoComponent, cache: Path, go: str, log=sys.stderr) -> Path:
    """Build the component's binaries unless its folder is complete; return the folder."""
    folder = binary_folder(component, cache, go)
    if (folder / ".complete").is_file():
        return folder
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    env = go_environment(cache)
    if component.patch is not None:
        env["GOWORK"] = str(patched_workspace(component, cache, env))
        env["GOFLAGS"] = "-modcacherw"  # -mod=readonly is not allowed in workspace mode
    started = time.monotonic()
    for binary, package in component.binaries:
        subprocess.run(
            ["go", "build", "-trimpath", "-ldflags", ldflags(component), "-o", str(partial / binary), package],
            cwd=MODULES / component.name,
            env=env,
            check=True,
        )
    (partial / ".complete").write_text(f"{component.module} {component.version} {time.monotonic() - started:.1f}s\n")
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
    print(f"built {component.name} {component.version} in {time.monotonic() - started:.1f} s", file=log)
    return folder


def binaries(cache: Optional[Path] = None) -> Dict[str, Path]:
    """Binary name -> path of every component, built first where missing."""
    cache = cache or cache_root()
    go = go_version()
    found: Dict[str, Path] = {}
    for component in COMPONENTS:
        folder = build(component, cache, go)
        found.update({binary: folder / binary for binary, _ in component.binaries})
    return found


def built_binaries(cache: Optional[Path] = None) -> Optional[Dict[str, Path]]:
    """Binary name -> path when every component is already built for its key, else None (nothing is built)."""
    cache = cache or cache_root()
    go = go_version()
    found: Dict[str, Path] = {}
    for component in COMPONENTS:
        folder = binary_folder(component, cache, go)
        if not (folder / ".complete").is_file():
            return None
        found.update({binary: folder / binary for binary, _ in component.binaries})
    return found


def module_source(component: GoComponent, cache: Optional[Path] = None) -> Path:
    """The upstream module's source in the module cache (there once the component is built)."""
    return (cache or cache_root()) / "gomod" / f"{component.module}@{component.version}"


def tidy(component: GoComponent, cache: Path) -> None:
    """``go mod tidy`` in the component's module folder (writes its go.mod and go.sum)."""
    env = go_environment(cache)
    env["GOFLAGS"] = "-modcacherw"
    env["GOWORK"] = "off"
    subprocess.run(["go", "mod", "tidy"], cwd=MODULES / component.name, env=env, check=True)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.build", description=__doc__.splitlines()[0])
    parser.add_argument("--tidy", action="store_true", help="go mod tidy each module first")
    parser.add_argument("names", nargs="*", help="only these components (default: all)")
    args = parser.parse_args(argv)
    cache = cache_root()
    go = go_version()
    chosen: List[GoComponent] = [c for c in COMPONENTS if not args.names or c.name in args.names]
    started = time.monotonic()
    for component in chosen:
        if args.tidy:
            tidy(component, cache)
        folder = build(component, cache, go)
        print(f"{component.name:<12} {component.version:<10} {folder}")
    print(f"{time.monotonic() - started:.1f} s; cache {cache}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

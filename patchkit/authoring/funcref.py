"""A function named on the command line (``module:Class.method``, ``module:function``, ``file.py::name``), found
on disk without importing anything, with the package, distribution and version a recipe for it names.

``module:...`` is looked up the way :mod:`patchkit.state.targets` finds a
recipe's package: the top-level name with ``importlib.util.find_spec`` (no
import), or under ``--root``; then the module's file below it
(``a/b/c.py`` or ``a/b/c/__init__.py``).  ``path::...`` is that file; its
package is the topmost folder above it with an ``__init__.py`` (none: a script, ``python train.py``).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import NamedTuple, Optional

from patchkit.core.errors import Location, TargetError
from patchkit.core.model import Target
from patchkit.state.targets import Installed, canonical, default_root, find_package, locate, root_dir

FORMS = "module:Class.method, module:function, or path/to/file.py::Class.method"


class FunctionRef(NamedTuple):
    """Where a named function's file is, and what a recipe's ``target:`` says about it."""

    path: Path  # the file
    qualname: str  # Class.method, function, Class.method.inner
    module: str  # dotted module name ("" when the file is in no package)
    package: str  # top-level import name ("" when the file is in no package)
    relpath: str  # the file, relative to the root, as target.files writes it
    installed: Optional[Installed]  # the package's root and version (None when the file is in no package)
    distribution: str = ""


def parse(target: str):
    """``(module or None, path or None, qualname)``; a usage error for any other shape."""
    if "::" in target:
        path, _, name = target.rpartition("::")
        return None, path, _qualname(name, target)
    module, sep, name = target.partition(":")
    if not sep or not module or not all(p.isidentifier() for p in module.split(".")):
        raise TargetError(f"cannot read the target {target!r}", hint=f"name a function as {FORMS}")
    return module, None, _qualname(name, target)


def _qualname(name: str, target: str) -> str:
    parts = name.split(".")
    if not name or len(parts) > 3 or not all(p.isidentifier() for p in parts):
        raise TargetError(f"cannot read the function in {target!r}: {name!r}",
                          hint=f"name a function as {FORMS} (a function inside one: Class.method.inner)")
    return name


def resolve(target: str, root: Optional[str] = None) -> FunctionRef:
    """The file holding the function ``target`` names, and its package and version; reads no file's code."""
    module, path, qualname = parse(target)
    given = root is not None
    root = root if given else default_root()
    if path is not None:
        return _from_path(_file(path, qualname, root, given), qualname)
    top = module.split(".")[0]
    base = root_dir(root) if root else None
    package_dir = find_package(top, base)
    if package_dir is None:
        single = _single_module(top, base)
        if single is None or "." in module:
            where = f"under {base}" if base else "in this environment"
            raise TargetError(f"no module {module} {where} (looked for the package {top})",
                              Location(str(base)) if base else None,
                              f"check the spelling, pass --root DIR (site-packages or a checkout), or name the file "
                              f"as path/to/file.py::{qualname}")
        return FunctionRef(single, qualname, module, "", single.name, None)
    file = _module_file(package_dir, module)
    installed = locate(Target(top, distribution_of(package_dir.parent, top), "", ()), str(package_dir.parent))
    rel = file.relative_to(package_dir.parent).as_posix()  # as the recipe names it (a link is followed on apply)
    return FunctionRef(file, qualname, module, top, rel, installed, distribution_of(package_dir.parent, top))


def _single_module(name: str, base: Optional[Path]) -> Optional[Path]:
    if base is not None:
        return base / f"{name}.py" if (base / f"{name}.py").is_file() else None
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return Path(spec.origin) if spec and spec.origin and spec.origin.endswith(".py") else None


def _module_file(package_dir: Path, module: str) -> Path:
    here = package_dir
    for part in module.split(".")[1:]:
        here = here / part
    for candidate in (here.with_suffix(".py") if here != package_dir else None, here / "__init__.py"):
        if candidate is not None and candidate.is_file():
            return candidate
    raise TargetError(f"no module {module} in {package_dir} (no {here.relative_to(package_dir.parent)}.py "
                      f"nor {here.relative_to(package_dir.parent)}/__init__.py)", Location(str(package_dir)),
                      "check the module path: the dotted name as you would import it")


def _file(path: str, qualname: str, root: Optional[str], given: bool = True) -> Path:
    """``path::NAME``'s file: an absolute path as it is, a relative one under the root (``--root``, else
    ``$PATCHKIT_ROOT``), or from the current folder when there is no root; not there: where it looked, and
    where the same path is from the current folder, if it is there."""
    asked = Path(path).expanduser()
    if asked.is_absolute() or not root:
        where, file = "" if asked.is_absolute() else f" from the current folder {Path.cwd()}", asked
    else:
        base = root_dir(root)
        where, file = f" under {'--root' if given else '$PATCHKIT_ROOT'} {base}", base / asked
    if file.is_file():
        return file
    here = "" if asked.is_absolute() or not root or not asked.is_file() else (
        f"; {asked} is a file from the current folder: name it relative to the root, or as "
        f"{asked.resolve()}::{qualname}")
    raise TargetError(f"no file {path}{where} (looked for {file.absolute()})", Location(str(file)),
                      f"name a function as {FORMS}" + here)


def _from_path(path: Path, qualname: str) -> FunctionRef:
    file = path.resolve()
    top = file.parent
    parts = [file.stem] if file.name != "__init__.py" else []
    while (top / "__init__.py").is_file():
        parts.insert(0, top.name)
        top = top.parent
    if top == file.parent:  # in no package
        return FunctionRef(file, qualname, "", "", file.name, None)
    package = parts[0]
    installed = locate(Target(package, distribution_of(top, package), "", ()), str(top))
    return FunctionRef(file, qualname, ".".join(parts), package, file.relative_to(top).as_posix(), installed,
                       distribution_of(top, package))


def distribution_of(base: Path, package: str) -> str:
    """The distribution that installs ``package`` in ``base``: a ``.dist-info`` (or ``.egg-info``) there whose
    top_level.txt or RECORD names it; else the package's name; normalised as PEP 503 does (``vllm-ascend``)."""
    try:
        entries = sorted(os.listdir(base))
    except OSError:
        entries = []
    for entry in entries:
        if not entry.endswith((".dist-info", ".egg-info")):
            continue
        folder = base / entry
        name = entry.rsplit(".", 1)[0].split("-")[0]
        for listing in ("top_level.txt", "RECORD", "SOURCES.txt"):
            try:
                text = (folder / listing).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            rows = [row.split(",")[0].strip() for row in text.splitlines()]
            if any(row == package or row.startswith(package + "/") for row in rows):
                return canonical(_metadata_name(folder) or name)
    return canonical(package)


def _metadata_name(folder: Path) -> str:
    for meta in ("METADATA", "PKG-INFO"):
        try:
            with open(folder / meta, encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    if not line.strip():
                        break
                    if line.startswith("Name: "):
                        return line[len("Name: "):].strip()
        except OSError:
            continue
    return ""


def read_outline(ref: FunctionRef):
    """The function's outline (:func:`patchkit.engine.points.outline.outline`), and the file's text; a missing
    class, method or function is an AnchorError at the file, with the closest names."""
    from patchkit.core.errors import AnchorError
    from patchkit.engine.marks import decode
    from patchkit.engine.points.lookup import Missing
    from patchkit.engine.points.outline import outline

    try:
        data = ref.path.read_bytes()
    except OSError as exc:
        raise TargetError(f"cannot read: {exc.strerror}", Location(str(ref.path)), "check the file's permissions") from None
    text, _encoding = decode(data, ref.path)
    try:
        return outline(text, ref.qualname), text
    except Missing as missing:
        raise AnchorError(missing.reason, Location(str(ref.path), missing.line, missing.col),
                          missing.hint or "check the name: `patchkit points FILE.py::NAME` reads any function") from None
    except Exception as exc:  # libcst's parser
        raise AnchorError(f"the file does not parse: {exc}".splitlines()[0], Location(str(ref.path)),
                          "patchkit reads only files libcst parses") from None

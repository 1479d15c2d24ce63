"""patchkit's lines that no record explains: found from the files alone, and taken out without a backup.

The ledger lives under one ``$PATCHKIT_HOME``; a file patched under another
(sudo, another user, a container, a lost home folder) still says what
patchkit did, because every inserted line ends with ``  # patchkit:<id>``
and patchkit only inserts.  So the built-in recipes' candidate files are
enough to find such lines, and taking the marked lines out gives the
original back.  Finding them reads a handful of files: no parser, no git.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, List, Mapping, NamedTuple, Optional, Tuple

from patchkit.engine import marks
from patchkit.core.errors import LedgerError, Location, TargetError
from patchkit.state.targetfile import read_target

class Spot(NamedTuple):
    """A candidate file of a built-in recipe, where its package is installed."""

    path: Path  # the real file (symlinks resolved, as apply records it)
    relpath: str
    root: Path  # the folder holding the package: site-packages, or a source checkout
    distribution: str


class Found(NamedTuple):
    """A file holding patchkit lines of recipes no record of this ledger explains."""

    path: Path
    relpath: str
    root: Path
    distribution: str
    version: Optional[str]
    recipes: Tuple[str, ...]  # the recipes no record explains, sorted (with a line patchkit writes)
    data: bytes  # the file's bytes as they were read
    foreign: Tuple[Tuple[int, str], ...] = ()  # (line, recipe id) of marked lines patchkit does not write, no record's


def spots(root: Optional[str] = None) -> List[Spot]:
    """Every candidate file of every built-in recipe (target files and per-point files) that exists.

    The packages are looked up under ``root`` (default ``$PATCHKIT_ROOT``) or
    in this environment, never imported; a package that is not there is skipped.
    """
    from patchkit.recipe.catalogue import entries
    from patchkit.state.targets import default_root, find_package, root_dir

    root = root if root is not None else default_root()
    base = root_dir(root) if root else None
    folders: Dict[str, Optional[Path]] = {}
    out: Dict[Path, Spot] = {}
    for entry in entries():
        if entry.package not in folders:
            folders[entry.package] = find_package(entry.package, base)
        package = folders[entry.package]
        if package is None:
            continue
        site = base if base is not None else package.parent
        for relpath in entry.files:
            link = site / relpath
            if link.is_file():
                path = link.resolve()
                out.setdefault(path, Spot(path, relpath, site, entry.distribution))
    return list(out.values())


def find(explained: Mapping[str, Tuple[str, ...]], root: Optional[str] = None,
         current: Optional[Callable[[Path], Optional[bytes]]] = None) -> List[Found]:
    """The candidate files with patchkit lines of recipes that ``explained`` (path -> recorded ids) does not name.

    ``current`` gives a file's bytes when they are not the ones on disk (a
    revert about to write them); None means read the file.
    """
    from patchkit.state.targets import version_in

    found = []
    versions: Dict[Tuple[Path, str], Optional[str]] = {}
    for spot in spots(root):
        data = current(spot.path) if current is not None else None
        if data is None:
            try:
                data = read_target(spot.path)
            except (OSError, TargetError):  # gone, or not a plain file reached without links: not patchkit's
                continue
        if b"  # patchkit:" not in data:
            continue
        try:
            text, _ = marks.decode(data, spot.path)
        except TargetError:  # listed all the same; taking the lines out says what is wrong with the file
            text = data.decode("utf-8", "replace")
        known = explained.get(str(spot.path), ())
        ids = tuple(sorted(rid for rid in marks.written_ids(text) if rid not in known))
        foreign = tuple((n, rid) for n, _col, rid in marks.foreign_lines(text) if rid not in known)
        if ids or foreign:
            key = (spot.root, spot.distribution)
            if key not in versions:
                versions[key] = version_in(spot.root, spot.distribution)
            found.append(Found(spot.path, spot.relpath, spot.root, spot.distribution, versions[key], ids, data,
                               foreign))
    return sorted(found, key=lambda f: str(f.path))


def take_out(found: Found, gone: Tuple[str, ...], last: bool,
             force: bool) -> Tuple[bytes, Optional[int], List[Tuple[int, str]]]:
    """The file's new bytes once the lines patchkit wrote for ``gone`` are out, the hand-edited line ``force``
    kept, and the marked lines kept because patchkit does not write them (``(line in the new file, id)``).

    ``last``: no recipe is left in the file afterwards, so an unmarked line
    calling the runtime is a hand edit too.  Such lines, and a result that
    does not compile where the file does, are refused unless ``force``.
    """
    path = found.path
    text, encoding = marks.decode(found.data, path)
    new, kept = marks.take_out(text, gone)  # no record vouches for a marked line: only its shape makes it patchkit's
    keep = {n for n, _col, _rid in marks.foreign_lines(text)}
    left = marks.leftover(text, gone, last)
    if left is not None and not force:
        raise LedgerError(f"line {left[0]} still refers to patchkit after its marked lines are taken out "
                          f"(edited by hand?): {left[1].strip()[:80]}", Location(str(path), left[0]),
                          "remove that line yourself, or run `patchkit revert --force` to take out only the "
                          "marked lines (no record here, so there is no backup to restore)")
    data = new.encode(encoding)
    broken = _compile_error(data, path)
    if broken is not None and _compile_error(found.data, path) is None:
        numbers = marks.kept_line_numbers(text, gone, keep)
        line = numbers[broken.lineno - 1] if broken.lineno and 0 < broken.lineno <= len(numbers) else None
        raise LedgerError(f"taking patchkit's marked lines out leaves a file Python cannot compile ({broken.msg}); "
                          "nothing was written", Location(str(path), line),
                          "the file was edited by hand around patchkit's lines: take them out yourself")
    return data, (left[0] if left is not None else None), kept


def _compile_error(data: bytes, path: Path) -> Optional[SyntaxError]:
    try:
        compile(data, str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        return exc
    except ValueError as exc:  # NUL bytes
        return SyntaxError(str(exc))
    return None

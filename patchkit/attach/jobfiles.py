"""A recipe planned on the files a job runs, read as a stranger's.

The job's copy of the recipe's package (:mod:`patchkit.attach.jobpath` finds its folder) may be another user's
files, in folders she writes.  Root never plans in them: :func:`request` copies what planning reads (the
recipe's candidate files, the files that declare a version, the distribution's metadata) into a private folder,
each read through :func:`patchkit.core.reach.folder` following no link, with ``O_NOFOLLOW | O_NONBLOCK``, a
regular file of root's or of the job's user, inside the job's folder, not writable by every user, at most
:data:`LIMIT` bytes; then plans there, with no git (a stranger's checkout has a configuration of her own) and
nothing imported.  The request names the job's own files: the agent checks in the job that the module it
imported is that file, and that its bytes are the planned ones.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from typing import Any, Dict, List, Optional, Sequence, Tuple

from patchkit.attach.process import AttachError, where
from patchkit.core.confined import Refused, within
from patchkit.core.errors import Location, PatchkitError
from patchkit.core.model import Settings
from patchkit.core.reach import Rules

LIMIT = 16 << 20  # bytes of one file copied (SGLang's model_runner.py: about 150 KB)
MAX_FILES = 64
VERSION_FILES = ("version/version", "__init__.py", "version.py", "_version.py")  # as treeversion.declared reads


class _NoLinks(Rules):
    def link(self, st: os.stat_result, holder: os.stat_result, shown: str) -> None:
        raise Refused(errno.ELOOP, "is a symbolic link", shown)


def wanted(settings: Settings) -> List[str]:
    """The files below the package's folder that planning may read: the candidates and the version files."""
    target = settings.recipe.target
    files = list(target.files) + [f for p in settings.active_points() for f in (p.files or ())]
    if target.package:  # a script has no version
        files += [f"{target.package}/{name}" for name in VERSION_FILES] + ["pyproject.toml"]
    return list(dict.fromkeys(files))[:MAX_FILES]


def metadata(root: str, distribution: str) -> List[str]:
    """The distribution's metadata files in ``root`` (``NAME-VERSION.dist-info/METADATA``, ``.egg-info``)."""
    from patchkit.state.targets import canonical

    out = []
    try:
        names = os.listdir(root)
    except OSError:
        return out
    for name in names:
        stem, dot, kind = name.rpartition(".")
        if kind in ("dist-info", "egg-info") and canonical(stem.split("-")[0]) == canonical(distribution):
            out.append(f"{name}/METADATA" if kind == "dist-info" else f"{name}/PKG-INFO")
    return sorted(out)[:8]


def read(root: str, relpath: str, uid: int) -> Optional[Tuple[str, bytes]]:
    """(its path without links, its bytes) for the file ``relpath`` under the job's folder ``root``; None when there
    is none; :class:`AttachError` when it is there but not a file to plan on (see the module's docstring)."""
    from patchkit.core.confined import open_regular
    from patchkit.core.reach import folder

    top = os.path.realpath(root)
    real = os.path.realpath(os.path.join(root, relpath))
    if not os.path.lexists(os.path.join(root, relpath)):
        return None
    shown = os.path.join(root, relpath)
    if not within(real, top):
        raise AttachError(f"{shown} leads out of {root} (to {real}): attach plans only on files inside the job's "
                          "folder", Location(shown), "pass --root DIR naming the folder that holds the package")
    try:
        fd = folder(os.path.dirname(real), rules=_NoLinks())
        try:
            with os.fdopen(open_regular(os.path.basename(real), fd), "rb") as handle:
                st = os.fstat(handle.fileno())
                data = handle.read(LIMIT + 1)
        finally:
            os.close(fd)
    except FileNotFoundError:
        return None
    except (OSError, Refused) as exc:
        raise AttachError(f"{shown}: {exc.strerror or exc}: attach plans only on regular files it reads whole",
                          Location(shown), "pass --root DIR naming a copy of the package") from None
    if st.st_uid not in (0, uid) or st.st_mode & stat.S_IWOTH:
        raise AttachError(f"{shown} belongs to uid {st.st_uid}" + (", and every user may write it" if st.st_mode &
                                                                    stat.S_IWOTH else "") +
                          f": attach plans only on files of root's or of the job's user (uid {uid}) that not every "
                          "user may write", Location(shown), "pass --root DIR naming a copy of the package")
    if len(data) > LIMIT:
        raise AttachError(f"{shown} is larger than {LIMIT >> 20} MiB: not a source file attach plans on",
                          Location(shown), "pass --root DIR naming the package's folder")
    return real, data


def copy(settings: Settings, root: str, uid: int, into: str) -> Dict[str, str]:
    """The files planning reads, from the job's folder ``root`` into the private folder ``into``: each copied
    file's relative path -> its path in the job's folder, without links."""
    copied: Dict[str, str] = {}
    target = settings.recipe.target
    names = wanted(settings) + (metadata(root, target.distribution) if target.package else [])
    for relpath in names:
        if os.path.isabs(relpath) or ".." in relpath.split("/"):
            continue  # the recipe loader refuses such paths; never copied from outside the folder
        found = read(root, relpath, uid)
        if found is None:
            continue
        real, data = found
        dest = os.path.join(into, relpath)
        os.makedirs(os.path.dirname(dest), mode=0o700, exist_ok=True)
        with open(dest, "xb") as handle:
            handle.write(data)
        copied[relpath] = real
    return copied


def request(settings: Settings, steps: int, root: str, uid: int, versions=(False, None)) -> Dict[str, Any]:
    """The agent's request (:func:`patchkit.attach.payload.request`) planned on the job's files under ``root``, as
    the module says; errors name the job's files, not the private copy."""
    from patchkit.attach import payload

    into = tempfile.mkdtemp(prefix="patchkit-plan-")
    try:
        copied = copy(settings, root, uid, into)
        try:
            spec = payload.request(settings, steps, into, versions)
        except PatchkitError as exc:
            raise _named(exc, into, root) from None
    finally:
        shutil.rmtree(into, ignore_errors=True)
    for m in spec["modules"]:
        m["file"] = copied.get(m["relpath"], os.path.join(root, m["relpath"]))
    spec["job_root"] = root
    return _renamed(spec, into, root)


def _named(exc: PatchkitError, into: str, root: str) -> PatchkitError:
    exc.message = exc.message.replace(into, root)
    exc.hint = (exc.hint or "").replace(into, root) or exc.hint
    if exc.where is not None and into in str(exc.where.path):
        exc.where = exc.where._replace(path=str(exc.where.path).replace(into, root))
    return exc


def _renamed(value: Any, into: str, root: str) -> Any:
    if isinstance(value, str):
        return value.replace(into, root)
    if isinstance(value, list):
        return [_renamed(v, into, root) for v in value]
    if isinstance(value, dict):
        return {k: _renamed(v, into, root) for k, v in value.items()}
    return value


def roots(found: Sequence[Tuple[int, Optional[str]]]) -> Dict[Optional[str], List[int]]:
    """The processes by the folder their job holds the package in (None: not found on its path), in order."""
    out: Dict[Optional[str], List[int]] = {}
    for pid, root in found:
        out.setdefault(root, []).append(pid)
    return out


def not_found(pid: int, package: str, entries: Sequence[str]) -> AttachError:
    shown = ", ".join(entries[:6]) + (f" and {len(entries) - 6} more" if len(entries) > 6 else "")
    return AttachError(f"process {pid} has no {package} on its path as patchkit reads it ({shown or 'none'}), and "
                       "patchkit's own environment has none either", where(pid),
                       f"pass --root DIR naming the folder that holds {package}/ (its site-packages or checkout)")

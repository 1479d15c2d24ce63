"""Real target files from released wheels, fetched on demand for tests.

patchkit's recipes are written against specific files of vllm-ascend, SGLang,
verl and vLLM.  Committing those files would mean committing third-party code,
so instead this module downloads each released wheel once (with pip, from the
package registry), extracts only the files the recipes target, and keeps them
in a cache outside the repository:

    CACHE/roots/<dist>-<version>/<pkg>/.../<target>.py
    CACHE/roots/<dist>-<version>/<wheel dist-info>/METADATA   (and RECORD)

Each root is shaped like a site-packages folder, so it can be put on
``sys.path`` or handed to anything that looks files up the way an installed
environment is searched.  Only the listed targets, the ``__init__.py`` files
of the packages on their paths and the dist-info METADATA and RECORD files are
extracted (RECORD still lists every file of the wheel, which
:func:`wheel_files` reads); the wheel itself is deleted afterwards and a small
JSON marker under CACHE/wheels records what was downloaded.

There is deliberately no "skip when offline": the registry is reachable on
developer machines and in CI, and a test that silently skips would hide a
regression.  A failed download raises :class:`RealWheelError`.

Command line (pre-fetch, print sizes and times)::

    python tests/realwheels.py --all
    python tests/realwheels.py vllm==0.9.2 verl==0.4.1
    python tests/realwheels.py --list

Only the standard library and ``packaging`` are used.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path, PurePosixPath
from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from packaging.utils import canonicalize_name
from packaging.version import Version

try:  # POSIX only; on other systems concurrent callers just race to the rename
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "CACHE",
    "RELEASES",
    "Release",
    "RealWheelError",
    "release",
    "releases",
    "release_root",
    "target_path",
    "wheel_files",
    "fetch",
    "download",
]

CACHE = Path(os.environ.get("PATCHKIT_WHEEL_CACHE", "~/.cache/patchkit-wheels")).expanduser()

# Bump when the layout of a root changes, so stale roots are rebuilt.
_LAYOUT = 3


class RealWheelError(RuntimeError):
    """A release could not be downloaded or does not contain its targets."""


class Release(NamedTuple):
    dist: str
    version: str
    files: Tuple[str, ...]

    @property
    def key(self) -> str:
        return "%s-%s" % (canonicalize_name(self.dist), self.version)

    @property
    def spec(self) -> str:
        return "%s==%s" % (self.dist, self.version)


# --------------------------------------------------------------------------
# The table: every release listed in the shared TARGETS.md reference.
# --------------------------------------------------------------------------

_ASCEND_V1 = "vllm_ascend/worker/worker_v1.py"
_ASCEND = "vllm_ascend/worker/worker.py"
_SGLANG = "sglang/srt/model_executor/model_runner.py"
_VLLM = "vllm/v1/worker/gpu_worker.py"

_VERL_DP = "verl/workers/actor/dp_actor.py"
_VERL_MEG = "verl/workers/actor/megatron_actor.py"
_VERL_BASE = "verl/workers/engine/base.py"
_VERL_FSDP = "verl/workers/engine/fsdp/transformer_impl.py"
_VERL_MENG = "verl/workers/engine/megatron/transformer_impl.py"
_VERL_WORKERS = "verl/workers/engine_workers.py"
_VERL_CRITIC = "verl/workers/critic/dp_critic.py"
_VERL_FSDP_WORKERS = "verl/workers/fsdp_workers.py"  # the reward model's worker up to 0.7.0
# where a rollout worker learns its Agent Loop replica (tests/test_replica_facts.py)
_VERL_WORKER = "verl/single_controller/base/worker.py"
_VERL_VLLM_SERVER = "verl/workers/rollout/vllm_rollout/vllm_async_server.py"
_VERL_SGLANG_SERVER = "verl/workers/rollout/sglang_rollout/async_sglang_server.py"
_VERL_REPLICA = "verl/workers/rollout/replica.py"
_VERL_ROLLOUT_OLD = (_VERL_WORKER, _VERL_VLLM_SERVER)
_VERL_ROLLOUT = (_VERL_WORKER, _VERL_VLLM_SERVER, _VERL_SGLANG_SERVER, _VERL_REPLICA)

RELEASES: Tuple[Release, ...] = (
    # vllm-ascend: worker_v1.py (0.9.1 also ships the V0 worker.py), renamed worker.py from 0.13.0
    Release("vllm-ascend", "0.9.1", (_ASCEND_V1, _ASCEND)),
    Release("vllm-ascend", "0.11.0", (_ASCEND_V1,)),
    Release("vllm-ascend", "0.13.0", (_ASCEND,)),
    Release("vllm-ascend", "0.18.0", (_ASCEND,)),
    Release("vllm-ascend", "0.23.0", (_ASCEND,)),
    # SGLang: ModelRunner
    Release("sglang", "0.4.6", (_SGLANG,)),
    Release("sglang", "0.4.9", (_SGLANG,)),
    Release("sglang", "0.5.1", (_SGLANG,)),
    Release("sglang", "0.5.5", (_SGLANG,)),
    Release("sglang", "0.5.12", (_SGLANG,)),
    Release("sglang", "0.5.23", (_SGLANG,)),
    # verl: legacy actors up to 0.7.1, engine from 0.6.1, engine_workers from 0.7.1
    # (the critic and the reward model's worker up to 0.7, the rollout's replica code)
    Release("verl", "0.4.1", (_VERL_DP, _VERL_MEG, _VERL_CRITIC, _VERL_FSDP_WORKERS) + _VERL_ROLLOUT_OLD),
    Release("verl", "0.5.0", (_VERL_DP, _VERL_MEG, _VERL_CRITIC, _VERL_FSDP_WORKERS, _VERL_SGLANG_SERVER)
            + _VERL_ROLLOUT_OLD),
    Release("verl", "0.6.1", (_VERL_DP, _VERL_MEG, _VERL_BASE, _VERL_FSDP, _VERL_MENG, _VERL_CRITIC,
                              _VERL_FSDP_WORKERS) + _VERL_ROLLOUT),
    Release("verl", "0.7.1", (_VERL_DP, _VERL_MEG, _VERL_BASE, _VERL_FSDP, _VERL_MENG, _VERL_WORKERS, _VERL_CRITIC,
                              _VERL_FSDP_WORKERS) + _VERL_ROLLOUT),
    Release("verl", "0.8.0", (_VERL_BASE, _VERL_FSDP, _VERL_MENG, _VERL_WORKERS) + _VERL_ROLLOUT),
    Release("verl", "0.9.1", (_VERL_BASE, _VERL_FSDP, _VERL_MENG, _VERL_WORKERS) + _VERL_ROLLOUT),
    # vLLM: GPU worker
    Release("vllm", "0.9.2", (_VLLM,)),
    Release("vllm", "0.11.0", (_VLLM,)),
    Release("vllm", "0.15.0", (_VLLM,)),
    Release("vllm", "0.33.0", (_VLLM,)),
)

# Wheel tags asked of pip, in order.  The platform is pinned (rather than taken
# from the running interpreter) so every machine resolves the same wheel; the
# later entries cover releases that ship no cp311 x86_64 build.
# pip expands only the legacy manylinux names (2014 -> 2010 -> 1) to older
# ones, so every PEP 600 glibc level is spelled out.


def _linux_platforms(arch: str) -> Tuple[str, ...]:
    glibc = tuple("manylinux_2_%d_%s" % (minor, arch) for minor in range(40, 16, -1))
    legacy = ("manylinux2014_%s" % arch,)
    if arch == "x86_64":
        legacy += ("manylinux2010_x86_64", "manylinux1_x86_64")
    return glibc + legacy + ("linux_%s" % arch,)


_X86 = _linux_platforms("x86_64")
_ARM = _linux_platforms("aarch64")
_TAG_ATTEMPTS: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    ("3.11", _X86),
    ("3.10", _X86),
    ("3.12", _X86),
    ("3.11", _ARM),
    ("3.10", _ARM),
    ("3.12", _ARM),
)


def releases(dist: Optional[str] = None) -> List[Release]:
    """All releases, or those of one distribution, in table order."""
    if dist is None:
        return list(RELEASES)
    name = canonicalize_name(dist)
    return [r for r in RELEASES if canonicalize_name(r.dist) == name]


def release(dist: str, version: str) -> Release:
    name = canonicalize_name(dist)
    want = Version(version)
    for r in RELEASES:
        if canonicalize_name(r.dist) == name and Version(r.version) == want:
            return r
    raise KeyError("%s==%s is not in tests/realwheels.py RELEASES" % (dist, version))


def _package_inits(files: Sequence[str]) -> List[str]:
    """``__init__.py`` of every package directory on the way to each target."""
    out: List[str] = []
    for f in files:
        parts = PurePosixPath(f).parts[:-1]
        for i in range(1, len(parts) + 1):
            init = "/".join(parts[:i]) + "/__init__.py"
            if init not in out and init not in files:
                out.append(init)
    return out


def _root_dir(rel: Release) -> Path:
    return CACHE / "roots" / rel.key


def _marker_path(rel: Release) -> Path:
    return CACHE / "wheels" / (rel.key + ".json")


def _root_complete(rel: Release, root: Path) -> bool:
    info_file = root / ".realwheels-release.json"
    if not info_file.is_file():
        return False
    try:
        info = json.loads(info_file.read_text())
    except ValueError:
        return False
    # a root holding more targets than asked still serves (branches that list fewer files share the cache)
    if info.get("layout") != _LAYOUT or not set(rel.files) <= set(info.get("targets", [])):
        return False
    return (
        all((root / f).is_file() for f in rel.files)
        and any(root.glob("*.dist-info/METADATA"))
        and any(root.glob("*.dist-info/RECORD"))
    )


@contextlib.contextmanager
def _locked(rel: Release) -> Iterator[None]:
    lock_dir = CACHE / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / (rel.key + ".lock"), "w") as fh:
        if fcntl is not None:
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(fh, fcntl.LOCK_UN)


def _pip_download(rel: Release, dest: Path) -> Tuple[Path, List[str]]:
    """Download the wheel of ``rel`` into ``dest``; return it and the pip args used."""
    errors: List[str] = []
    for py, platforms in _TAG_ATTEMPTS:
        args = [
            sys.executable, "-m", "pip", "download",
            "--no-deps", "--only-binary=:all:",
            "--disable-pip-version-check", "--no-input", "--progress-bar", "off",
            # pip's own HTTP cache would keep a second copy of every wheel
            "--no-cache-dir",
            "--python-version", py, "--implementation", "cp",
        ]
        for p in platforms:
            args += ["--platform", p]
        args += [rel.spec, "-d", str(dest)]
        proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True)
        wheels = sorted(dest.glob("*.whl"))
        if proc.returncode == 0 and wheels:
            return wheels[0], args[3:-2]
        tail = "\n".join(proc.stdout.strip().splitlines()[-6:])
        errors.append("python %s %s: exit %d\n%s" % (py, platforms[0], proc.returncode, tail))
        # "No matching distribution" means: try other tags.  Anything else
        # (network, registry error) would fail the same way again.
        if "No matching distribution" not in proc.stdout and "from versions:" not in proc.stdout:
            break
    raise RealWheelError(
        "could not download the wheel of %s from the package registry.\n"
        "Tests that need real target files do not skip: make the registry reachable "
        "(pip's own PIP_INDEX_URL etc. are honoured) or pre-fill the cache at %s "
        "with `python tests/realwheels.py --all` where it is.\n\n%s"
        % (rel.spec, CACHE, "\n\n".join(errors))
    )


def download(dist: str, version: str, dest: Path) -> Path:
    """Download the whole wheel of ``dist==version`` into ``dest`` and return it (kept, not extracted)."""
    with tempfile.TemporaryDirectory(dir=str(dest)) as tmp:
        got = _pip_download(Release(dist, version, ()), Path(tmp))[0]
        return Path(shutil.move(str(got), str(dest / got.name)))


def _extract(rel: Release, wheel: Path, dest: Path) -> List[str]:
    with zipfile.ZipFile(str(wheel)) as zf:
        names = set(zf.namelist())
        missing = [f for f in rel.files if f not in names]
        if missing:
            raise RealWheelError(
                "%s (%s) does not contain %s" % (rel.spec, wheel.name, ", ".join(missing))
            )
        metadata = sorted(
            n for n in names
            if n.endswith(".dist-info/METADATA") and n.count("/") == 1
        )
        if len(metadata) != 1:
            raise RealWheelError("%s: expected one *.dist-info/METADATA, found %r" % (wheel.name, metadata))
        # RECORD lists every file of the wheel (with hashes), so tests can
        # check what a release does *not* ship after the wheel is deleted.
        record = metadata[0][: -len("METADATA")] + "RECORD"
        if record not in names:
            raise RealWheelError("%s: no %s" % (wheel.name, record))
        metadata.append(record)
        inits = [i for i in _package_inits(rel.files) if i in names]
        top = sorted({PurePosixPath(f).parts[0] + "/__init__.py" for f in rel.files})
        if not any(t in names for t in top):
            raise RealWheelError("%s: no top-level package __init__.py among %r" % (wheel.name, top))
        wanted = list(rel.files) + inits + metadata
        for name in wanted:
            target = dest.joinpath(*PurePosixPath(name).parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(name) as src, open(str(target), "wb") as out:
                shutil.copyfileobj(src, out)
    return wanted


def fetch(dist: str, version: str) -> Dict[str, object]:
    """Make sure the root of ``dist==version`` exists; return what was done.

    The returned dict has ``root``, ``cached`` (True when nothing was
    downloaded), and after a download ``wheel``, ``wheel_bytes``,
    ``download_s`` and ``extract_s``.
    """
    rel = release(dist, version)
    root = _root_dir(rel)
    if _root_complete(rel, root):
        return {"root": root, "cached": True}
    with _locked(rel):
        if _root_complete(rel, root):  # another process finished while we waited
            return {"root": root, "cached": True}
        wheels_dir = CACHE / "wheels"
        roots_dir = root.parent
        wheels_dir.mkdir(parents=True, exist_ok=True)
        roots_dir.mkdir(parents=True, exist_ok=True)
        dl_dir = Path(tempfile.mkdtemp(prefix=".dl-%s-" % rel.key, dir=str(wheels_dir)))
        tmp_root = Path(tempfile.mkdtemp(prefix=".tmp-%s-" % rel.key, dir=str(roots_dir)))
        try:
            t0 = time.monotonic()
            wheel, pip_args = _pip_download(rel, dl_dir)
            t1 = time.monotonic()
            wheel_bytes = wheel.stat().st_size
            extracted = _extract(rel, wheel, tmp_root)
            t2 = time.monotonic()
            info = {
                "layout": _LAYOUT,
                "dist": rel.dist,
                "version": rel.version,
                "wheel": wheel.name,
                "wheel_bytes": wheel_bytes,
                "download_s": round(t1 - t0, 2),
                "extract_s": round(t2 - t1, 2),
                "pip_args": pip_args,
                "targets": list(rel.files),
                "extracted": extracted,
            }
            (tmp_root / ".realwheels-release.json").write_text(json.dumps(info, indent=1) + "\n")
            if root.exists():  # stale or incomplete: replace it
                shutil.rmtree(str(root), ignore_errors=True)
            os.rename(str(tmp_root), str(root))
            # The wheel is not kept (vllm's are ~0.5 GB); the marker says what it was.
            _marker_path(rel).write_text(json.dumps(info, indent=1) + "\n")
        finally:
            shutil.rmtree(str(dl_dir), ignore_errors=True)
            shutil.rmtree(str(tmp_root), ignore_errors=True)
    out: Dict[str, object] = dict(info)
    out.update(root=root, cached=False)
    return out


def release_root(dist: str, version: str) -> Path:
    """Site-packages-shaped folder holding the targets of ``dist==version``.

    Downloads and extracts on first use; afterwards it only checks the cache.
    Safe to call from several processes at once.
    """
    return Path(fetch(dist, version)["root"])  # type: ignore[arg-type]


def wheel_files(dist: str, version: str) -> List[str]:
    """Every path the released wheel contains (from its ``RECORD``), extracted or not."""
    root = release_root(dist, version)
    records = sorted(root.glob("*.dist-info/RECORD"))
    if len(records) != 1:
        raise RealWheelError("%s: expected one RECORD in %s" % (dist, root))
    with open(str(records[0]), newline="", encoding="utf-8") as fh:
        return [row[0] for row in csv.reader(fh) if row and row[0]]


def target_path(dist: str, version: str, relpath: str) -> Path:
    """Path of one listed target file inside :func:`release_root`."""
    rel = release(dist, version)
    if relpath not in rel.files:
        raise KeyError("%s is not a listed target of %s" % (relpath, rel.spec))
    return release_root(dist, version).joinpath(*PurePosixPath(relpath).parts)


# --------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------


def _parse_spec(text: str) -> Release:
    if "==" not in text:
        raise SystemExit("expected DIST==VERSION, got %r" % text)
    dist, version = text.split("==", 1)
    try:
        return release(dist.strip(), version.strip())
    except KeyError as exc:
        raise SystemExit(str(exc.args[0]))


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="Pre-fetch the real target files of released wheels.")
    ap.add_argument("specs", nargs="*", metavar="DIST==VERSION")
    ap.add_argument("--all", action="store_true", help="every release in RELEASES")
    ap.add_argument("--list", action="store_true", help="print the table and the cache state")
    args = ap.parse_args(argv)

    if args.list:
        for r in RELEASES:
            state = "cached" if _root_complete(r, _root_dir(r)) else "missing"
            print("%-22s %-7s %s" % (r.spec, state, " ".join(r.files)))
        print("cache: %s" % CACHE)
        return 0
    if args.all:
        todo = list(RELEASES)
    elif args.specs:
        todo = [_parse_spec(s) for s in args.specs]
    else:
        ap.error("give --all, --list or DIST==VERSION ...")
        return 2

    print("cache: %s" % CACHE, flush=True)
    total_bytes = 0
    total_s = 0.0
    failed = 0
    for r in todo:
        t0 = time.monotonic()
        try:
            info = fetch(r.dist, r.version)
        except RealWheelError as exc:
            failed += 1
            print("%-22s FAILED\n%s" % (r.spec, exc), flush=True)
            continue
        if info["cached"]:
            print("%-22s cached  %s" % (r.spec, info["root"]), flush=True)
            continue
        size = int(info["wheel_bytes"])  # type: ignore[arg-type]
        total_bytes += size
        total_s += time.monotonic() - t0
        print(
            "%-22s %8.1f MB  download %6.1f s  extract %4.1f s  %s"
            % (r.spec, size / 1e6, info["download_s"], info["extract_s"], info["wheel"]),
            flush=True,
        )
    print("downloaded %.1f MB in %.1f s; %d failed" % (total_bytes / 1e6, total_s, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

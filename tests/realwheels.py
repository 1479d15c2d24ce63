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

Source-only releases.  Some releases are published only as an sdist (the
table marks the ones known; a release with no wheel for any tag tried falls
back to its sdist too).  pip cannot download an sdist without preparing its
metadata, which runs the sdist's build backend (pypa/pip#1884, open since
2014).  Build isolation would install the release's whole build-system.requires
(torch, torch-npu, triton-ascend ... for vllm-ascend), so the backend runs with
``--no-build-isolation`` on this interpreter, with only setuptools and
setuptools-scm (installed once by pip into CACHE/build-tools) on PYTHONPATH
and the environment variables that let the release's setup.py run without its
vendor's toolchain (:data:`_SDIST_ENV`).  That runs the sdist's setup.py on
this machine, as installing it would.  The root then gets the same shape as a
wheel's: the targets and their packages' ``__init__.py`` files at their
installed paths, a ``<name>-<version>.dist-info/METADATA`` with the Name and
Version of the sdist's PKG-INFO, and a RECORD listing the sdist's files of the
release's top-level packages at the paths an install would give them.

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
import base64
import contextlib
import csv
import email.parser
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
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
    "fetch_release",
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
    sdist: bool = False  # published only as a source archive: fetch that without asking for a wheel first

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
    # vllm-ascend: worker_v1.py (0.7.3rc2 to 0.9.1 also ship the V0 worker.py), renamed worker.py from 0.13.0
    # 0.7.3rc2: the oldest release with NPUWorker.execute_model (scripts/sweep.py --older); a 0.4 MB sdist
    Release("vllm-ascend", "0.7.3rc2", (_ASCEND_V1, _ASCEND), sdist=True),
    Release("vllm-ascend", "0.9.1", (_ASCEND_V1, _ASCEND)),
    Release("vllm-ascend", "0.11.0", (_ASCEND_V1,)),
    Release("vllm-ascend", "0.13.0", (_ASCEND,)),
    Release("vllm-ascend", "0.18.0", (_ASCEND,)),
    Release("vllm-ascend", "0.23.0", (_ASCEND,)),
    # from here on, some releases ship only an sdist (0.24.0rc1 has wheels)
    Release("vllm-ascend", "0.23.0.post1", (_ASCEND,), sdist=True),
    Release("vllm-ascend", "0.24.0rc1", (_ASCEND,)),
    Release("vllm-ascend", "0.27.1rc1", (_ASCEND,), sdist=True),
    Release("vllm-ascend", "0.30.0rc2", (_ASCEND,), sdist=True),
    # SGLang: ModelRunner (0.4.4: the oldest with forward(self, forward_batch, skip_attn_backend_init))
    Release("sglang", "0.4.4", (_SGLANG,)),
    Release("sglang", "0.4.6", (_SGLANG,)),
    Release("sglang", "0.4.9", (_SGLANG,)),
    Release("sglang", "0.5.1", (_SGLANG,)),
    Release("sglang", "0.5.5", (_SGLANG,)),
    Release("sglang", "0.5.12", (_SGLANG,)),
    Release("sglang", "0.5.23", (_SGLANG,)),
    # verl: legacy actors up to 0.7.1, engine from 0.6.0, engine_workers from 0.7.1
    # (the critic and the reward model's worker up to 0.7, the rollout's replica code); 0.2 and 0.3.0.post0: the
    # oldest releases the reward model's and the FSDP actor's and critic's updates are proven on (sweep.py --older)
    Release("verl", "0.2", (_VERL_DP, _VERL_MEG, _VERL_CRITIC, _VERL_FSDP_WORKERS)),
    Release("verl", "0.3.0.post0", (_VERL_DP, _VERL_MEG, _VERL_CRITIC, _VERL_FSDP_WORKERS)),
    Release("verl", "0.4.1", (_VERL_DP, _VERL_MEG, _VERL_CRITIC, _VERL_FSDP_WORKERS) + _VERL_ROLLOUT_OLD),
    Release("verl", "0.5.0", (_VERL_DP, _VERL_MEG, _VERL_CRITIC, _VERL_FSDP_WORKERS, _VERL_SGLANG_SERVER)
            + _VERL_ROLLOUT_OLD),
    # 0.6.0: the oldest release verl-engine-update is proven on (sweep.py --older)
    Release("verl", "0.6.0", (_VERL_DP, _VERL_MEG, _VERL_BASE, _VERL_FSDP, _VERL_CRITIC, _VERL_FSDP_WORKERS)),
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


def _root_complete(rel: Release, root: Path, optional: Sequence[str] = ()) -> bool:
    info_file = root / ".realwheels-release.json"
    if not info_file.is_file():
        return False
    try:
        info = json.loads(info_file.read_text())
    except ValueError:
        return False
    # a root holding more targets than asked still serves (branches that list fewer files share the cache)
    targets = set(info.get("targets", []))
    if info.get("layout") != _LAYOUT or not set(rel.files) <= targets:
        return False
    unknown = set(optional) - targets - set(info.get("absent", []))  # each one looked for: there, or known absent
    if unknown and unknown & set(_record_paths(root)):  # one the release ships was not extracted
        return False
    return (
        all((root / f).is_file() for f in rel.files)
        and any(root.glob("*.dist-info/METADATA"))
        and any(root.glob("*.dist-info/RECORD"))
    )


def _record_paths(root: Path) -> List[str]:
    records = sorted(root.glob("*.dist-info/RECORD"))
    if len(records) != 1:
        return []
    with open(str(records[0]), newline="", encoding="utf-8") as fh:
        return [row[0] for row in csv.reader(fh) if row and row[0]]


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    lock_dir = CACHE / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / (name + ".lock"), "w") as fh:
        if fcntl is not None:
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(fh, fcntl.LOCK_UN)


class _NoWheel(RealWheelError):
    """The registry has no wheel of the release for any tag tried (it may have an sdist)."""


def _registry_hint() -> str:
    return ("Tests that need real target files do not skip: make the registry reachable "
            "(pip's own PIP_INDEX_URL etc. are honoured) or pre-fill the cache at %s "
            "with `python tests/realwheels.py --all` where it is." % CACHE)


def _run_pip(args: List[str], env: Optional[Dict[str, str]] = None) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, env=env)


def _pip_download_wheel(rel: Release, dest: Path) -> Tuple[Path, List[str]]:
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
        proc = _run_pip(args)
        wheels = sorted(dest.glob("*.whl"))
        if proc.returncode == 0 and wheels:
            return wheels[0], args[3:-2]
        tail = "\n".join(proc.stdout.strip().splitlines()[-6:])
        errors.append("python %s %s: exit %d\n%s" % (py, platforms[0], proc.returncode, tail))
        # "No matching distribution" means: try other tags.  Anything else
        # (network, registry error) would fail the same way again.
        if "No matching distribution" not in proc.stdout and "from versions:" not in proc.stdout:
            break
    else:
        raise _NoWheel("%s has no wheel for any tag tried\n\n%s" % (rel.spec, "\n\n".join(errors)))
    raise RealWheelError(
        "could not download the wheel of %s from the package registry.\n%s\n\n%s"
        % (rel.spec, _registry_hint(), "\n\n".join(errors))
    )


# What preparing an sdist's metadata needs besides pip (see the module's docstring):
# the packages put on PYTHONPATH, and per distribution the environment its setup.py asks for.
_SDIST_TOOLS = ("setuptools>=64", "setuptools-scm>=8")
_SDIST_ENV: Dict[str, Dict[str, str]] = {
    # setup.py asks npu-smi for the chip unless SOC_VERSION names one; no kernels are compiled for metadata
    "vllm-ascend": {"SOC_VERSION": "ascend910b1", "COMPILE_CUSTOM_KERNELS": "0"},
}


def _build_tools() -> Path:
    """A folder with :data:`_SDIST_TOOLS` (pip install --target), installed once and shared."""
    key = hashlib.sha256("\n".join(_SDIST_TOOLS).encode()).hexdigest()[:12]
    tools = CACHE / "build-tools" / key
    done = tools / ".complete"
    if done.is_file():
        return tools
    with _locked("build-tools-" + key):
        if done.is_file():
            return tools
        tools.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-%s-" % key, dir=str(tools.parent)))
        try:
            proc = _run_pip([sys.executable, "-m", "pip", "install", "--target", str(tmp), "--no-cache-dir",
                             "--disable-pip-version-check", "--no-input", "--progress-bar", "off", "--quiet"]
                            + list(_SDIST_TOOLS))
            if proc.returncode != 0:
                raise RealWheelError("could not install %s, which reading an sdist's metadata needs:\n%s"
                                     % (" ".join(_SDIST_TOOLS), proc.stdout.strip()[-2000:]))
            (tmp / ".complete").write_text(" ".join(_SDIST_TOOLS) + "\n")
            if tools.exists():
                shutil.rmtree(str(tools), ignore_errors=True)
            os.rename(str(tmp), str(tools))
        finally:
            shutil.rmtree(str(tmp), ignore_errors=True)
    return tools


def _pip_download_sdist(rel: Release, dest: Path) -> Tuple[Path, List[str]]:
    """Download the sdist of ``rel`` into ``dest``; return it and the pip args used."""
    args = [
        sys.executable, "-m", "pip", "download",
        "--no-deps", "--no-binary", ":all:", "--no-build-isolation",
        "--disable-pip-version-check", "--no-input", "--progress-bar", "off", "--no-cache-dir",
        rel.spec, "-d", str(dest),
    ]
    extra = dict(_SDIST_ENV.get(canonicalize_name(rel.dist), {}))
    env = dict(os.environ, **extra)
    env["PYTHONPATH"] = os.pathsep.join([str(_build_tools())] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    proc = _run_pip(args, env)
    got = sorted(p for p in dest.iterdir() if p.name.endswith((".tar.gz", ".zip", ".tar.bz2", ".tar.xz", ".tgz")))
    if proc.returncode == 0 and got:
        return got[0], args[3:-3] + ["%s=%s" % kv for kv in sorted(extra.items())]
    tail = "\n".join(proc.stdout.strip().splitlines()[-12:])
    raise RealWheelError(
        "could not download the sdist of %s from the package registry (pip prepares an sdist's metadata while "
        "downloading it: tests/realwheels.py _SDIST_ENV and _SDIST_TOOLS say what it is given).\n%s\n\nexit %d\n%s"
        % (rel.spec, _registry_hint(), proc.returncode, tail)
    )


def _pip_download(rel: Release, dest: Path) -> Tuple[Path, List[str]]:
    """The wheel of ``rel``, or its sdist where the table says so or no wheel fits any tag tried."""
    if rel.sdist:
        return _pip_download_sdist(rel, dest)
    try:
        return _pip_download_wheel(rel, dest)
    except _NoWheel as no_wheel:
        try:
            return _pip_download_sdist(rel, dest)
        except RealWheelError as exc:
            raise RealWheelError("%s\n\n(before that: %s)" % (exc, str(no_wheel).splitlines()[0])) from None


def download(dist: str, version: str, dest: Path) -> Path:
    """Download the whole wheel of ``dist==version`` into ``dest`` and return it (kept, not extracted)."""
    with tempfile.TemporaryDirectory(dir=str(dest)) as tmp:
        got = _pip_download_wheel(Release(dist, version, ()), Path(tmp))[0]
        return Path(shutil.move(str(got), str(dest / got.name)))


def _write(dest: Path, name: str, data: bytes) -> None:
    target = dest.joinpath(*PurePosixPath(name).parts)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def _missing(rel: Release, archive: Path, names: Sequence[str]) -> RealWheelError:
    return RealWheelError("%s (%s) does not contain %s" % (rel.spec, archive.name, ", ".join(names)))


def _extract_wheel(rel: Release, wheel: Path, dest: Path, optional: Sequence[str] = ()) -> List[str]:
    with zipfile.ZipFile(str(wheel)) as zf:
        names = set(zf.namelist())
        missing = [f for f in rel.files if f not in names]
        if missing:
            raise _missing(rel, wheel, missing)
        files = list(rel.files) + [f for f in optional if f in names and f not in rel.files]
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
        inits = [i for i in _package_inits(files) if i in names]
        top = sorted({PurePosixPath(f).parts[0] + "/__init__.py" for f in rel.files})
        if top and not any(t in names for t in top):
            raise RealWheelError("%s: no top-level package __init__.py among %r" % (wheel.name, top))
        wanted = files + inits + metadata
        for name in wanted:
            with zf.open(name) as src:
                _write(dest, name, src.read())
    return wanted


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")


def _sdist_files(archive: Path) -> Iterator[Tuple[str, bytes]]:
    """(path inside the archive, contents) of each regular file of an sdist (.tar.* or .zip)."""
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(str(archive)) as zf:
            for info in zf.infolist():
                if not info.is_dir():
                    yield info.filename, zf.read(info)
        return
    with tarfile.open(str(archive)) as tf:
        for member in tf:
            if member.isfile():
                fh = tf.extractfile(member)
                if fh is not None:
                    yield member.name, fh.read()


def _extract_sdist(rel: Release, sdist: Path, dest: Path, optional: Sequence[str] = ()) -> List[str]:
    """Lay the targets of a source-only release out as an install of it would (see the module's docstring)."""
    contents: Dict[str, bytes] = {}
    for name, data in _sdist_files(sdist):
        parts = PurePosixPath(name).parts
        if len(parts) < 2 or ".." in parts or PurePosixPath(name).is_absolute():
            continue  # an sdist's files are under one top folder, <name>-<version>/
        contents["/".join(parts[1:])] = data
    info = contents.get("PKG-INFO")
    if info is None:
        raise RealWheelError("%s: no PKG-INFO at the top of the sdist" % sdist.name)
    headers = email.parser.BytesParser().parsebytes(info, headersonly=True)
    name, version = headers.get("Name", ""), headers.get("Version", "")
    if canonicalize_name(name) != canonicalize_name(rel.dist) or Version(version) != Version(rel.version):
        raise RealWheelError("%s: PKG-INFO says %s %s, not %s" % (sdist.name, name, version, rel.spec))
    # the packages are at the top of the sdist, or under src/
    asked = list(rel.files) + [f for f in optional if f not in rel.files]
    base = "src/" if not any(f in contents for f in asked) and any("src/" + f in contents for f in asked) else ""
    installed = {n[len(base):]: data for n, data in contents.items() if n.startswith(base)}
    missing = [f for f in rel.files if f not in installed]
    if missing:
        raise _missing(rel, sdist, missing)
    files = [f for f in asked if f in installed]
    tops = {PurePosixPath(f).parts[0] for f in files}
    for n, data in contents.items():  # what setuptools says the top-level packages are
        if n.endswith(".egg-info/top_level.txt") and n.count("/") == base.count("/") + 1:
            tops.update(line.strip() for line in data.decode("utf-8", "replace").splitlines() if line.strip())
    package_files = sorted(n for n in installed if PurePosixPath(n).parts[0] in tops)
    inits = [i for i in _package_inits(files) if i in installed]
    if rel.files and not any(PurePosixPath(f).parts[0] + "/__init__.py" in installed for f in rel.files):
        raise RealWheelError("%s: no top-level package __init__.py for %r" % (sdist.name, list(rel.files)))
    for n in files + inits:
        _write(dest, n, installed[n])
    dist_info = "%s-%s.dist-info" % (canonicalize_name(name).replace("-", "_"), version)
    metadata = ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version)).encode()
    rows = [(n, _record_hash(installed[n]), str(len(installed[n]))) for n in package_files]
    rows.append((dist_info + "/METADATA", _record_hash(metadata), str(len(metadata))))
    rows.append((dist_info + "/RECORD", "", ""))
    record = io.StringIO()
    csv.writer(record, lineterminator="\n").writerows(rows)
    _write(dest, dist_info + "/METADATA", metadata)
    _write(dest, dist_info + "/RECORD", record.getvalue().encode())
    return files + inits + [dist_info + "/METADATA", dist_info + "/RECORD"]


def fetch(dist: str, version: str) -> Dict[str, object]:
    """Make sure the root of ``dist==version`` (a release of the table) exists; return what was done.

    The returned dict has ``root``, ``cached`` (True when nothing was
    downloaded), and after a download ``kind`` (wheel or sdist), ``file``,
    ``bytes``, ``download_s`` and ``extract_s``.
    """
    return fetch_release(release(dist, version))


def fetch_release(rel: Release, optional: Sequence[str] = ()) -> Dict[str, object]:
    """:func:`fetch` for any release, in the table or not (``scripts/sweep.py`` fetches releases newer than it).

    ``optional`` files are extracted where the release has them; the root records which it lacks, so a second call
    asking for the same files downloads nothing.
    """
    root = _root_dir(rel)
    if _root_complete(rel, root, optional):
        return {"root": root, "cached": True}
    with _locked(rel.key):
        if _root_complete(rel, root, optional):  # another process finished while we waited
            return {"root": root, "cached": True}
        wheels_dir = CACHE / "wheels"
        roots_dir = root.parent
        wheels_dir.mkdir(parents=True, exist_ok=True)
        roots_dir.mkdir(parents=True, exist_ok=True)
        dl_dir = Path(tempfile.mkdtemp(prefix=".dl-%s-" % rel.key, dir=str(wheels_dir)))
        tmp_root = Path(tempfile.mkdtemp(prefix=".tmp-%s-" % rel.key, dir=str(roots_dir)))
        try:
            t0 = time.monotonic()
            got, pip_args = _pip_download(rel, dl_dir)
            t1 = time.monotonic()
            kind = "wheel" if got.name.endswith(".whl") else "sdist"
            extract = _extract_wheel if kind == "wheel" else _extract_sdist
            extracted = extract(rel, got, tmp_root, optional)
            t2 = time.monotonic()
            targets = sorted(set(rel.files) | {f for f in optional if f in extracted})
            info = {
                "layout": _LAYOUT,
                "dist": rel.dist,
                "version": rel.version,
                "kind": kind,
                "file": got.name,
                "bytes": got.stat().st_size,
                "download_s": round(t1 - t0, 2),
                "extract_s": round(t2 - t1, 2),
                "pip_args": pip_args,
                "targets": targets,
                "absent": sorted(set(optional) - set(targets)),
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
    """Every path the released wheel contains (from its ``RECORD``), extracted or not.

    For a source-only release: the sdist's files of its top-level packages, at their installed paths.
    """
    root = release_root(dist, version)
    if len(list(root.glob("*.dist-info/RECORD"))) != 1:
        raise RealWheelError("%s: expected one RECORD in %s" % (dist, root))
    return _record_paths(root)


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
            print("%-26s %-7s %s" % (r.spec, state, " ".join(r.files)))
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
            print("%-26s FAILED\n%s" % (r.spec, exc), flush=True)
            continue
        if info["cached"]:
            print("%-26s cached  %s" % (r.spec, info["root"]), flush=True)
            continue
        size = int(info["bytes"])  # type: ignore[arg-type]
        total_bytes += size
        total_s += time.monotonic() - t0
        print(
            "%-26s %8.1f MB  download %6.1f s  extract %4.1f s  %s"
            % (r.spec, size / 1e6, info["download_s"], info["extract_s"], info["file"]),
            flush=True,
        )
    print("downloaded %.1f MB in %.1f s; %d failed" % (total_bytes / 1e6, total_s, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

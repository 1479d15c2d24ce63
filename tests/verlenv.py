"""Real verl releases, installed for running on CPU: the environment of tests/test_real_verl.py.

Each verl release gets, once, a cache outside the repository (under the
same root as tests/realwheels.py):

    CACHE/verl-envs/wheels/verl-<version>-*.whl               the wheel, kept whole
    CACHE/verl-envs/<version>-<base>/                         a virtual environment

The environment holds only the Python packages that the code paths under
test import (``NEEDED``), at the versions the release's own METADATA
declares (``Requires-Dist``), plus the few pins in ``EXTRA_PINS``, each with
its reason.  It has no pip of its own and no copy of torch: while pip
installs into it, a ``.pth`` file puts the site-packages of the interpreter
running the tests after its own, so pip sees torch (the CPU build), ray and
patchkit as installed.  A job then runs with that interpreter and the
environment's site-packages first on PYTHONPATH (:func:`site_packages`).
``<base>`` is a hash of that interpreter's Python and distributions, so a
developer's venv and CI's do not share an environment resolved against the
other, and CI runs from fresh clones of the same commit do.

verl itself is never installed there: :func:`install` unzips the whole
wheel into a folder of the test's own (``--root`` for patchkit), and
:func:`record_mismatches` checks that folder against the wheel's RECORD.

Command line (pre-build, print the state)::

    python tests/verlenv.py 0.4.1 0.7.1 0.9.1
"""

from __future__ import annotations

import base64
import contextlib
import csv
import email.parser
import hashlib
import json
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path
from typing import Dict, Iterator, List, Sequence

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

try:
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

import realwheels

ROOT = realwheels.CACHE / "verl-envs"
WHEELS = ROOT / "wheels"

# What DataProto, dp_actor, dp_critic and the FSDP engine import on CPU, by the
# names verl's METADATA uses: hydra-core brings omegaconf (0.6 and later build
# their config dataclasses with hydra's instantiate); verl 0.5's protocol.py
# imports pandas, which must be built for the numpy the release pins.
NEEDED = ("tensordict", "numpy", "pandas", "transformers", "hydra-core", "codetiming")
# The engine workers of verl 0.8 and later import more on the way (fsdp_utils: peft,
# accelerate; rl_dataset: datasets, pillow; the rollout utilities that
# checkpoint_engine reaches: uvicorn, fastapi; 0.8's pure-torch padding: einops).
NEEDED_ENGINE = ("peft", "accelerate", "datasets", "pillow", "uvicorn", "fastapi", "einops")

# Pins the METADATA does not state, each with the error that made it necessary.
EXTRA_PINS: Dict[str, List[str]] = {
    # verl/__init__.py imports pkg_resources, which setuptools 81 removed:
    # "ModuleNotFoundError: No module named 'pkg_resources'"
    "0.4.1": ["setuptools<81"],
    # verl/utils/model.py imports AutoModelForVision2Seq, gone in transformers 5.0:
    # "ImportError: cannot import name 'AutoModelForVision2Seq' from 'transformers'"
    "0.6.1": ["transformers<5"],
    # verl 0.8.0 pins numpy<2; pyarrow 26 (datasets imports it) needs NumPy 2:
    # "ImportError: pyarrow requires NumPy 2.0 or newer, found 1.26.4"
    # and its engine fails on the newest transformers (5.24) where 5.10, inside the bound verl 0.9 declares, works:
    # "ValueError: Unrecognized model in .../actor. Should have a `model_type` key in its config.json"
    "0.8.0": ["pyarrow<26", "transformers<5.11"],
}

# Bump when what an environment holds changes, so old ones are rebuilt.
_LAYOUT = 4


class VerlEnvError(RuntimeError):
    """A release or its dependencies could not be installed."""


def _base_key() -> str:
    """What the running interpreter brings: its Python and every distribution it has, by name and version."""
    from importlib import metadata

    have = sorted("%s==%s" % (d.metadata["Name"], d.version) for d in metadata.distributions())
    return hashlib.sha256("\n".join([sys.version] + have).encode()).hexdigest()[:10]


def env_dir(version: str) -> Path:
    return ROOT / ("%s-%s" % (version, _base_key()))


def site_packages(version: str) -> Path:
    """The packages of ``version``'s environment (built on first use), for PYTHONPATH in front of this
    interpreter's own: a job runs with ``sys.executable``, so torch, ray and patchkit come from here."""
    folder = ensure(version)
    (found,) = folder.glob("lib/python*/site-packages")
    return found


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    locks = ROOT / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / (name + ".lock"), "w") as handle:
        if fcntl is not None:
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def wheel(version: str) -> Path:
    """The wheel of verl ``version``, downloaded once with pip."""
    WHEELS.mkdir(parents=True, exist_ok=True)

    def found():
        return sorted(WHEELS.glob("verl-%s-*.whl" % version))

    if not found():
        with _locked("wheel-" + version):
            if not found():
                realwheels.download("verl", version, WHEELS)
    return found()[0]


def _metadata(version: str) -> email.message.Message:
    with zipfile.ZipFile(wheel(version)) as zf:
        [meta] = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1]
        return email.parser.Parser().parsestr(zf.read(meta).decode("utf-8"))


def requirements(version: str) -> List[str]:
    """The requirements of ``NEEDED``, as the release declares them, then ``EXTRA_PINS``."""
    declared = {}
    for line in _metadata(version).get_all("Requires-Dist") or []:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        declared[canonicalize_name(req.name)] = req
    out = []
    engine = Version(version) >= Version("0.8")
    for name in NEEDED + (NEEDED_ENGINE if engine else ()):
        req = declared.get(canonicalize_name(name))
        out.append(str(req) if req is not None else name)
    return out + EXTRA_PINS.get(version, [])


def _marker(version: str) -> Path:
    return env_dir(version) / "patchkit-verl-env.json"


def _wanted(version: str) -> Dict[str, object]:
    return {"layout": _LAYOUT, "verl": version, "requirements": requirements(version)}


def ensure(version: str) -> Path:
    """Build the environment of ``version`` unless an identical one is there; return its folder."""
    folder = env_dir(version)
    wanted = _wanted(version)
    with _locked("env-" + version):
        with contextlib.suppress(OSError, ValueError):
            if json.loads(_marker(version).read_text()) == wanted:
                return folder
        _build(folder, wanted["requirements"])
        _marker(version).write_text(json.dumps(wanted))
    return folder


def _build(folder: Path, reqs: Sequence[str]) -> None:
    import shutil

    shutil.rmtree(folder, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    site = Path(subprocess.run([str(folder / "bin" / "python"), "-c",
                                "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    # addsitedir, not a bare path: the base's own .pth files (an editable install's finder) are read too
    base = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    (site / "zz_patchkit_base.pth").write_text("".join("import site; site.addsitedir(%r)\n" % p for p in base))
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(folder / "bin" / "python"), "install",
                           "--disable-pip-version-check", "--no-input", "--progress-bar", "off",
                           "--prefer-binary", *reqs],  # hydra-core's antlr4 runtime is a source package
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise VerlEnvError("could not install %s into %s:\n%s" % (" ".join(reqs), folder, done.stdout[-3000:]
                                                                 + done.stderr[-3000:]))


def install(version: str, dest: Path) -> Path:
    """Unzip the whole wheel of verl ``version`` into ``dest`` (a site-packages-shaped folder)."""
    dest.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel(version)) as zf:
        zf.extractall(dest)
    return dest


def record_mismatches(version: str, site: Path) -> List[str]:
    """The files under ``site`` whose bytes differ from the wheel's RECORD (or are missing)."""
    with zipfile.ZipFile(wheel(version)) as zf:
        [record] = [n for n in zf.namelist() if n.endswith(".dist-info/RECORD") and n.count("/") == 1]
        rows = list(csv.reader(zf.read(record).decode("utf-8").splitlines()))
    bad = []
    for row in rows:
        if len(row) < 2 or not row[1]:
            continue  # RECORD itself has no hash
        algo, _, want = row[1].partition("=")
        path = site / row[0]
        try:
            digest = hashlib.new(algo, path.read_bytes()).digest()
        except OSError:
            bad.append(row[0] + " (missing)")
            continue
        if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != want:
            bad.append(row[0])
    if not rows:
        bad.append(record + " (empty)")
    return bad


def main(argv: Sequence[str]) -> int:
    for version in argv or ("0.4.1", "0.7.1", "0.9.1"):
        folder = site_packages(version)
        print("verl %s: %s (%s)" % (version, folder, ", ".join(requirements(version))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

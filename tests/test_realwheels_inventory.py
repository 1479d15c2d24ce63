"""The released wheels contain the targets patchkit's recipes are written for.

Every recipe names a file, a class and a method in a specific release of
vllm-ascend, SGLang, verl or vLLM (see the shared TARGETS.md reference).  This
test fetches each release of ``tests/realwheels.py``'s table (wheels, or the
sdist of a source-only release) and checks that the files are there, parse, and define the classes and methods at
the lines and with the return counts the reference gives, and that the files
the reference says were removed really are gone.  Nothing is skipped: a
release that cannot be fetched is an error.
"""

from __future__ import annotations

import ast
import csv
from typing import Dict, Iterator, Optional, Tuple, Union

import pytest

import realwheels

ABSENT = "absent"

# (def line, number of `return` statements in the method body, nested defs excluded);
# None = must exist, numbers not pinned; ABSENT = must not exist.
MethodFacts = Union[Tuple[int, int], None, str]
Inventory = Dict[str, Dict[str, Dict[str, MethodFacts]]]  # file -> class -> method -> facts

_ASCEND_V1 = "vllm_ascend/worker/worker_v1.py"
_ASCEND = "vllm_ascend/worker/worker.py"
_SGLANG = "sglang/srt/model_executor/model_runner.py"
_VLLM = "vllm/v1/worker/gpu_worker.py"
_DP = "verl/workers/actor/dp_actor.py"
_MEG = "verl/workers/actor/megatron_actor.py"
_BASE = "verl/workers/engine/base.py"
_FSDP = "verl/workers/engine/fsdp/transformer_impl.py"
_MENG = "verl/workers/engine/megatron/transformer_impl.py"
_WORKERS = "verl/workers/engine_workers.py"
_CRITIC = "verl/workers/critic/dp_critic.py"
_FSDP_WORKERS = "verl/workers/fsdp_workers.py"
_WORKER = "verl/single_controller/base/worker.py"
_VLLM_SERVER = "verl/workers/rollout/vllm_rollout/vllm_async_server.py"
_SGLANG_SERVER = "verl/workers/rollout/sglang_rollout/async_sglang_server.py"
_REPLICA = "verl/workers/rollout/replica.py"


def _npu(init: int, execute: int, returns: int) -> Dict[str, Dict[str, MethodFacts]]:
    return {"NPUWorker": {"__init__": (init, 0), "execute_model": (execute, returns)}}


def _runner(init: int, forward: int, returns: int) -> Dict[str, Dict[str, MethodFacts]]:
    return {"ModelRunner": {"__init__": (init, 0), "forward": (forward, returns)}}


def _worker(init: int, execute: int, returns: int) -> Dict[str, Dict[str, MethodFacts]]:
    return {"Worker": {"__init__": (init, 0), "execute_model": (execute, returns)}}


def _dp(clp: int, upd: int) -> Dict[str, Dict[str, MethodFacts]]:
    return {"DataParallelPPOActor": {"compute_log_prob": (clp, 1), "update_policy": (upd, 1)}}


def _meg(upd: int, clp: int) -> Dict[str, Dict[str, MethodFacts]]:
    return {"MegatronPPOActor": {"update_policy": (upd, 1), "compute_log_prob": (clp, 1)}}


def _critic(upd: int) -> Dict[str, Dict[str, MethodFacts]]:
    return {"DataParallelPPOCritic": {"update_critic": (upd, 1)}}


def _rm(score: Optional[int]) -> Dict[str, Dict[str, MethodFacts]]:
    if score is None:  # 0.7.1: the reward model moved to the reward loop
        return {"ActorRolloutRefWorker": {"compute_rm_score": ABSENT}, "CriticWorker": {"update_critic": None}}
    return {"RewardModelWorker": {"compute_rm_score": (score, 1)}}


def _rollout(server: str, sglang: Optional[str] = None, replica: bool = True) -> Dict[str, Dict[str, Dict[str, MethodFacts]]]:
    """Where a rollout worker learns its Agent Loop replica (the facts are in tests/test_replica_facts.py)."""
    out = {_WORKER: {"Worker": {"__init__": None}}, _VLLM_SERVER: {server: {"__init__": None}}}
    if sglang:
        out[_SGLANG_SERVER] = {sglang: {"__init__": None}}
    if replica:
        out[_REPLICA] = {"RolloutReplica": {"__init__": None}}
    return out


def _base(train: int) -> Dict[str, Dict[str, MethodFacts]]:
    return {"BaseEngine": {"train_batch": (train, 1), "infer_batch": None, "optimizer_step": None}}


def _fsdp(fbb: int) -> Dict[str, Dict[str, MethodFacts]]:
    return {"FSDPEngine": {"forward_backward_batch": (fbb, 1)}}


def _meng(fbb: int, fbb_returns: int, fstep: int) -> Dict[str, Dict[str, MethodFacts]]:
    return {
        "MegatronEngine": {"forward_backward_batch": (fbb, fbb_returns)},
        "MegatronEngineWithLMHead": {"forward_step": (fstep, 1)},
    }


def _workers(tmb: int) -> Dict[str, Dict[str, MethodFacts]]:
    return {"TrainingWorker": {"train_mini_batch": (tmb, 1)}}


# Line numbers and return counts from TARGETS.md (1-based lines in the file inside the wheel or sdist).
INVENTORY: Dict[Tuple[str, str], Inventory] = {
    # older than TARGETS.md: lines from the releases themselves (0.7.3rc2: an sdist only)
    ("vllm-ascend", "0.7.3rc2"): {
        _ASCEND_V1: _npu(50, 193, 1),
        _ASCEND: {"NPUWorker": {"__init__": None, "execute_model": ABSENT}},
    },
    ("vllm-ascend", "0.9.1"): {
        _ASCEND_V1: _npu(57, 220, 1),
        # The V0 worker: same class name, no execute_model.
        _ASCEND: {"NPUWorker": {"__init__": None, "execute_model": ABSENT}},
    },
    ("vllm-ascend", "0.11.0"): {_ASCEND_V1: _npu(71, 261, 4)},
    ("vllm-ascend", "0.13.0"): {_ASCEND: _npu(84, 313, 4)},
    ("vllm-ascend", "0.18.0"): {_ASCEND: _npu(78, 363, 4)},
    ("vllm-ascend", "0.23.0"): {_ASCEND: _npu(90, 611, 4)},
    # newer than TARGETS.md: lines from the releases themselves (0.23.0.post1, 0.27.1rc1, 0.30.0rc2: sdists only)
    ("vllm-ascend", "0.23.0.post1"): {_ASCEND: _npu(90, 611, 4)},
    ("vllm-ascend", "0.24.0rc1"): {_ASCEND: _npu(91, 597, 4)},
    ("vllm-ascend", "0.27.1rc1"): {_ASCEND: _npu(115, 649, 5)},  # + return None for Model Runner V2 under PP
    ("vllm-ascend", "0.30.0rc2"): {_ASCEND: _npu(123, 757, 5)},
    ("sglang", "0.4.4"): {_SGLANG: _runner(93, 933, 4)},
    ("sglang", "0.4.6"): {_SGLANG: _runner(106, 1019, 4)},
    ("sglang", "0.4.9"): {_SGLANG: _runner(153, 1460, 1)},
    ("sglang", "0.5.1"): {_SGLANG: _runner(162, 1738, 1)},
    ("sglang", "0.5.5"): {_SGLANG: _runner(240, 2133, 1)},
    ("sglang", "0.5.12"): {_SGLANG: _runner(329, 3293, 1)},
    ("sglang", "0.5.23"): {_SGLANG: _runner(344, 1813, 1)},
    ("verl", "0.2"): {_DP: _dp(153, 203), _MEG: _meg(334, 134), _CRITIC: _critic(143), _FSDP_WORKERS: _rm(1100)},
    ("verl", "0.3.0.post0"): {_DP: _dp(171, 229), _MEG: _meg(358, 142), _CRITIC: _critic(166), _FSDP_WORKERS: _rm(1127)},
    ("verl", "0.4.1"): {_DP: _dp(291, 376), _MEG: _meg(508, 152), _CRITIC: _critic(188), _FSDP_WORKERS: _rm(1423),
                        **_rollout("AsyncvLLMServer", replica=False)},
    ("verl", "0.5.0"): {_DP: _dp(291, 352), _MEG: _meg(601, 162), _CRITIC: _critic(190), _FSDP_WORKERS: _rm(1584),
                        **_rollout("AsyncvLLMServer", "AsyncSGLangServer", replica=False)},
    ("verl", "0.6.0"): {_DP: _dp(297, 359), _MEG: _meg(620, 168), _CRITIC: _critic(192), _FSDP_WORKERS: _rm(1836),
                        _BASE: _base(97), _FSDP: _fsdp(461)},
    ("verl", "0.6.1"): {
        _DP: _dp(310, 372), _MEG: _meg(655, 168), _CRITIC: _critic(192), _FSDP_WORKERS: _rm(1871),
        _BASE: _base(97), _FSDP: _fsdp(475), _MENG: _meng(387, 2, 571), **_rollout("vLLMHttpServer", "SGLangHttpServer"),
    },
    ("verl", "0.7.1"): {
        _DP: _dp(425, 509), _MEG: _meg(765, 202), _CRITIC: _critic(192), _FSDP_WORKERS: _rm(None),
        _BASE: _base(112), _FSDP: _fsdp(570), _MENG: _meng(530, 1, 729), _WORKERS: _workers(215),
        **_rollout("vLLMHttpServer", "SGLangHttpServer"),
    },
    ("verl", "0.8.0"): {_BASE: _base(112), _FSDP: _fsdp(617), _MENG: _meng(604, 1, 814), _WORKERS: _workers(234),
                        **_rollout("vLLMHttpServer", "SGLangHttpServer")},
    ("verl", "0.9.1"): {_BASE: _base(113), _FSDP: _fsdp(724), _MENG: _meng(834, 1, 1243), _WORKERS: _workers(243),
                        **_rollout("vLLMHttpServer", "SGLangHttpServer")},
    ("vllm", "0.9.2"): {_VLLM: _worker(41, 298, 2)},
    ("vllm", "0.11.0"): {_VLLM: _worker(47, 427, 4)},
    ("vllm", "0.15.0"): {_VLLM: _worker(69, 582, 2)},
    ("vllm", "0.33.0"): {_VLLM: _worker(198, 1334, 3)},
}

# Files the reference says a release does not ship.
REMOVED: Dict[Tuple[str, str], Tuple[str, ...]] = {
    ("vllm-ascend", "0.13.0"): (_ASCEND_V1,),
    ("vllm-ascend", "0.18.0"): (_ASCEND_V1,),
    ("vllm-ascend", "0.23.0"): (_ASCEND_V1,),
    ("vllm-ascend", "0.23.0.post1"): (_ASCEND_V1,),
    ("vllm-ascend", "0.24.0rc1"): (_ASCEND_V1,),
    ("vllm-ascend", "0.27.1rc1"): (_ASCEND_V1,),
    ("vllm-ascend", "0.30.0rc2"): (_ASCEND_V1,),
    ("verl", "0.4.1"): (_BASE, _WORKERS, _REPLICA),
    # 0.5.0 ships an earlier engine prototype (engine/base.py with an abstract
    # train_batch, fsdp/engine_impl.py), but not the engine files the recipes target.
    ("verl", "0.5.0"): (_FSDP, _MENG, _WORKERS, _REPLICA),
    ("verl", "0.6.1"): (_WORKERS,),
    ("verl", "0.8.0"): (_DP, _MEG, _CRITIC, _FSDP_WORKERS),
    ("verl", "0.9.1"): (_DP, _MEG, _CRITIC, _FSDP_WORKERS),
}

_IDS = ["%s-%s" % k for k in INVENTORY]


def test_inventory_covers_every_release():
    assert sorted(INVENTORY) == sorted((r.dist, r.version) for r in realwheels.RELEASES)
    for r in realwheels.RELEASES:
        assert sorted(INVENTORY[(r.dist, r.version)]) == sorted(r.files), r.spec
    for key, removed in REMOVED.items():
        assert key in INVENTORY and not set(removed) & set(INVENTORY[key]), key


def _walk_own(node: ast.AST) -> Iterator[ast.AST]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield child
        yield from _walk_own(child)


def _method(cls: ast.ClassDef, name: str) -> Optional[ast.FunctionDef]:
    found = [n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]
    assert len(found) <= 1, "%s.%s is defined %d times" % (cls.name, name, len(found))
    return found[0] if found else None


@pytest.mark.parametrize("dist,version", list(INVENTORY), ids=_IDS)
def test_release_targets(dist: str, version: str):
    root = realwheels.release_root(dist, version)
    assert len(list(root.glob("*.dist-info/METADATA"))) == 1
    meta = next(root.glob("*.dist-info/METADATA")).read_text(encoding="utf-8", errors="replace")
    assert "\nVersion: %s\n" % version in meta

    for relpath, classes in INVENTORY[(dist, version)].items():
        path = realwheels.target_path(dist, version, relpath)
        assert path.is_file(), relpath
        # importable layout: every package on the way has its __init__.py, the top level at least
        top_init = root / relpath.split("/")[0] / "__init__.py"
        assert top_init.is_file(), top_init
        src = path.read_bytes()
        tree = ast.parse(src, filename=relpath)
        for cls_name, methods in classes.items():
            found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls_name]
            assert len(found) == 1, "%s: top-level class %s found %d times" % (relpath, cls_name, len(found))
            cls = found[0]
            for meth, facts in methods.items():
                fn = _method(cls, meth)
                if facts == ABSENT:
                    assert fn is None, "%s: %s.%s should not exist" % (relpath, cls_name, meth)
                    continue
                assert fn is not None, "%s: %s.%s missing" % (relpath, cls_name, meth)
                # None of the targets is async or a generator (TARGETS.md).
                assert isinstance(fn, ast.FunctionDef)
                assert not any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in _walk_own(fn))
                if facts is None:
                    continue
                line, returns = facts  # type: ignore[misc]
                assert fn.lineno == line, "%s: %s.%s at line %d, TARGETS.md says %d" % (
                    relpath, cls_name, meth, fn.lineno, line)
                got = sum(isinstance(n, ast.Return) for n in _walk_own(fn))
                assert got == returns, "%s: %s.%s has %d returns, TARGETS.md says %d" % (
                    relpath, cls_name, meth, got, returns)
        # Injected names use these prefixes; they must not clash with anything already there.
        for marker in (b"_pk", b"patchkit", b"__PK"):
            assert marker not in src, (relpath, marker)


@pytest.mark.parametrize("dist,version", list(REMOVED), ids=["%s-%s" % k for k in REMOVED])
def test_removed_files_are_not_in_the_wheel(dist: str, version: str):
    shipped = set(realwheels.wheel_files(dist, version))
    assert len(shipped) > 10  # the RECORD really lists the wheel
    for relpath in REMOVED[(dist, version)]:
        assert relpath not in shipped, "%s==%s ships %s" % (dist, version, relpath)


def test_verl_from_0_8_has_no_actor_package():
    for version in ("0.8.0", "0.9.1"):
        shipped = realwheels.wheel_files("verl", version)
        assert not [p for p in shipped if p.startswith("verl/workers/actor/")], version
        assert not (realwheels.release_root("verl", version) / _DP).exists()
    for version in ("0.2", "0.3.0.post0", "0.4.1", "0.5.0", "0.6.0", "0.6.1", "0.7.1"):
        assert _DP in realwheels.wheel_files("verl", version)


SOURCE_ONLY = [(r.dist, r.version) for r in realwheels.RELEASES if r.sdist]


def test_the_table_marks_the_source_only_releases():
    assert SOURCE_ONLY == [("vllm-ascend", "0.7.3rc2"), ("vllm-ascend", "0.23.0.post1"), ("vllm-ascend", "0.27.1rc1"),
                           ("vllm-ascend", "0.30.0rc2")]


@pytest.mark.parametrize("dist,version", SOURCE_ONLY, ids=["%s-%s" % k for k in SOURCE_ONLY])
def test_a_source_only_release_looks_installed(dist: str, version: str):
    """The root of an sdist: a dist-info named and versioned from PKG-INFO, whose RECORD holds the package's
    files at their installed paths with the hashes of the files extracted."""
    root = realwheels.release_root(dist, version)
    (info,) = root.glob("*.dist-info")
    name = dist.replace("-", "_")
    assert info.name == "%s-%s.dist-info" % (name, version)
    assert (info / "METADATA").read_text() == "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version)
    rows = {row[0]: row[1:] for row in csv.reader((info / "RECORD").read_text().splitlines())}
    assert rows["%s/RECORD" % info.name] == ["", ""]
    assert all(p.startswith((name + "/", info.name + "/")) for p in rows)  # no setup.py, tests/, csrc/ ...
    for relpath in realwheels.release(dist, version).files + ("%s/__init__.py" % name,):
        data = (root / relpath).read_bytes()
        assert rows[relpath] == [realwheels._record_hash(data), str(len(data))], relpath


def _sdist(tmp_path, top, files):
    import io
    import tarfile

    path = tmp_path / (top + ".tar.gz")
    with tarfile.open(str(path), "w:gz") as tf:
        for name, text in files.items():
            data = text.encode()
            member = tarfile.TarInfo("%s/%s" % (top, name))
            member.size = len(data)
            tf.addfile(member, io.BytesIO(data))
    return path


@pytest.mark.parametrize("base", ["", "src/"])
def test_an_sdist_is_laid_out_as_its_install(tmp_path, base):
    """No registry: an sdist made here, flat or with src/, gives the targets, their packages' __init__.py, and a
    dist-info whose RECORD lists only the top-level packages' files."""
    files = {"PKG-INFO": "Metadata-Version: 2.4\nName: Demo.Pkg\nVersion: 1.2rc1\nSummary: x\n\nbody\n",
             "setup.py": "", base + "demo/__init__.py": "", base + "demo/a/__init__.py": "",
             base + "demo/a/b.py": "class B: pass\n", base + "demo/c.py": "", base + "extra/__init__.py": "",
             base + "demo_pkg.egg-info/top_level.txt": "demo\nextra\n", base + "tests/test_b.py": ""}
    rel = realwheels.Release("demo-pkg", "1.2rc1", ("demo/a/b.py",), sdist=True)
    out = tmp_path / "root"
    got = realwheels._extract_sdist(rel, _sdist(tmp_path, "demo_pkg-1.2rc1", files), out, ["demo/c.py", "demo/d.py"])
    assert got == ["demo/a/b.py", "demo/c.py", "demo/__init__.py", "demo/a/__init__.py",
                   "demo_pkg-1.2rc1.dist-info/METADATA", "demo_pkg-1.2rc1.dist-info/RECORD"]
    assert (out / "demo/a/b.py").read_text() == "class B: pass\n"
    record = [row[0] for row in csv.reader((out / "demo_pkg-1.2rc1.dist-info/RECORD").read_text().splitlines())]
    assert record == ["demo/__init__.py", "demo/a/__init__.py", "demo/a/b.py", "demo/c.py", "extra/__init__.py",
                      "demo_pkg-1.2rc1.dist-info/METADATA", "demo_pkg-1.2rc1.dist-info/RECORD"]
    with pytest.raises(realwheels.RealWheelError, match="PKG-INFO says Demo.Pkg 1.2rc1, not demo-pkg==1.2"):
        realwheels._extract_sdist(rel._replace(version="1.2"), _sdist(tmp_path, "x-1.2", files), tmp_path / "r2")

"""compiled: the compiled copy pip wrote (``__pycache__/NAME.cpython-3X.pyc``) is deleted by apply and put back by
revert, byte for byte, with its mode and owner, once the source's bytes are the original's again; and the source
gets its modification time back, so that Python takes the copy as valid.  Before: 707 of 708 files of a verl
install came back after apply and revert; pip's ``dp_actor.cpython-311.pyc`` did not."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from patchkit.core.errors import LedgerError
from patchkit.state import transaction
from patchkit.state.ledger import Ledger
from patchkit.recipe.load import load

from conftest import snapshot

DP = "verl/workers/actor/dp_actor.py"
R = "verl-fsdp-update"


@pytest.fixture
def installed(tree):
    """verl 0.6 as pip leaves it: the sources compiled by `python -m compileall` (what pip runs), the copy of
    dp_actor.py owned by another user (a root-owned site-packages a user imports from: she cannot write it)."""
    root = tree("verl-0.6")
    source = root / DP
    os.utime(source, ns=(1_600_000_000_123_456_789, 1_600_000_000_123_456_789))
    done = subprocess.run([sys.executable, "-m", "compileall", "-q", str(source)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    [pyc] = (source.parent / "__pycache__").glob("dp_actor.*.pyc")
    os.chmod(pyc, 0o640)
    if os.geteuid() == 0:
        os.chown(pyc, 4321, 4322)
    return root, source, pyc


def _valid_for(pyc, source) -> bool:
    """What Python checks of a timestamp-based copy before it uses it: the source's mtime and size."""
    data, st = pyc.read_bytes(), source.stat()
    return int.from_bytes(data[4:8], "little") == 0 and \
        int.from_bytes(data[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF and \
        int.from_bytes(data[12:16], "little") == st.st_size & 0xFFFFFFFF


def test_revert_puts_back_the_compiled_copy_apply_deleted(installed, patchkit_home):
    root, source, pyc = installed
    before, st = snapshot(root), pyc.stat()
    mtime = source.stat().st_mtime_ns
    assert _valid_for(pyc, source)
    transaction.apply(load(R), str(root))
    assert not pyc.exists()  # a patched source must never run the old code from its copy
    [record] = json.loads((patchkit_home / "ledger.json").read_text())["files"].values()
    assert [c["name"] for c in record["compiled"]["files"]] == [pyc.name]
    transaction.revert([R], root=str(root))
    assert snapshot(root) == before  # every file, the copy included (before: the copy was gone)
    now = pyc.stat()
    assert (now.st_mode, now.st_uid, now.st_gid) == (st.st_mode, st.st_uid, st.st_gid)
    assert source.stat().st_mtime_ns == mtime and _valid_for(pyc, source)
    assert not list((patchkit_home / "backups").iterdir())  # its backup goes with the record


def test_the_copy_comes_back_only_when_the_source_is_the_original_again(installed):
    root, source, pyc = installed
    original = pyc.read_bytes()
    transaction.apply(load(R), str(root))
    transaction.apply(load("verl-fsdp-logprob"), str(root))  # a second recipe in the same file
    transaction.revert([R], root=str(root))
    assert not pyc.exists()  # the source still holds the other recipe's lines
    transaction.revert(["verl-fsdp-logprob"], root=str(root))
    assert pyc.read_bytes() == original


def test_a_backup_that_is_not_its_bytes_is_not_written(installed, patchkit_home):
    root, source, pyc = installed
    original = source.read_bytes()
    transaction.apply(load(R), str(root))
    [record] = json.loads((patchkit_home / "ledger.json").read_text())["files"].values()
    backup = patchkit_home / "backups" / record["compiled"]["files"][0]["sha256"]
    backup.write_bytes(b"not the copy")
    transaction.revert([R], root=str(root))
    assert source.read_bytes() == original and not pyc.exists()


@pytest.mark.parametrize("name", ["../../../etc/cron.d/x.pyc", "other.cpython-311.pyc", "dp_actor.py",
                                  "dp_actor.cpython-311.pyc/x.pyc"])
def test_a_ledger_naming_a_copy_elsewhere_is_refused_before_anything_is_written(installed, patchkit_home, name):
    """The ledger is read as a stranger's input: a copy is a name of that source's in its __pycache__."""
    root, source, pyc = installed
    transaction.apply(load(R), str(root))
    path = patchkit_home / "ledger.json"
    data = json.loads(path.read_text())
    [record] = data["files"].values()
    record["compiled"]["files"][0]["name"] = name
    path.write_text(json.dumps(data))
    patched = snapshot(root)
    with pytest.raises(LedgerError) as info:
        transaction.revert([R], root=str(root))
    assert "compiled.files[0].name" in str(info.value)
    assert snapshot(root) == patched


def test_a_file_with_no_copy_keeps_a_record_as_before(tree, patchkit_home):
    root = tree("verl-0.6")
    transaction.apply(load(R), str(root))
    [record] = json.loads((patchkit_home / "ledger.json").read_text())["files"].values()
    assert "compiled" not in record  # an older patchkit reads it as it always did
    assert Ledger().load().files[str((root / DP).resolve())].compiled is None

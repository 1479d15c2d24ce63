"""Patched under one PATCHKIT_HOME, looked at under another: `status` and `revert` work from the files alone.

Every line patchkit inserts ends with ``  # patchkit:<recipe-id>`` and patchkit
only inserts, so a file patched under another home (sudo, another user, a
container, a lost home folder) still says what was done, and taking the
marked lines out gives the original bytes back.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import patchkit
from patchkit.cli.commands import main
from patchkit.core.errors import LedgerError
from patchkit.state.ledger import Ledger

import realwheels
from conftest import snapshot

DP = "verl/workers/actor/dp_actor.py"
MEGATRON = "verl/workers/actor/megatron_actor.py"
NO_RECORD = "applied (no record)"


def elsewhere(tmp_path: Path) -> Ledger:
    """The ledger of another PATCHKIT_HOME (the test's own one stays empty)."""
    return Ledger(tmp_path / "other-home")


def cli(*args: str, code: int = 0):
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return result


def test_status_reports_the_lines_no_record_explains(tree, tmp_path):
    root = tree("verl-0.6")
    other = elsewhere(tmp_path)
    patchkit.apply(patchkit.load("verl-fsdp-update"), str(root), ledger=other)
    patchkit.apply(patchkit.load("verl-fsdp-logprob", ["role=ref"]), str(root), ledger=other)
    patchkit.apply(patchkit.load("verl-megatron-update"), str(root), ledger=other)

    rows = patchkit.status(root=str(root))
    assert [(r.state, r.path, r.recipes, r.backup_ok) for r in rows] == [
        (NO_RECORD, str((root / DP).resolve()), ("verl-fsdp-logprob", "verl-fsdp-update"), None),
        (NO_RECORD, str((root / MEGATRON).resolve()), ("verl-megatron-update",), None)]
    assert patchkit.status() == []  # verl is not installed in this environment, and no --root: nothing to look at

    out = cli("status", "--root", str(root)).stdout
    assert f"{NO_RECORD}  verl-fsdp-logprob, verl-fsdp-update  {(root / DP).resolve()}  (verl 0.6.1)" in out
    assert "revert takes the marked lines out, without a backup" in out
    data = json.loads(cli("status", "--json", "--root", str(root)).stdout)
    assert set(data) == {"home", "files"}
    first = data["files"][0]
    assert set(first) == {"path", "relpath", "root", "state", "backup", "distribution", "version", "recipes"}
    assert (first["state"], first["backup"], first["relpath"], first["root"], first["version"]) == (
        NO_RECORD, None, DP, str(root.resolve()), "0.6.1")
    assert first["recipes"] == {rid: {"choices": None, "overrides": None, "backend": None, "git": None}
                                for rid in ("verl-fsdp-update", "verl-fsdp-logprob")}
    assert cli("status").stdout == "nothing applied\n"


def test_patchkit_root_and_this_environment_are_looked_at_without_importing(tree, tmp_path, monkeypatch):
    root = tree("verl-0.6")
    patchkit.apply(patchkit.load("verl-fsdp-update"), str(root), ledger=elsewhere(tmp_path))
    monkeypatch.setenv("PATCHKIT_ROOT", str(root))
    assert [r.recipes for r in patchkit.status()] == [("verl-fsdp-update",)]
    monkeypatch.delenv("PATCHKIT_ROOT")
    (root / "verl" / "__init__.py").write_text("raise RuntimeError('imported!')\n")
    monkeypatch.syspath_prepend(str(root))
    assert [(r.state, r.recipes) for r in patchkit.status()] == [(NO_RECORD, ("verl-fsdp-update",))]
    assert "verl" not in sys.modules


def test_status_root_that_is_not_a_folder_is_an_error_and_an_empty_one_has_nothing(tmp_path):
    result = cli("status", "--root", str(tmp_path / "nope"), code=1)
    assert f"--root {tmp_path / 'nope'} is not a directory" in result.stderr and "hint:" in result.stderr
    assert cli("status", "--root", str(tmp_path)).stdout == "nothing applied\n"


def test_status_root_limits_the_records_to_that_folder(tree, tmp_path):
    one, two = tree("verl-0.6"), tmp_path / "two"
    shutil.copytree(one, two)
    patchkit.apply(patchkit.load("verl-fsdp-update"), str(one))
    patchkit.apply(patchkit.load("verl-fsdp-update"), str(two))
    assert len(patchkit.status()) == 2
    assert [(r.state, r.path) for r in patchkit.status(root=str(two))] == [("applied", str((two / DP).resolve()))]


def test_revert_without_a_record_takes_the_marked_lines_out_one_recipe_or_all(tree, tmp_path):
    root = tree("verl-0.6")
    original = snapshot(root)
    other = elsewhere(tmp_path)
    patchkit.apply(patchkit.load("verl-fsdp-update"), str(root), ledger=other)
    only_update = snapshot(root)
    patchkit.apply(patchkit.load("verl-fsdp-logprob"), str(root), ledger=other)
    patchkit.apply(patchkit.load("verl-megatron-update"), str(root), ledger=other)
    (root / DP).chmod(0o640)

    [outcome] = patchkit.revert(["verl-fsdp-logprob"], root=str(root))
    assert outcome.state == "reverted without a backup (no record; marked lines taken out)"
    assert (outcome.path, outcome.detail) == ((root / DP).resolve(), "verl-fsdp-logprob")
    assert snapshot(root)[DP] == only_update[DP]
    assert (root / DP).stat().st_mode & 0o777 == 0o640

    result = cli("revert", "--all", "--root", str(root))
    assert f"reverted without a backup (no record; marked lines taken out): {(root / DP).resolve()} " \
           "(verl-fsdp-update)" in result.stderr
    assert "2 file(s) handled" in result.stderr
    assert snapshot(root) == original
    assert not (Path(os.environ["PATCHKIT_HOME"]) / "ledger.json").read_text().count("verl")  # nothing recorded here
    assert cli("status", "--root", str(root)).stdout == "nothing applied\n"


def test_revert_of_a_recipe_applied_nowhere_still_says_so(tree, tmp_path):
    root = tree("verl-0.6")
    patchkit.apply(patchkit.load("verl-fsdp-update"), str(root), ledger=elsewhere(tmp_path))
    with pytest.raises(LedgerError, match="nothing to revert: verl-megatron-update is not applied"):
        patchkit.revert(["verl-megatron-update"], root=str(root))


def test_a_hand_edited_line_is_refused_by_its_line_on_disk_unless_forced(tree, tmp_path):
    root = tree("verl-0.6")
    original = (root / DP).read_text()
    patchkit.apply(patchkit.load("verl-fsdp-update"), str(root), ledger=elsewhere(tmp_path))
    lines = (root / DP).read_text().splitlines(keepends=True)
    number = next(n for n, ln in enumerate(lines, 1) if '_patchkit_runtime.step("verl-fsdp-update")' in ln)
    lines[number - 1] = lines[number - 1].replace("  # patchkit:verl-fsdp-update", "  # mine now")
    edited = "".join(lines)
    (root / DP).write_text(edited)
    result = cli("revert", "--all", "--root", str(root), code=1)
    assert f"{(root / DP).resolve()}:{number}: line {number} still refers to patchkit" in result.stderr
    assert "--force" in result.stderr
    assert (root / DP).read_text() == edited
    cli("revert", "--all", "--root", str(root), "--force")
    kept = [ln for ln in (root / DP).read_text().splitlines() if "patchkit" in ln]
    assert kept == [lines[number - 1].rstrip("\n")]  # only the line that is no longer patchkit's stays
    assert [ln for ln in (root / DP).read_text().splitlines() if "patchkit" not in ln] == original.splitlines()


def test_a_result_that_would_not_compile_is_refused_and_nothing_written(tree, tmp_path):
    root = tree("verl-0.6")
    patchkit.apply(patchkit.load("verl-fsdp-update"), str(root), ledger=elsewhere(tmp_path))
    lines = (root / DP).read_text().splitlines(keepends=True)
    i = next(i for i, ln in enumerate(lines) if '_patchkit_runtime.step("verl-fsdp-update")' in ln)
    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    lines[i:i] = [f"{indent}if self.config.debug:  # a hand edit around patchkit's line\n"]  # its body is patchkit's
    lines[i + 1] = "    " + lines[i + 1]
    (root / DP).write_text("".join(lines))
    before = snapshot(root)
    with pytest.raises(LedgerError) as info:
        patchkit.revert([], everything=True, root=str(root))
    assert "leaves a file Python cannot compile" in info.value.message
    assert info.value.where.path == str((root / DP).resolve())
    assert info.value.where.line == i + 3  # the first line after the empty `if`, counted in the file on disk
    assert snapshot(root) == before


def test_a_file_with_a_record_here_and_lines_from_another_home(tree, tmp_path, patchkit_home):
    root = tree("verl-0.6")
    original = snapshot(root)
    patchkit.apply(patchkit.load("verl-fsdp-update"), str(root), ledger=elsewhere(tmp_path))
    patchkit.apply(patchkit.load("verl-fsdp-logprob"), str(root))
    assert [(r.state, r.recipes) for r in patchkit.status(root=str(root))] == [
        ("applied", ("verl-fsdp-logprob",)), (NO_RECORD, ("verl-fsdp-update",))]
    shutil.rmtree(patchkit_home / "backups")  # so the marked lines are what has to go, both kinds
    outcomes = patchkit.revert([], everything=True, root=str(root))
    assert [o.state for o in outcomes] == ["reverted (backup missing: marked lines taken out)",
                                           "reverted without a backup (no record; marked lines taken out)"]
    assert snapshot(root) == original
    assert patchkit.status(root=str(root)) == []


def test_status_looking_for_unrecorded_lines_stays_cheap(tree, tmp_path):
    root = tree("verl-0.6")
    patchkit.apply(patchkit.load("verl-fsdp-update"), str(root), ledger=elsewhere(tmp_path))
    code = ("import sys; from click.testing import CliRunner; from patchkit.cli.commands import main; "
            f"r = CliRunner().invoke(main, ['status', '--root', {str(root)!r}]); "
            "assert r.exit_code == 0 and 'no record' in r.output, r.output; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'libcst', 'git', 'torch', 'verl'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ.copy())
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def _patchkit(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PATCHKIT_ROOT"}
    env["PATCHKIT_HOME"] = str(home)
    result = subprocess.run([sys.executable, "-m", "patchkit", *args], env=env, capture_output=True, text=True,
                            timeout=120)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def test_applied_under_one_home_inspected_and_reverted_under_another(tmp_path):
    """The issue's scenario with real processes on a real verl 0.6.1 wheel: apply with PATCHKIT_HOME=A, then
    status and revert with PATCHKIT_HOME=B, which has never heard of the patch."""
    root = tmp_path / "site-packages"
    shutil.copytree(realwheels.release_root("verl", "0.6.1"), root)
    original = snapshot(root)
    home_a, home_b = tmp_path / "A", tmp_path / "B"
    for recipe in (["verl-fsdp-update"], ["verl-megatron-update"], ["verl-engine-update", "granularity=micro"]):
        applied = _patchkit(home_a, "apply", *recipe, "--root", str(root))
        assert applied.returncode == 0, applied.stderr
    patched = {rel for rel, data in snapshot(root).items() if data != original[rel]}
    assert len(patched) == 3  # dp_actor, megatron_actor, and the engine file named by the micro points alone

    before = _patchkit(home_b, "status", "--root", str(root))
    assert before.returncode == 0, before.stderr
    assert "nothing applied" not in before.stdout
    for rel in patched:
        [line] = [ln for ln in before.stdout.splitlines() if str(root / rel) in ln]
        assert line.startswith(NO_RECORD) and "(verl 0.6.1)" in line and "without a backup" in line
    data = json.loads(_patchkit(home_b, "status", "--json", "--root", str(root)).stdout)
    assert {f["relpath"]: (f["state"], f["backup"]) for f in data["files"]} == {rel: (NO_RECORD, None) for rel in patched}
    assert set(data["files"][0]["recipes"]) <= {"verl-fsdp-update", "verl-megatron-update", "verl-engine-update"}
    assert data["home"] == str(home_b)

    reverted = _patchkit(home_b, "revert", "--all", "--root", str(root))
    assert reverted.returncode == 0, reverted.stderr
    assert reverted.stderr.count("reverted without a backup (no record; marked lines taken out)") == len(patched)
    assert snapshot(root) == original  # byte for byte
    assert _patchkit(home_b, "status", "--root", str(root)).stdout == "nothing applied\n"
    after_a = json.loads(_patchkit(home_a, "status", "--json").stdout)["files"]
    assert {f["state"] for f in after_a} == {"reverted outside patchkit"}


def test_a_file_that_does_not_decode_is_listed_and_revert_says_why(tree, tmp_path):
    root = tree("verl-0.6")
    patchkit.apply(patchkit.load("verl-fsdp-update"), str(root), ledger=elsewhere(tmp_path))
    broken = b"# -*- coding: no-such-codec -*-\n" + (root / DP).read_bytes()
    (root / DP).write_bytes(broken)
    assert [r.recipes for r in patchkit.status(root=str(root))] == [("verl-fsdp-update",)]
    result = cli("revert", "--all", "--root", str(root), code=1)
    assert f"{(root / DP).resolve()}: cannot decode the file" in result.stderr and "hint:" in result.stderr
    assert (root / DP).read_bytes() == broken


# ---------------------------------------------------------------- a marked line patchkit did not write


def _with_my_line(root):
    """The user's own line, ending in a marker, in a built-in recipe's file: apply refuses to touch it."""
    path = root / DP
    text = path.read_text()
    mine = "import math as mymath  # patchkit:mine"
    path.write_text(text.replace("\n\nclass ", f"\n{mine}\n\nclass ", 1))
    number = path.read_text().splitlines().index(mine) + 1
    return path, number


def test_revert_all_keeps_a_users_marked_line_apply_refused_and_says_where(tree, tmp_path):
    root = tree("verl-0.6")
    path, number = _with_my_line(root)
    before = snapshot(root)
    refused = cli("apply", "verl-fsdp-update", "--root", str(root), code=1)
    assert f"{path.resolve()}:{number}:" in refused.stderr and "did not write it" in refused.stderr
    result = cli("revert", "--all", "--root", str(root))
    assert snapshot(root) == before  # the line the job needs is still there
    assert f"{path.resolve()}:{number}: kept: it ends in `# patchkit:mine`, but patchkit did not write it" \
        in result.stderr
    assert "change the comment (e.g. to `# patchkit mine`)" in result.stderr
    assert patchkit.status(root=str(root)) == []  # no recipe is applied there


def test_reverting_a_recipe_whose_only_marked_lines_are_the_users_is_an_error_naming_them(tree, tmp_path):
    root = tree("verl-0.6")
    path, number = _with_my_line(root)
    before = snapshot(root)
    result = cli("revert", "mine", "--root", str(root), code=1)
    assert f"error: {path.resolve()}:{number}:" in result.stderr and "nothing to revert: mine" in result.stderr
    assert "hint: " in result.stderr and snapshot(root) == before


def test_lines_from_another_home_come_out_around_a_users_marked_line(tree, tmp_path):
    root = tree("verl-0.6")
    patchkit.apply(patchkit.load("verl-fsdp-update"), str(root), ledger=elsewhere(tmp_path))
    path = root / DP
    text = path.read_text()
    mine = "USER_FLAG = 1  # patchkit:verl-fsdp-update"
    anchor = "        metrics = {}\n"
    assert text.count(anchor) == 1
    path.write_text(text.replace(anchor, f"        {mine}\n" + anchor))
    [o] = patchkit.revert([], everything=True, root=str(root))
    assert o.state == "reverted without a backup (no record; marked lines taken out)"
    left = path.read_text().splitlines()
    assert [ln.strip() for ln in left if "patchkit" in ln] == [mine]
    assert o.foreign == ((left.index(f"        {mine}") + 1, "verl-fsdp-update"),)

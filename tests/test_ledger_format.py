"""The ledger's fields are checked before anything in it is believed: each damage is one located error, exit 1."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from patchkit.cli.commands import main

GOOD_RECORD = {
    "path": "/site/verl/x.py", "relpath": "verl/x.py", "root": "/site", "distribution": "verl", "version": "0.6.1",
    "original_sha256": "a" * 64, "patched_sha256": "b" * 64,
    "recipes": {"verl-fsdp-update": {"choices": {"granularity": "mini"}, "overrides": [], "backend": "npu",
                                     "recipe_path": "/r.yaml", "applied_at": 1.5, "git": None}},
}


def ledger(**changes):
    record = json.loads(json.dumps(GOOD_RECORD))
    data = {"format": 1, "files": {record["path"]: record}}
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        place = data
        for name in parents:
            place = place[record["path"]] if name == "R" else place[name]
        place[last] = value
    return json.dumps(data).encode()


def status(home, raw: bytes):
    (home / "ledger.json").write_bytes(raw)
    return CliRunner().invoke(main, ["status"])


def test_a_good_ledger_is_read(patchkit_home):
    result = status(patchkit_home, ledger())
    assert result.exit_code == 0 and "/site/verl/x.py" in result.stdout


@pytest.mark.parametrize("raw,said", [
    (ledger(files__R__path=None), "files['/site/verl/x.py'].path must be an absolute path, not null"),
    (ledger(files__R__path="relative/x.py"), "must be an absolute path"),
    (ledger(pending="garbage"), "pending must be an object, not \"garbage\""),
    (ledger(pending={"files": [{"path": "/x", "old": "zz", "new": "b" * 64}]}), "pending.files[0].old must be a sha256"),
    (ledger(files__R__original_sha256="../../etc/passwd"), "original_sha256 must be a sha256"),
    (ledger(files__R__recipes=[]), "recipes must be an object"),
    (ledger(files__R__relpath=7), "relpath must be a string, not 7"),
    (ledger(files__R__surprise=1), "has fields patchkit does not write: surprise"),
    (ledger(format=2), "format is 2: a newer patchkit wrote it"),
    (ledger(format="1"), "format must be a whole number"),
    (ledger(files=[]), "files must be an object"),
    (b'{"format": 1, "files": {}, "pending": NaN}', "NaN is not a number JSON allows"),
    (b"\xff\xfe not utf-8", "the ledger is not UTF-8 text"),
    (b"[" * 200_000 + b"]" * 200_000, "the ledger is not readable JSON"),
    (b"{not json", "the ledger is not readable JSON"),
    (b"[]", "the ledger must be an object, not list"),
])
def test_a_damaged_ledger_is_a_located_error(patchkit_home, raw, said):
    result = status(patchkit_home, raw)
    assert result.exit_code == 1, result.output
    assert f"{patchkit_home / 'ledger.json'}: " in result.stderr and said in result.stderr
    assert "hint: move the file aside" in result.stderr and "Traceback" not in result.output
    assert (patchkit_home / "ledger.json").read_bytes() == raw  # left for the user to look at


def test_a_record_whose_key_is_not_its_path_is_refused(patchkit_home):
    data = json.loads(ledger())
    data["files"]["/elsewhere.py"] = data["files"].pop("/site/verl/x.py")
    result = status(patchkit_home, json.dumps(data).encode())
    assert result.exit_code == 1 and "must be the record's own key" in result.stderr

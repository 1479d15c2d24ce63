"""runtime.attach.boot: the lines a job runs are a real module, sent as text: ASCII, and each refusal said in the
channel and on one stderr line, the request never run unless it is private and its sha256 is the one sent."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from patchkit.attach import inject
from patchkit.attach.payload import Folder
from patchkit.runtime.attach import boot


def test_the_text_sent_is_the_module_s_own_and_ascii():
    text = inject.boot_text()
    assert text == open(boot.__file__, encoding="ascii").read()
    compile(inject.bootstrap(Folder("/b", "/b/out", "/b/request-x.json", "0" * 64, "x"), "/install"), "<boot>", "exec")


def test_a_withdrawn_request_is_said_refused_and_nothing_runs(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    boot._attach(str(tmp_path / "gone.json"), "0" * 64, "", 1 << 20, str(out))
    said = json.loads((out / "status.json").read_text())
    assert said["state"] == "refused" and "withdrawn" in said["error"]
    assert capsys.readouterr().err.startswith("[patchkit] attach: the request was withdrawn")


@pytest.mark.parametrize("spoil", ["digest", "mode"])
def test_a_request_that_is_not_the_one_written_is_never_run(tmp_path, spoil):
    request = tmp_path / "request.json"
    data = json.dumps({"not": "run"}).encode()
    request.write_bytes(data)
    os.chmod(request, 0o600)
    digest = hashlib.sha256(data).hexdigest()
    if spoil == "digest":
        digest = "1" * 64
    else:
        os.chmod(request, 0o666)
    with pytest.raises(PermissionError):
        boot._attach(str(request), digest, "", 1 << 20, str(tmp_path))


def test_a_link_in_the_request_s_place_is_never_followed(tmp_path):
    (tmp_path / "real.json").write_text("{}")
    (tmp_path / "request.json").symlink_to(tmp_path / "real.json")
    out = tmp_path / "out"
    out.mkdir()
    boot._attach(str(tmp_path / "request.json"), hashlib.sha256(b"{}").hexdigest(), "", 1 << 20, str(out))
    assert json.loads((out / "status.json").read_text())["state"] == "refused"  # as withdrawn: nothing read

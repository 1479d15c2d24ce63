"""`patchkit collect` against hostile manifests, traces and DESTs: it never leaves DEST or the capture's folder.

Each test builds a save folder by hand, as another user of a shared outputs
folder could: manifests naming ``../../../x`` or ``/etc/passwd``, symbolic
links to a secret file, names with escape sequences or 100,000 characters,
and links planted in DEST.  Each checks that nothing appeared or changed
outside DEST (a listing of the whole test folder before and after) and that
the secret's bytes are nowhere in DEST.
"""

from __future__ import annotations

import json
import os

import pytest

from patchkit.traces import collect
from patchkit.traces import journal
from patchkit.core import manifest
from patchkit.traces.captures import CaptureError, Trace, find
from patchkit.core.manifest import safe_name

from capturing import cli

SECRET = b'{"secret": "only root may read this 7f3a9c"}'  # ends in "}": it passes as a whole JSON trace
TRACE = b'{"traceEvents": [], "distributedInfo": {"rank": 0}}'
GOOD = "host_1.100.pt.trace.json"


def write_manifest(folder, name, traces, recipe="verl-fsdp-update", role="", rank=0):
    """A patchkit manifest in ``folder`` naming ``traces`` [(name, kind, size)] as the runtime would."""
    (folder / manifest.FOLDER).mkdir(parents=True, exist_ok=True)
    record = {"format": manifest.FORMAT, "kind": manifest.KIND, "recipe": recipe, "key": recipe, "role": role,
              "backend": "torch", "rank": rank, "host": "host", "pid": 1, "steps": {"first": 1, "last": 2, "count": 2},
              "traces": [{"name": n, "kind": k, "size": s, "files": 1} for n, k, s in traces]}
    path = folder / manifest.FOLDER / f"{name}.json"
    path.write_text(json.dumps(record))
    return path


@pytest.fixture
def shared(tmp_path):
    """(save folder with one good capture, the secret file beside it, DEST): all under tmp_path."""
    secret = tmp_path / "secret.txt"
    secret.write_bytes(SECRET)
    out = tmp_path / "shared" / "outputs"
    out.mkdir(parents=True)
    (out / GOOD).write_bytes(TRACE)
    write_manifest(out, "good", [(GOOD, "file", len(TRACE))])
    return out, secret, tmp_path / "dest"


def outside(root, dest):
    """Every path under ``root`` but not under ``dest``, with its kind and (for a file) bytes; links not followed."""
    seen = {}
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(top, name)
            if path == str(dest) or path.startswith(str(dest) + os.sep):
                continue
            seen[path] = os.readlink(path) if os.path.islink(path) else \
                (open(path, "rb").read() if os.path.isfile(path) else "folder")
    return seen


def in_dest(dest):
    """Every name under DEST and the bytes of its regular files (links are listed, never read)."""
    files, links = {}, []
    for top, dirs, names in os.walk(dest):
        for name in dirs + names:
            path = os.path.join(top, name)
            if os.path.islink(path):
                links.append(path)
            elif os.path.isfile(path):
                files[path] = open(path, "rb").read()
    return files, links


def assert_contained(tmp_path, dest, before):
    assert outside(tmp_path, dest) == before, "something outside DEST was written or changed"
    files, links = in_dest(dest)
    assert not links and not any(SECRET in data or b"only root may read" in data for data in files.values())
    with open("/etc/passwd", "rb") as handle:
        first = handle.readline().strip()
    assert not any(first and first in data for data in files.values())


def good_copy(dest):
    return dest / "verl-fsdp-update" / f"rank0_{GOOD}"


# ---------------------------------------------------------------- names from manifests


def test_a_recipe_or_role_that_climbs_out_names_a_folder_inside_dest(shared, tmp_path):
    out, _secret, dest = shared
    (out / "host_3.1.pt.trace.json").write_bytes(TRACE)
    write_manifest(out, "climb", [("host_3.1.pt.trace.json", "file", len(TRACE))], recipe="../../../x",
                   role="../../../x", rank=3)
    before = outside(tmp_path, dest)
    result = cli("collect", dest, out)
    assert_contained(tmp_path, dest, before)
    groups = sorted(p.name for p in dest.iterdir())
    assert groups == [journal.JOURNAL, "______x______x", "verl-fsdp-update"]
    assert (dest / "______x______x" / "rank3_host_3.1.pt.trace.json").read_bytes() == TRACE
    assert "-> " + str(dest / "______x______x" / "rank3_host_3.1.pt.trace.json") in result.stdout


@pytest.mark.parametrize("name", ["../" * 40 + "etc/passwd", "SECRET", "../../secret.txt", "sub/../../../secret.txt"])
def test_a_trace_outside_the_capture_folder_is_refused_and_never_read(shared, tmp_path, name):
    out, secret, dest = shared
    name = str(secret) if name == "SECRET" else name
    size = os.path.getsize(os.path.normpath(os.path.join(out, name)))
    bad = write_manifest(out, "bad", [(name, "file", size)], rank=1)
    before = outside(tmp_path, dest)
    result = cli("collect", dest, out, code=1)
    assert f"error: {bad}: the trace " in result.stderr and "outside the capture's folder" in result.stderr
    assert "--skip-broken" in result.stderr and "nothing was copied" in result.stderr
    assert not dest.exists() and outside(tmp_path, dest) == before

    result = cli("collect", dest, out, "--skip-broken")
    assert f"skipped (--skip-broken): {bad}: the trace " in result.stderr
    assert good_copy(dest).read_bytes() == TRACE
    assert_contained(tmp_path, dest, before)
    assert "rank1" not in " ".join(p.name for p in (dest / "verl-fsdp-update").iterdir())


def test_a_symbolic_link_inside_an_ascend_folder_is_never_followed(shared, tmp_path):
    out, secret, dest = shared
    npu = out / "host_2_1700000000_ascend_pt"
    (npu / "FRAMEWORK").mkdir(parents=True)
    (npu / "profiler_info_0.json").write_text("{}")
    (npu / "FRAMEWORK" / "leak.txt").symlink_to(secret)
    before = outside(tmp_path, dest)
    result = cli("collect", dest, out, code=1)
    assert f"error: {npu / 'FRAMEWORK' / 'leak.txt'} is a symbolic link or a special file: never followed" in \
        result.stderr
    assert not dest.exists()

    result = cli("collect", dest, out, "--skip-broken")
    assert f"skipped (--skip-broken): {npu / 'FRAMEWORK' / 'leak.txt'} is a symbolic link" in result.stderr
    assert not (dest / "outputs").exists()  # the capture was left out whole
    assert_contained(tmp_path, dest, before)


def test_a_linked_folder_inside_an_ascend_folder_a_manifest_names_is_not_walked(shared, tmp_path):
    out, secret, dest = shared
    npu = out / "host_3_1700000000_ascend_pt"
    npu.mkdir()
    (npu / "profiler_info_0.json").write_text("{}")
    (npu / "up").symlink_to(tmp_path)  # holds secret.txt
    bad = write_manifest(out, "npu", [(npu.name, "folder", 2)], rank=2)
    before = outside(tmp_path, dest)
    result = cli("collect", dest, out, "--skip-broken")
    assert f"skipped (--skip-broken): {npu / 'up'} is a symbolic link" in result.stderr
    assert bad.exists() and good_copy(dest).exists()
    assert_contained(tmp_path, dest, before)


@pytest.mark.parametrize("named", [False, True])
def test_a_symbolic_link_as_the_trace_is_refused(shared, tmp_path, named):
    out, secret, dest = shared
    link = out / "host_9.999.pt.trace.json"
    link.symlink_to(secret)
    size = os.lstat(link).st_size  # what a hostile manifest records, so that only the link gives it away
    bad = write_manifest(out, "link", [(link.name, "file", size)], rank=4) if named else None
    before = outside(tmp_path, dest)
    result = cli("collect", dest, out, code=1)
    where = f"{bad}: the trace {link}" if named else f"{link}"
    assert f"error: {where} is a symbolic link: never followed" in result.stderr and not dest.exists()
    cli("collect", dest, out, "--skip-broken")
    assert_contained(tmp_path, dest, before)


def test_a_linked_ascend_folder_and_a_linked_manifest_are_refused(shared, tmp_path):
    out, _secret, dest = shared
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "x_ascend_pt").mkdir(parents=True)
    (elsewhere / "x_ascend_pt" / "profiler_info_0.json").write_text("{}")
    (out / "host_4_1_ascend_pt").symlink_to(elsewhere / "x_ascend_pt")
    (out / "host_5.1.pt.trace.json").write_bytes(TRACE)
    planted = write_manifest(elsewhere, "m", [("host_5.1.pt.trace.json", "file", len(TRACE))], rank=5)
    (out / manifest.FOLDER / "planted.json").symlink_to(planted)
    before = outside(tmp_path, dest)
    result = cli("collect", dest, out, "--skip-broken")
    assert f"{out / 'host_4_1_ascend_pt'} is a symbolic link: never followed" in result.stderr
    assert f"{out / manifest.FOLDER / 'planted.json'}: the manifest is a symbolic link" in result.stderr
    assert sorted(p.name for p in (dest / "verl-fsdp-update").glob("*.json")) == [f"rank0_{GOOD}"]
    # the linked manifest is never read, not even for the traces it claims: its trace is one found without a
    # manifest, named by what its own first bytes say (rank 0), not by the manifest's recipe and rank 5
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*host_5.1*.pt.trace.json")) == \
        ["outputs/rank0_host_5.1.pt.trace.json"]
    assert_contained(tmp_path, dest, before)


def test_names_with_escape_sequences_and_newlines_become_plain_names(shared, tmp_path):
    out, _secret, dest = shared
    name = "host\x1b]0;pwned\x07\n_7.1.pt.trace.json"
    (out / name).write_bytes(TRACE)
    write_manifest(out, "esc", [(name, "file", len(TRACE))], recipe="r\x1b[31m\rrank 0:", role="a\nb", rank=6)
    before = outside(tmp_path, dest)
    result = cli("collect", dest, out)
    group = dest / "r__31m_rank_0_.a_b"
    assert (group / "rank6_host__0_pwned___7.1.pt.trace.json").read_bytes() == TRACE
    for text in (result.stdout, result.stderr):
        assert "\x1b" not in text and "\x07" not in text and "\r" not in text
    assert "\\x1b]0;pwned\\x07\\x0a_7.1.pt.trace.json ->" in result.stdout
    assert_contained(tmp_path, dest, before)


def test_names_of_100k_characters_are_bounded(shared, tmp_path):
    out, _secret, dest = shared
    write_manifest(out, "long", [(GOOD, "file", len(TRACE))], recipe="r" * 100_000, role="x" * 100_000, rank=8)
    before = outside(tmp_path, dest)
    result = cli("collect", dest, out)
    [group] = [p for p in dest.iterdir() if p.name.startswith("rrr")]
    assert len(group.name) == 200 and (group / f"rank8_{GOOD}").read_bytes() == TRACE
    assert max(len(line) for line in result.stdout.splitlines()) < 2000
    assert_contained(tmp_path, dest, before)

    write_manifest(out, "long-trace", [("t" * 100_000 + ".pt.trace.json", "file", 10)], rank=9)
    result = cli("collect", dest, out, code=1)  # a name no file system holds: a missing trace, not a traceback
    assert "the trace is missing" in result.stderr and len(result.stderr) < 5000


def test_a_manifest_too_big_to_be_one_patchkit_wrote_is_refused_and_its_data_dropped(shared, tmp_path):
    out, _secret, dest = shared
    (out / "host_6.1.pt.trace.json").write_bytes(TRACE)
    big = write_manifest(out, "big", [("host_6.1.pt.trace.json", "file", len(TRACE))], rank=6)
    big.write_text(big.read_text()[:-1] + ', "padding": "' + "p" * manifest.LIMIT + '"}')
    before = outside(tmp_path, dest)
    result = cli("collect", dest, out, "--skip-broken")
    assert f"skipped (--skip-broken): {big}: more than 4 MiB" in result.stderr and good_copy(dest).exists()
    assert [p.relative_to(dest).as_posix() for p in dest.rglob("*host_6*.pt.trace.json")] == \
        ["outputs/rank0_host_6.1.pt.trace.json"]  # as a trace found without a manifest: none of the big one's data
    assert_contained(tmp_path, dest, before)
    [refused] = [c for c in collect.confine(find([str(out)])) if c.manifest == str(big)]
    assert refused.problem and refused.data is None  # over Ray: not sent back to the driver


# ---------------------------------------------------------------- links planted in DEST


def test_a_link_planted_in_dest_is_never_written_through(shared, tmp_path):
    out, _secret, dest = shared
    cli("collect", dest, out)
    group = dest / "verl-fsdp-update"
    target = tmp_path / "target"
    target.mkdir()
    good_copy(dest).unlink()
    (group / "patchkit-manifests").rename(tmp_path / "kept")
    (group / "patchkit-manifests").symlink_to(target)  # the manifests folder, replaced by a link
    before = outside(tmp_path, dest)
    result = cli("collect", dest, out, code=1)
    assert f"error: {group / 'patchkit-manifests'}: {group / 'patchkit-manifests'} is not a folder patchkit " \
           "collect made" in result.stderr
    assert outside(tmp_path, dest) == before and not list(target.iterdir()) and not good_copy(dest).exists()

    (group / "patchkit-manifests").unlink()
    precious = tmp_path / "precious.txt"
    precious.write_text("mine")
    (group / f"rank0_{GOOD}{collect.PART}").symlink_to(precious)  # a "part file of a killed run"
    before = outside(tmp_path, dest)
    cli("collect", dest, out)
    assert good_copy(dest).read_bytes() == TRACE and precious.read_text() == "mine"
    assert outside(tmp_path, dest) == before and not os.path.lexists(f"{good_copy(dest)}{collect.PART}")

    (dest / journal.JOURNAL).rename(tmp_path / "journal")
    (dest / journal.JOURNAL).symlink_to(tmp_path / "journal")
    result = cli("collect", dest, out, code=1)
    assert "cannot read the journal: it is a symbolic link" in result.stderr


def test_a_group_replaced_by_a_link_stops_the_collect_before_anything_is_written(shared, tmp_path):
    out, _secret, dest = shared
    cli("collect", dest, out)
    (dest / "verl-fsdp-update").rename(tmp_path / "moved")
    target = tmp_path / "target"
    target.mkdir()
    (dest / "verl-fsdp-update").symlink_to(target)
    before = outside(tmp_path, dest)
    result = cli("collect", dest, out, code=1)
    assert "it is a symbolic link, which patchkit collect never follows; nothing was written there" in result.stderr
    assert outside(tmp_path, dest) == before and not list(target.iterdir())


# ---------------------------------------------------------------- the parts


@pytest.mark.parametrize("name,expected", [
    ("../../../x", "______x"), ("..", "_"), (".", "_"), ("", "_"), ("a/b\\c\0d", "a_b_c_d"),
    (".patchkit-collect", "_patchkit-collect"), ("x..y", "x_y"),
    ("host_1.100.pt.trace.json", "host_1.100.pt.trace.json"),
    ("é\x1b\n\x7f\u202e", "_____"),
])
def test_safe_name(name, expected):
    assert safe_name(name) == expected


def test_safe_name_bounds_a_long_name_and_keeps_its_ending_and_identity():
    a, b = safe_name("a" * 100_000 + ".pt.trace.json"), safe_name("a" * 99_999 + "b.pt.trace.json")
    assert len(a) == len(b) == 200 and a.endswith("a.pt.trace.json") and a != b
    assert len(safe_name("x" * 300, limit=50)) == 50 and safe_name("x" * 50, limit=50) == "x" * 50


def test_dest_names_never_take_collects_own_names():
    cap = collect.Capture("/f", None, "", "", "", None, "torch", None, None, None, None, 0.0, "", None, ())
    assert collect.dest_name(cap, "a/b/x" + collect.PART) == "x" + collect.PART + "_"
    assert collect.dest_name(cap, manifest.FOLDER) == manifest.FOLDER + "_"
    assert collect.dest_name(cap._replace(rank=10 ** 1000), "t.pt.trace.json").endswith("_t.pt.trace.json")
    assert len(collect.dest_name(cap._replace(rank=10 ** 1000), "t.pt.trace.json")) == 200


def test_a_listing_with_links_or_climbing_names_refuses_the_capture(tmp_path):
    trace = Trace(str(tmp_path / "x_ascend_pt"), "x_ascend_pt", "folder", 1)
    cap = collect.Capture(str(tmp_path), None, "", "", "", 0, "npu", None, None, None, None, 0.0, "", None, (trace,))
    for listing, why in [([("a", collect.LINK)], "is a symbolic link"), ([("../../etc/passwd", 3)], "not a file inside"),
                         ([("/etc/passwd", 3)], "not a file inside"), ([("a//b", 3)], "not a file inside"),
                         ([("a", "big")], "not a file inside"), (None, "no list")]:
        with pytest.raises(CaptureError, match=why):
            collect.collect(str(tmp_path / "dest"), [cap], {"": collect.Source()}, lambda c, p: listing)
    assert not (tmp_path / "dest").exists()


def test_two_sources_reduced_to_one_name_stop_the_collect(tmp_path):
    out = tmp_path / "out"
    npu = out / "h_1_2_ascend_pt"
    npu.mkdir(parents=True)
    (npu / "profiler_info_0.json").write_text("{}")
    (npu / "a\x1b").write_bytes(b"1")
    (npu / "a_").write_bytes(b"2")  # the same size, a different file: never silently one of the two
    with pytest.raises(CaptureError, match="two different files would both be"):
        collect.collect_here(str(tmp_path / "dest"), [str(out)])
    assert not (tmp_path / "dest").exists()


# ---------------------------------------------------------------- DEST swapped between the check and the write


def swap_after_the_check(monkeypatch, swap):
    """``swap()`` runs once collect has checked DEST and planned, before it writes anything: the race, made certain."""
    real = collect.plan

    def plan(*args, **kwargs):
        swap()
        return real(*args, **kwargs)

    monkeypatch.setattr(collect, "plan", plan)


@pytest.mark.parametrize("there", [True, False])
def test_dest_swapped_for_a_link_after_the_check_is_never_written_through(shared, tmp_path, monkeypatch, there):
    out, _secret, dest = shared
    if there:
        dest.mkdir()  # checked as an empty folder, then moved away and a link put in its place
    target = tmp_path / "target"
    target.mkdir()

    def swap():
        if there:
            dest.rename(tmp_path / "moved")
        dest.symlink_to(target)

    swap_after_the_check(monkeypatch, swap)
    result = cli("collect", dest, out, code=0 if there else 1)
    assert not list(target.iterdir())
    if there:  # written into the folder that was checked, wherever it went
        assert (tmp_path / "moved" / "verl-fsdp-update" / f"rank0_{GOOD}").read_bytes() == TRACE
    else:
        assert f"error: {dest}: it appeared after patchkit looked" in result.stderr and "hint: " in result.stderr


def test_dest_s_parent_swapped_for_another_user_s_link_is_refused(shared, tmp_path, monkeypatch, stranger):
    out, _secret, _dest = shared
    stranger.run("mkdir", str(stranger.sticky / "theirs"))
    dest = stranger.sticky / "theirs" / "dest"  # root collects into a folder in another user's folder
    target = tmp_path / "target"  # where the stranger wants root's files to go
    target.mkdir()
    swap_after_the_check(monkeypatch, lambda: stranger.run(
        "sh", "-c", f"mv {stranger.sticky}/theirs {stranger.sticky}/moved && ln -s {target} {stranger.sticky}/theirs"))
    result = cli("collect", dest, out, code=1)
    assert not list(target.iterdir())
    assert f"error: {stranger.sticky / 'theirs'}: {stranger.sticky / 'theirs'} is a symbolic link owned by uid " \
           f"{stranger.uid}, not by you" in result.stderr and "hint: " in result.stderr


def test_a_dest_that_is_another_user_s_link_is_refused(shared, tmp_path, stranger):
    out, _secret, _dest = shared
    target = tmp_path / "target"
    target.mkdir()
    stranger.run("ln", "-s", str(target), str(stranger.sticky / "dest"))
    result = cli("collect", stranger.sticky / "dest", out, code=1)
    assert f"is a symbolic link owned by uid {stranger.uid}" in result.stderr and not list(target.iterdir())


def test_collect_into_a_dangling_link_is_an_error_not_a_traceback(shared, tmp_path):
    out, _secret, _dest = shared
    dest = tmp_path / "dangling"
    dest.symlink_to(tmp_path / "nowhere")
    result = cli("collect", dest, out, code=1)
    assert f"{dest}" in result.stderr and "symbolic link to a missing folder" in result.stderr
    assert "hint: " in result.stderr and not (tmp_path / "nowhere").exists()


def test_a_copy_stopped_by_the_file_size_limit_leaves_no_part_file(tmp_path):
    """EFBIG: ``ulimit -f`` below a trace's size, set in the collect's own process."""
    import subprocess
    import sys

    out = tmp_path / "outputs"
    out.mkdir()
    big = out / GOOD
    big.write_bytes(TRACE[:-1] + b', "pad": "' + b"p" * (256 << 10) + b'"}')
    write_manifest(out, "good", [(GOOD, "file", big.stat().st_size)])
    dest = tmp_path / "dest"
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, 64 << 10)); "
            "from patchkit.cli.commands import main; main(['collect', sys.argv[1], sys.argv[2]])")
    done = subprocess.run([sys.executable, "-c", code, str(dest), str(out)], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(__file__))))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    target = dest / "verl-fsdp-update" / f"rank0_{GOOD}"
    assert f"error: {target}" in done.stderr and "ulimit -f" in done.stderr, done.stderr
    assert not [p for p in dest.rglob("*") if p.name.endswith(collect.PART)]
    assert not target.exists()

"""apply warns when the environment that runs the patched code has no patchkit."""

from __future__ import annotations

import subprocess
import sys

from patchkit.state.environment import runtime_missing


def _site(tmp_path, *entries):
    root = tmp_path / "site-packages"
    root.mkdir(parents=True)
    (root / "verl-0.6.1.dist-info").mkdir()
    for entry in entries:
        path = root / entry
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir() if entry.endswith("dist-info") else path.write_text("")
    return root


def test_a_site_packages_without_patchkit_is_told(tmp_path):
    root = _site(tmp_path)
    said = runtime_missing(root)
    assert said is not None and str(root) in said and "patchkit-profiler" in said and "do nothing" in said


def test_a_site_packages_with_patchkit_or_its_metadata_is_not(tmp_path):
    assert runtime_missing(_site(tmp_path / "a", "patchkit/runtime.py")) is None
    assert runtime_missing(_site(tmp_path / "b", "patchkit_profiler-0.1.0.dist-info")) is None


def test_the_registrys_other_patchkit_does_not_count(tmp_path):
    """An unrelated project also called patchkit: no runtime module, so the lines would do nothing."""
    assert runtime_missing(_site(tmp_path, "patchkit/__init__.py", "patchkit-0.2.0.dist-info")) is not None


def test_a_folder_on_this_interpreters_path_or_a_source_checkout_is_not(tmp_path, monkeypatch):
    root = _site(tmp_path)
    monkeypatch.syspath_prepend(str(root))
    assert runtime_missing(root) is None
    checkout = tmp_path / "verl-src"
    (checkout / "verl").mkdir(parents=True)
    assert runtime_missing(checkout) is None  # its interpreter is wherever it is installed: nothing to tell


def test_apply_into_a_root_without_patchkit_warns_and_still_patches(tree, tmp_path):
    root = tree("verl-0.6")
    done = subprocess.run([sys.executable, "-m", "patchkit", "apply", "verl-fsdp-update", "--root", str(root)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"warning: {root} has no patchkit" in done.stderr
    assert "patched:" in done.stderr
    again = subprocess.run([sys.executable, "-m", "patchkit", "apply", "verl-fsdp-update", "--root", str(root)],
                           capture_output=True, text=True, cwd=tmp_path)
    assert "warning" not in again.stderr  # nothing written the second time: nothing new to say


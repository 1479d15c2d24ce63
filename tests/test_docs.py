"""The documentation: the site builds strictly, the README stays a newcomer's page, the reference is complete.

The site is ``docs/`` built by MkDocs (``mkdocs.yml``); its recipe reference
is generated at build time by ``docs/hooks/reference.py`` from the code's own
declarations, so a new point kind, setting or backend is documented without
a line written by hand, and a reference that misses one fails here.
"""

from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
HOOK = REPO / "docs" / "hooks" / "reference.py"

SET_UP = (
    'python -m pip install "torch==2.13.0" ".[torch,dev,ray]" && patchkit demo',
    "python -m pytest -q",
)


def _hook():
    """The reference hook as a module: its ``declarations()`` imports patchkit's declarations as the build does."""
    spec = importlib.util.spec_from_file_location("patchkit_docs_reference_hook", HOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built once with ``mkdocs build --strict`` (a warning, such as a broken link, fails it)."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return out


def _text(page: Path) -> str:
    """A built page's text: tags dropped, entities decoded, so a name split by highlighting still reads whole."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


def test_the_site_builds_strictly_with_every_page_in_the_nav(site):
    nav = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    pages = sorted(p.relative_to(REPO / "docs").as_posix() for p in (REPO / "docs").rglob("*.md"))
    assert pages, "no pages in docs/"
    for page in pages:
        assert f": {page}" in nav, f"docs/{page} is not listed in mkdocs.yml's nav"
        built = site / ("index.html" if page == "index.md" else page[:-3] + "/index.html")
        assert built.is_file(), f"docs/{page} was not built"


def test_the_readme_is_short_and_keeps_the_set_up_commands():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300, "the README is for a newcomer: move the details into docs/"
    for command in SET_UP:
        assert command in text, f"the README lost its set-up command {command!r}"


def test_the_readme_s_links_into_docs_resolve():
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(((?:docs/)[^)#\s]+)(?:#[^)]*)?\)", text)
    assert links, "the README links into docs/"
    for link in links:
        assert (REPO / link).is_file(), f"the README links to {link}, which does not exist"


def test_the_reference_names_every_kind_setting_and_backend(site):
    d = _hook().declarations()
    page = _text(site / "reference" / "index.html")
    missing = [f"point kind {name}" for name in d.kinds if name not in page]
    missing += [f"action {action}" for action in d.vocabulary.ACTIONS if action not in page]
    missing += [f"setting {s.section}.{s.name}" for s in d.vocabulary.SETTINGS if f"{s.section}.{s.name}" not in page]
    missing += [f"backend {name}" for name in d.backends.names() if name not in page]
    assert not missing, "the generated reference does not name: " + ", ".join(missing)
    built = (site / "reference" / "index.html").read_text(encoding="utf-8")
    for name in d.kinds:  # each kind has its own section, with its declared summary
        assert f'id="at-{name}"' in built, f"no section for the point kind {name}"
        assert " ".join(d.kinds[name].summary.split()[:4]) in page, f"the summary of {name} is missing"
    for name in d.backends.names():
        assert f'id="backend-{name}"' in built, f"no section for the backend {name}"
    assert "patchkit-reference:" not in built, "a marker of reference.md was left unreplaced"


def test_the_reference_names_every_spelling_patchkit_reads(site):
    """Made from patchkit.core.spellings, so a spelling added to the table is documented without a line written."""
    d = _hook().declarations()
    page = _text(site / "reference" / "index.html")
    missing = [s for m in d.spellings.MEMBERS for s in m.spellings() if s not in page]
    missing += [k.spelling for k in d.spellings.KEYS if k.spelling not in page]
    assert not missing, "the generated reference does not name the spellings: " + ", ".join(missing)
    built = (site / "reference" / "index.html").read_text(encoding="utf-8")
    assert 'id="spellings"' in built and "MindSpeed-RL" in page and ".".join(d.spellings.NESTED) in page


def _named(sentence: str) -> set:
    return set(re.findall(r"`([a-z_]+)`", sentence))


def test_the_commands_the_docs_say_take_root_are_those_whose_options_have_it():
    """usage.md names which commands take --root and which do not; click's own option lists say the same."""
    from patchkit.cli.commands import main

    takes = {name for name, command in main.commands.items() if any("--root" in p.opts for p in command.params)}
    text = " ".join((REPO / "docs" / "usage.md").read_text(encoding="utf-8").split())
    said = re.search(r"The commands that find a package take `--root`: (.*?)\. The others have no package to "
                     r"find: (.*?)\.\s", text)
    assert said, "docs/usage.md lost the sentence naming the commands that take --root"
    assert _named(said.group(1)) == takes
    assert _named(said.group(2)) == set(main.commands) - takes


def test_own_recipes_names_the_profiler_keys_and_the_range_new_writes(tmp_path):
    """own-recipes.md says which profiler keys `patchkit new` writes, the form of its range, and why its
    defaults differ from the built-in recipes'; a recipe written here holds those keys and that form."""
    import yaml

    from patchkit.state.newrecipe import write_new

    own = REPO / "tests" / "own_code" / "installed"
    written = write_new("mine", ["tinytrain.loop:Trainer.fit at: method_start"], None, str(own),
                        str(tmp_path / "mine.yaml"), None)
    data = yaml.safe_load(written.path.read_text(encoding="utf-8"))
    text = " ".join((REPO / "docs" / "own-recipes.md").read_text(encoding="utf-8").split())
    said = re.search(r"- \*\*the settings\*\*: `backend` \(`(\w+)` unless `--backend` says otherwise\), the "
                     r"`profiler:` keys (.*?), and the `schedule:`\.", text)
    assert said, "docs/own-recipes.md lost the bullet naming the settings `patchkit new` writes"
    assert said.group(1) == data["backend"] and _named(said.group(2)) == set(data["profiler"])
    assert set(data) >= {"backend", "profiler", "schedule"}
    assert data["target"]["versions"] == "==1.2.0" and "**the version range** `==0.7.1`" in text
    for default in ("`level: level0`", "`analysis: false`", "one active step"):
        assert default in text, f"own-recipes.md no longer says why `new` writes {default}"
    assert (data["profiler"]["level"], data["profiler"]["analysis"], data["schedule"]["active"]) == ("level0", False, 1)

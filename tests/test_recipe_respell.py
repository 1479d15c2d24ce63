"""The users' own spellings, read at load: torch_npu's names of values and verl's, MindSpeed-RL's and torch_npu's
names of keys, in a recipe file and in ``KEY=VALUE``, become patchkit's names before anything else sees them; a
spelling no one knows is an error at its line (or at the override) with the nearest accepted name."""

from __future__ import annotations

import json
import textwrap

import pytest
from click.testing import CliRunner

from conftest import snapshot
from patchkit.cli.commands import main
from patchkit.core import spellings as sp
from patchkit.core import vocabulary as v
from patchkit.core.errors import OverrideError, RecipeError
from patchkit.engine.codemod import transform
from patchkit.recipe.load import load_recipe
from runtime_helpers import on_stand_in

HEAD = textwrap.dedent("""\
    id: sp
    description: a recipe written with other tools' names
    target:
      package: pkg
      files: [pkg/mod.py]
    backend: npu
    """)
POINTS = textwrap.dedent("""\
    points:
      - class: A
        method: run
        at: method_end
    """)
SOURCE = "class A:\n    def run(self):\n        self.done = True\n"


def recipe(tmp_path, profiler="", name="sp.yaml"):
    body = textwrap.dedent(profiler).rstrip("\n") + "\n"
    text = HEAD + (f"profiler:\n{textwrap.indent(body, '  ')}" if profiler else "") + POINTS
    path = tmp_path / name
    path.write_text(text.replace("id: sp", f"id: {name[:-5]}"))
    return path


def profiler_of(tmp_path, profiler="", overrides=()):
    return load_recipe(recipe(tmp_path, profiler), list(overrides)).recipe.profiler


def error_of(tmp_path, profiler="", overrides=()):
    with pytest.raises(RecipeError) as info:
        load_recipe(recipe(tmp_path, profiler), list(overrides))
    return info.value


def as_written(m: sp.Member, spelling: str) -> str:
    """A YAML line setting ``m``'s setting to ``spelling`` (with what the npu backend then needs)."""
    if m.setting == "contents":
        return f"contents: [{spelling}]"
    extra = "level: level1\n" if m.setting == "aic_metrics" else ""
    return extra + (f"host_sys: [{spelling}]" if m.setting == "host_sys" else f"{m.setting}: {spelling}")


def expected(m: sp.Member):
    return (m.word,) if v.SETTING[m.setting].kind == v.WORDS else m.word


VALUE_SPELLINGS = [pytest.param(m, s, id=f"{m.setting}={s}") for m in sp.MEMBERS for s in m.spellings()]


# ---------------------------------------------------------------- torch_npu's names of values


@pytest.mark.parametrize("member,spelling", VALUE_SPELLINGS)
def test_every_torch_npu_spelling_of_a_value_reads_as_patchkit_s_word_in_a_recipe(tmp_path, member, spelling):
    profiler = profiler_of(tmp_path, as_written(member, spelling))
    assert getattr(profiler, member.setting) == expected(member)


@pytest.mark.parametrize("member,spelling", VALUE_SPELLINGS)
def test_every_torch_npu_spelling_of_a_value_reads_as_patchkit_s_word_in_an_override(tmp_path, member, spelling):
    value = f"[{spelling}]" if v.SETTING[member.setting].kind == v.WORDS else spelling
    extra = ["profiler.level=level1"] if member.setting == "aic_metrics" else []
    profiler = profiler_of(tmp_path, overrides=extra + [f"profiler.{member.setting}={value}"])
    assert getattr(profiler, member.setting) == expected(member)


def test_a_list_mixes_patchkit_s_words_and_torch_npu_s(tmp_path):
    profiler = profiler_of(tmp_path, "contents: [torch_npu.profiler.ProfilerActivity.NPU, cpu, memory]")
    assert profiler.contents == ("npu", "cpu", "memory")
    assert profiler_of(tmp_path, "contents: ProfilerActivity.NPU").contents == ("npu",)  # one word for a list


# ---------------------------------------------------------------- other tools' names of keys

VALUES = {"level": ("ProfilerLevel.Level2", "level2"), "export_type": ("db", "db"), "analysis": ("true", True),
          "save_path": ("./out/x", "./out/x"), "ranks": ("[1, 0]", (0, 1)), "mstx": ("true", True)}


@pytest.mark.parametrize("key", [k for k in sp.KEYS if k.does == sp.RENAME], ids=lambda k: k.spelling)
@pytest.mark.parametrize("where", ["recipe", "override", "tool_config"])
def test_every_other_name_of_a_key_sets_patchkit_s_key(tmp_path, key, where):
    written, meant = VALUES[key.key]
    if where == "recipe":
        profiler = profiler_of(tmp_path, f"{key.spelling}: {written}")
    elif where == "override":
        profiler = profiler_of(tmp_path, overrides=[f"profiler.{key.spelling}={written}"])
    else:
        profiler = profiler_of(tmp_path, f"tool_config:\n  npu:\n    {key.spelling}: {written}")
    assert getattr(profiler, key.key) == meant


@pytest.mark.parametrize("key", [k for k in sp.KEYS if k.does == sp.MEMBER], ids=lambda k: k.spelling)
def test_every_with_switch_puts_its_word_in_or_takes_it_out(tmp_path, key):
    base = ["npu"] if key.word != "npu" else ["cpu"]
    on = profiler_of(tmp_path, f"contents: {base}\n{key.spelling}: true").contents
    assert on == tuple(base) + (key.word,)
    typed = profiler_of(tmp_path, f"contents: {base}", [f"profiler.{key.spelling}=true"]).contents
    assert typed == tuple(base) + (key.word,)
    full = list(dict.fromkeys(["cpu", "npu", key.word]))
    off = profiler_of(tmp_path, f"contents: {full}\n{key.spelling}: false").contents
    assert off == tuple(w for w in full if w != key.word)


def test_switches_start_from_the_default_contents(tmp_path):
    assert profiler_of(tmp_path, "profile_with_memory: true").contents == ("cpu", "npu", "memory")
    assert profiler_of(tmp_path, "profile_with_cpu: false").contents == ("npu",)


def test_contents_on_the_command_line_replaces_the_recipe_s_switches(tmp_path):
    profiler = profiler_of(tmp_path, "with_memory: true", ["profiler.contents=[npu]", "profiler.with_stack=true"])
    assert profiler.contents == ("npu", "stack")


@pytest.mark.parametrize("written,overrides,ranks", [
    ("all_ranks: true", [], "all"),
    ("all_ranks: true\nranks: [0]", [], "all"),  # verl: all_ranks wins
    ("all_ranks: false\nranks: [1]", [], (1,)),
    ("all_ranks: true", ["profiler.ranks=[2]"], (2,)),  # what is typed wins
    ("ranks: [2]", ["profiler.all_ranks=true"], "all"),
    ("tool_config: {npu: {discrete: true}}\nall_ranks: false\nranks: [0, 1]", [], (0, 1)),
])
def test_all_ranks_is_ranks_all(tmp_path, written, overrides, ranks):
    assert profiler_of(tmp_path, written, overrides).ranks == ranks


@pytest.mark.parametrize("key", [k for k in sp.KEYS if k.does == sp.ALWAYS], ids=lambda k: k.spelling)
def test_a_switch_patchkit_is_always_in_is_accepted_when_true(tmp_path, key):
    assert profiler_of(tmp_path, f"{key.spelling}: true") == profiler_of(tmp_path)
    assert profiler_of(tmp_path, overrides=[f"profiler.{key.spelling}=true"]) == profiler_of(tmp_path)
    err = error_of(tmp_path, f"{key.spelling}: false")
    assert err.where.line == 8 and "false cannot be honoured" in err.message and key.why in err.hint


VERL = """\
all_ranks: false
ranks: [0]
discrete: true
tool_config:
  npu:
    discrete: true
    level: level1
    contents: [npu, cpu, memory]
    analysis: true
"""
MINDSPEED_RL = """\
profile: true
mstx: false
profile_save_path: ./profiler_data
profile_export_type: db
profile_level: level1
profile_with_memory: true
profile_record_shapes: false
profile_with_cpu: true
profile_with_npu: true
profile_with_module: false
profile_analysis: true
profile_ranks: [0, 1]
"""


@pytest.mark.parametrize("written", [VERL, MINDSPEED_RL], ids=["verl", "MindSpeed-RL"])
def test_a_tool_s_own_block_reads_as_patchkit_s_settings(tmp_path, written):
    profiler = profiler_of(tmp_path, written)
    assert profiler.level == "level1" and profiler.analysis is True
    assert set(profiler.contents) == {"npu", "cpu", "memory"}
    assert profiler.ranks in ((0,), (0, 1))


def test_a_key_under_tool_config_is_overridden_by_its_dotted_path_or_its_own_name(tmp_path):
    assert profiler_of(tmp_path, VERL, ["profiler.tool_config.npu.level=Level2"]).level == "level2"
    assert profiler_of(tmp_path, VERL, ["profiler.level=level0"]).level == "level0"
    assert profiler_of(tmp_path, MINDSPEED_RL, ["profiler.level=level2"]).level == "level2"


# ---------------------------------------------------------------- show prints patchkit's names


def test_show_prints_patchkit_s_names(tmp_path):
    path = recipe(tmp_path, MINDSPEED_RL + "aic_metrics: AiCMetrics.PipeUtilization\n")
    result = CliRunner().invoke(main, ["show", str(path), "profiler.export_type=ExportType.Text"])
    assert result.exit_code == 0, result.output
    settings = [ln.strip() for ln in result.stdout.splitlines() if ln.startswith("  profiler.")]
    assert "profiler.level: level1" in settings and "profiler.aic_metrics: pipe_utilization" in settings
    assert "profiler.export_type: text" in settings and "profiler.save_path: ./profiler_data" in settings
    assert "profiler.contents: [cpu, npu, memory]" in settings
    assert not any(k.spelling + ":" in result.stdout for k in sp.KEYS)
    assert 'aic_metrics="pipe_utilization"' in result.stdout  # the inserted configure(...) line: patchkit's words


# ---------------------------------------------------------------- spellings no one knows


@pytest.mark.parametrize("written,line,col,message,nearest", [
    ("level: ProfilerLevel.Levl1", 8, 10, "profiler.level must be one of", "did you mean ProfilerLevel.Level1 (level1)?"),
    ("level: Level_None", 8, 10, "got 'Level_None'", "did you mean Level_none (level_none)?"),
    ("aic_metrics: AiCMetrics.PipeUtilisation", 8, 16, "profiler.aic_metrics must be one of",
     "did you mean AiCMetrics.PipeUtilization (pipe_utilization)?"),
    ("export_type: ExportType.DB", 8, 16, "profiler.export_type must be one of", "did you mean ExportType.Db (db)?"),
    ("contents: [npu, ProfilerActivity.NUP]", 8, 19, "profiler.contents entries must be one of",
     "did you mean ProfilerActivity.NPU (npu)?"),
    ("profile_levle: level1", 8, 3, "unknown key 'profile_levle' in profiler", "did you mean profile_level?"),
    ("tool_config: {npu: {levle: level1}}", 8, 23, "unknown key 'levle' in profiler.tool_config.npu",
     "did you mean level?"),
    ("profile_with_memory: yes please", 8, 24, "profiler.profile_with_memory must be true or false", "true or false"),
    ("tool_config: {nsys: {discrete: true}}", 8, 17, "only verl's npu tool config is read", "tool_config.npu"),
    ("tool_config: [npu]", 8, 16, "profiler.tool_config must be a mapping", "tool_config: {npu:"),
    ("all_ranks: false", 8, 14, "false needs profiler.ranks", "ranks: [0, 1]"),
    ("profile_level: level1\nlevel: level2", 9, 3, "profiler.profile_level and profiler.level both set", "keep one"),
])
def test_an_unknown_spelling_in_a_recipe_is_an_error_at_its_line_with_the_nearest_name(
        tmp_path, written, line, col, message, nearest):
    err = error_of(tmp_path, written)
    assert not isinstance(err, OverrideError)
    assert (err.where.path, err.where.line, err.where.col) == (str(tmp_path / "sp.yaml"), line, col)
    assert message in err.message and nearest in err.hint


@pytest.mark.parametrize("override,message,nearest", [
    ("profiler.level=ProfilerLevel.Level3", "profiler.level must be one of",
     "did you mean ProfilerLevel.Level2 (level2)?"),
    ("profiler.profile_export_type=ExportType.Txt", "profiler.export_type must be one of",
     "did you mean ExportType.Text (text)?"),
    ("profiler.tool_config.npu.contents=[ProfilerActivity.CPUS]", "entries must be one of",
     "did you mean ProfilerActivity.CPU (cpu)?"),
    ("profiler.profile_levle=level1", "unknown override key 'profiler.profile_levle'",
     "did you mean profiler.profile_level=level1?"),
    ("profiler.with_memmory=true", "unknown override key", "did you mean profiler.with_memory=true?"),
    ("profiler.discrete=false", "false cannot be honoured", "verl's own profiler"),
])
def test_an_unknown_spelling_on_the_command_line_is_an_error_at_the_override(tmp_path, override, message, nearest):
    err = error_of(tmp_path, overrides=[override])
    assert isinstance(err, OverrideError) and str(err.where) == "<command line>"
    assert message in err.message and nearest in err.hint


def test_the_hint_lists_the_accepted_names(tmp_path):
    hint = error_of(tmp_path, "level: fast").hint
    assert "pick one of: level_none, level0, level1, level2" in hint and "ProfilerLevel.Level_none" in hint
    assert "did you mean" not in hint
    hint = error_of(tmp_path, "aic_metrics: fast").hint
    assert "AiCMetrics.MemoryAccess" in hint and "ACL_AICORE_MEMORY_ACCESS" in hint
    hint = error_of(tmp_path, "colour: blue").hint
    assert "valid keys: level, contents" in hint and "profile_level" in hint and "all_ranks" in hint


@pytest.mark.parametrize("command", ["apply", "diff", "show"])
@pytest.mark.parametrize("args", [["profiler.level=ProfilerLevel.Level9"], ["profiler.profile_lvl=level1"]])
def test_nothing_on_disk_changes_on_a_bad_spelling(tmp_path, patchkit_home, command, args):
    root = tmp_path / "root"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "mod.py").write_text(SOURCE)
    bad = recipe(tmp_path, "level: ProfilerLevel.Level1\n", name="bad.yaml")
    for written, extra in ((bad, args), (recipe(tmp_path, "level: Level7\n", name="worse.yaml"), [])):
        before, home = snapshot(tmp_path), snapshot(patchkit_home)
        result = CliRunner().invoke(main, [command, str(written), "--root", str(root), *extra])
        assert result.exit_code == 1, result.output
        assert snapshot(tmp_path) == before and snapshot(patchkit_home) == home


# ---------------------------------------------------------------- the generated code, on torch_npu's stand-in

RUN = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
import patched
for _ in range(3):
    patched.A().run()
import torch_npu
(p,) = torch_npu._double.recorder.profiles
print("PATCHKIT-RESULT " + json.dumps({"exp": p.experimental_config, "activities": [str(a) for a in p.activities],
                                       "kwargs": sorted(p.init_kwargs), "errors": torch_npu._double.recorder.errors},
                                      default=str))
'''


def test_the_generated_npu_code_hands_torch_npu_its_own_enum_values(tmp_path):
    path = recipe(tmp_path, """\
        profiler_level: torch_npu.profiler.ProfilerLevel.Level1
        aic_metrics: AiCMetrics.PipeUtilization
        contents: [ProfilerActivity.NPU]
        profile_with_cpu: true
        profile_with_memory: true
        host_sys: [HostSystem.CPU, MEM]
        tool_config:
          npu:
            export_type: ExportType.Db
        """)
    save = tmp_path / "out"
    settings = load_recipe(path, [f"profiler.save_path={save}"])
    result = transform(SOURCE, settings)
    (tmp_path / "patched.py").write_text(result.text)
    got = on_stand_in(RUN, tmp_path)
    exp = got["exp"]
    assert got["errors"] == []
    assert exp["_profiler_level"] == "Level1"
    assert exp["_aic_metrics"] == "ACL_AICORE_PIPE_UTILIZATION"
    assert exp["_export_type"] == ["db"] or exp["_export_type"] == "db"
    assert sorted(json.loads(json.dumps(exp["_host_sys"]))) == ["cpu", "mem"]
    assert sorted(got["activities"]) == ["ProfilerActivity.CPU", "ProfilerActivity.NPU"]
    assert "profile_memory" in got["kwargs"]

"""The table of the users' own spellings: every row names a real patchkit setting and word, no spelling means two
things, and torch_npu's names in it are the ones torch_npu (its CPU stand-in) defines."""

from __future__ import annotations

import pytest

from patchkit.core import spellings as sp
from patchkit.core import vocabulary as v
from patchkit.runtime.backends import npu
from runtime_helpers import on_stand_in


def test_each_member_stands_for_a_word_of_a_word_setting():
    for m in sp.MEMBERS:
        setting = v.SETTING[m.setting]
        assert setting.kind in (v.WORD, v.WORDS), m
        assert m.word in setting.values, m


def test_each_torch_npu_member_patchkit_writes_is_in_the_table():
    """The npu backend writes code from the same rows: every word it can be handed has its member."""
    for name in ("level", "export_type", "host_sys"):
        assert {m.word for m in sp.MEMBERS if m.setting == name} == set(v.SETTING[name].values), name
    assert {m.word for m in sp.MEMBERS if m.setting == "aic_metrics"} == set(v.AIC_METRICS) - {"default"}
    assert set(npu.AIC.values()) == npu.STATIC_FEATURES["aic_members"]
    assert set(npu.HOST_SYS.values()) == npu.STATIC_FEATURES["host_sys_members"]
    assert (npu.LEVEL["level_none"], npu.EXPORT["db"], npu.ACTIVITY["npu"]) == ("Level_none", "Db", "NPU")


def test_no_spelling_means_two_words():
    for setting in sp.VALUES:
        seen = {}
        for m in (m for m in sp.MEMBERS if m.setting == setting):
            for s in m.spellings():
                assert seen.setdefault(s, m.word) == m.word, (setting, s)
                assert s not in v.SETTING[setting].values or sp.word(setting, s) == s, (setting, s)


@pytest.mark.parametrize("setting,written,word", [
    ("level", "torch_npu.profiler.ProfilerLevel.Level1", "level1"),
    ("level", "ProfilerLevel.Level_none", "level_none"),
    ("level", "Level2", "level2"),
    ("aic_metrics", "AiCMetrics.PipeUtilization", "pipe_utilization"),
    ("aic_metrics", "PipeUtilization", "pipe_utilization"),
    ("aic_metrics", "ACL_AICORE_MEMORY_BANDWIDTH", "memory"),
    ("aic_metrics", "torch_npu.profiler.AiCMetrics.AiCoreNone", "none"),
    ("export_type", "ExportType.Db", "db"),
    ("export_type", "torch_npu.profiler.ExportType.Text", "text"),
    ("contents", "torch_npu.profiler.ProfilerActivity.NPU", "npu"),
    ("contents", "ProfilerActivity.CPU", "cpu"),
    ("host_sys", "HostSystem.OSRT", "osrt"),
])
def test_word_reads_torch_npu_s_spellings(setting, written, word):
    assert sp.word(setting, written) == word
    assert sp.member(setting, word) == written.rsplit(".", 1)[-1] or written.startswith("ACL_")


def test_word_knows_nothing_else():
    assert sp.word("level", "Level3") is None
    assert sp.word("level", "level1") is None  # patchkit's own words are the vocabulary's
    assert sp.word("level", 1) is None
    assert sp.word("save_path", "ExportType.Db") is None  # a spelling belongs to its setting only


def test_key_spellings_name_patchkit_keys_and_words():
    profiler = set(v.PROFILER_KEYS)
    assert len(sp.KEY) == len(sp.KEYS), "a spelling is declared twice"
    for k in sp.KEYS:
        assert k.spelling not in profiler, f"{k.spelling} is patchkit's own key already"
        assert k.does in (sp.RENAME, sp.MEMBER, sp.ALL, sp.ALWAYS), k
        if k.does == sp.ALWAYS:
            assert not k.key and k.why, k
        else:
            assert k.key in profiler, k
        if k.does == sp.MEMBER:
            assert v.SETTING[k.key].kind == v.WORDS and k.word in v.SETTING[k.key].values, k
        if k.does == sp.ALL:
            assert v.SETTING[k.key].kind == v.RANKS, k
    assert sp.NESTED[0] not in profiler


def test_the_tools_own_names_are_in_the_table():
    """verl's role profiler and tool_config.npu, MindSpeed-RL's ProfilerConfig (the keys that set a profiler)."""
    verl = {"all_ranks", "discrete", "enable", "with_cpu", "with_npu", "with_memory", "with_module", "with_stack",
            "record_shapes"}
    msrl = {"profile", "profile_level", "profile_export_type", "profile_save_path", "profile_analysis",
            "profile_ranks", "profile_with_cpu", "profile_with_npu", "profile_with_memory", "profile_with_module",
            "profile_record_shapes"}
    assert verl <= {k.spelling for k in sp.KEYS if k.tool == sp.VERL}
    assert msrl <= {k.spelling for k in sp.KEYS if k.tool == sp.MSRL}
    assert "mstx" in v.PROFILER_KEYS  # MindSpeed-RL's mstx is patchkit's name already


STAND_IN = r'''
import json
import torch_npu.profiler as p
rows = {}
for enum in ("ProfilerLevel", "AiCMetrics", "ExportType", "ProfilerActivity", "HostSystem"):
    cls = getattr(p, enum)
    rows[enum] = {n: str(getattr(cls, n)) for n in dir(cls) if not n.startswith("_")}
print("PATCHKIT-RESULT " + json.dumps(rows))
'''


def test_the_members_are_torch_npu_s_own(tmp_path):
    """Each member's name exists in torch_npu (its stand-in, newest release), with the value the table says."""
    rows = on_stand_in(STAND_IN, tmp_path)
    for m in sp.MEMBERS:
        assert m.name in rows[m.enum], m
        stored = rows[m.enum][m.name]
        if m.enum == "ProfilerActivity":
            assert stored == f"ProfilerActivity.{m.name}"
        else:
            assert stored == (m.value or stored) and (m.value or stored.lower() == m.name.lower()), (m, stored)

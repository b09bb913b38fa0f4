"""Keyword search in Chinese, Japanese and Korean: the FTS index sees CJK text as character
bigrams, so words written without spaces are found."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.run import run_ok

DOCS = {
    "zh.md": "# 人工智能笔记\n\n机器学习是人工智能的一个分支，它让计算机从数据中学习规律。\n",
    "ja.md": "# メモ\n\n「機械学習」とは、ＡＩの一分野で、データから規則を学ぶ手法です。\n",
    "ko.md": "# 노트\n\n기계학습은 인공지능의 한 분야이며 데이터에서 규칙을 배운다.\n",
    "mixed.md": "# Models\n\n我们评估了GPT模型和BM25检索。ｶﾀｶﾅ is half-width katakana.\n",
    "en.md": "# Tide pools\n\nTide pools form on rocky shores when the sea retreats.\n",
}


@pytest.fixture
def cjk_kf(kf: Path, tmp_path: Path) -> Path:
    src = tmp_path / "cjk"
    src.mkdir()
    for name, text in DOCS.items():
        (src / name).write_text(text, encoding="utf-8")
    r = run_ok("store", "ingest", str(src))
    assert r.code == 0, r.err
    return kf


def fts_paths(query: str, *args: str) -> list[str]:
    r = run_ok("search", query, "--mode", "fts", "--json", *args)
    assert r.code == (0 if r.json() else 1), r.err  # nothing found exits 1, as rg does
    return [Path(h["path"]).name for h in r.json()]


@pytest.mark.parametrize(
    ("query", "doc"),
    [
        ("机器学习", "zh.ok.md"),  # a word inside a sentence without spaces
        ("人工智能", "zh.ok.md"),
        ("計算机 数据", "zh.ok.md"),  # one wrong character still leaves bigrams to match
        ("機械学習", "ja.ok.md"),
        ("データ", "ja.ok.md"),  # katakana
        ("AI", "ja.ok.md"),  # full-width ＡＩ in the text
        ("기계학습", "ko.ok.md"),  # Korean: the word carries a particle, 기계학습은
        ("인공지능", "ko.ok.md"),
        ("模型", "mixed.ok.md"),  # Han next to Latin letters, GPT模型
        ("GPT", "mixed.ok.md"),
        ("カタカナ", "mixed.ok.md"),  # half-width ｶﾀｶﾅ in the text
        ("智", "zh.ok.md"),  # one character, inside a word
        ("則", "ja.ok.md"),
        ("야", "ko.ok.md"),
    ],
)
def test_cjk_words_are_found_by_keyword_search(cjk_kf: Path, query: str, doc: str) -> None:
    assert fts_paths(query)[:1] == [doc]


def test_cjk_queries_do_not_match_other_scripts(cjk_kf: Path) -> None:
    assert fts_paths("学习规律") == ["zh.ok.md"]
    assert fts_paths("분야") == ["ko.ok.md"]
    assert fts_paths("rocky shores") == ["en.ok.md"]
    assert fts_paths("潮池") == []


def test_cjk_hits_cite_the_original_text(cjk_kf: Path) -> None:
    r = run_ok("search", "机器学习", "--mode", "fts", "--json")
    hit = r.json()[0]
    assert "机器学习是人工智能" in hit["quote"] and "机器 器学" not in hit["quote"]
    r = run_ok("cite", "verify", "-", "--json", input=json.dumps(hit))
    assert r.code == 0, r.out


def test_cjk_notes_are_found_by_keyword_search(kf: Path) -> None:
    assert run_ok("mem", "add", "会议决定下周发布新版本").code == 0
    assert run_ok("mem", "add", "今日は晴れです").code == 0
    r = run_ok("search", "发布", "--mode", "fts", "--in", "mem", "--json")
    assert [h["quote"] for h in r.json()] == ["会议决定下周发布新版本"]
    r = run_ok("search", "晴れ", "--mode", "fts", "--in", "mem", "--json")
    assert [h["quote"] for h in r.json()] == ["今日は晴れです"]


def test_an_index_from_before_bigrams_asks_for_a_rebuild(cjk_kf: Path) -> None:
    run_ok("graph", "cypher", "MATCH (m:Meta {key: 'schema_version'}) SET m.value = '4'", "--write")
    r = run_ok("search", "机器学习", "--mode", "fts")
    assert r.code == 2 and "schema version 4" in r.err and "ok index --rebuild" in r.err
    assert run_ok("index", "--rebuild").code == 0
    assert fts_paths("机器学习")[:1] == ["zh.ok.md"]


def test_only_cjk_text_is_rewritten_in_the_keyword_index(cjk_kf: Path) -> None:
    rows = run_ok(
        "graph",
        "cypher",
        "MATCH (d:Doc)-[:HAS_CHUNK]->(c:Chunk) RETURN d.path AS path, c.text AS text, c.fts AS fts",
        "--json",
    ).json()
    by_name = {Path(r["path"]).name: r for r in rows}
    en = by_name["en.ok.md"]
    assert en["fts"] == " ".join(en["text"].split())  # byte for byte what it was before
    zh = by_name["zh.ok.md"]["fts"]
    assert "机器 器学 学习 习是" in zh and "，" not in zh and "。" not in zh
    assert (
        "我们 们评 评估 估了 我 们 评 估 了 GPT 模型 型和 模 型 和 BM25 检索 检 索 "
        "カタ タカ カナ カ タ カ ナ is half-width"
    ) in by_name["mixed.ok.md"]["fts"]


def test_a_cjk_word_is_matched_as_a_whole_not_by_its_characters(cjk_kf: Path) -> None:
    # 学 and 习 are both in the Chinese document, but not as the word 习学
    assert fts_paths("习学") == []
    assert fts_paths("学习") == ["zh.ok.md"]

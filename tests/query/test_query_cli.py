"""`contextrag query` and `contextrag demo` (retrieval-only paths; the LLM paths are covered by the
embedded-model tests)."""
import json

import pytest

from contextrag.cli import main


@pytest.fixture(scope="module")
def saved_index(rag, tmp_path_factory):
    d = tmp_path_factory.mktemp("idx") / "hotpot"
    rag.save(d)
    return d


def test_query_no_llm_json(saved_index, hotpot, capsys):
    q = hotpot[0][0]["question"]
    assert main(["query", str(saved_index), q, "--no-llm", "--json", "-k", "5"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["answer"] and out["style"] == "extractive" and out["citations"]        # no LLM: never null
    assert len(out["hits"]) == 5 and out["cost"]["total"]["calls"] == 0
    assert all(0.0 <= h["relevance"] <= 1.0 for h in out["hits"])
    gold = {t for t, _ in hotpot[0][0]["supporting_facts"]}
    assert gold & {h["doc_id"] for h in out["hits"]}
    assert {"bm25", "cos", "fuzzy", "boost"} <= set(out["hits"][0]["parts"])


def test_query_no_llm_text_and_doc_filter(saved_index, hotpot, capsys):
    qs, docs = hotpot
    assert main(["query", str(saved_index), qs[0]["question"], "--llm", "none", "--doc", docs[3]["id"]]) == 0
    out = capsys.readouterr().out
    assert "Sources (" in out and docs[3]["id"] in out and "0 LLM calls" in out


def test_query_bad_arguments(saved_index, tmp_path, capsys):
    assert main(["query", str(saved_index), "q", "--no-llm", "-k", "0"]) == 2
    assert "-k" in capsys.readouterr().err
    assert main(["query", str(tmp_path / "missing"), "q", "--no-llm"]) == 2


def test_demo_on_a_folder_without_an_llm(tmp_path, capsys):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "alpha.md").write_text("The Zorbulator is a machine built in 1987 by Ada Quill in Lisbon. "
                                     "It sorts marbles by weight.")
    (folder / "beta.txt").write_text("Penguins live in the southern hemisphere and cannot fly. "
                                     "Emperor penguins are the largest.")
    args = ["demo", str(folder), "-q", "Who built the Zorbulator?", "--llm", "none", "--out", str(tmp_path / "ix"), "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["hits"][0]["doc_id"] == "alpha.md" and "Ada Quill" in out["answer"] and out["citations"] == [1]
    assert main(args) == 0                                   # second run reuses the index
    assert "reusing" in capsys.readouterr().err


def _scores(out: str) -> list[float]:
    import re
    return [float(m) for m in re.findall(r"^ \[\d+\][ *]\S+\s+score (-?\d+\.\d+)  ", out, flags=re.M)]


def _numbers(out: str) -> list[int]:
    import re
    return [int(m) for m in re.findall(r"^ \[(\d+)\][ *]", out, flags=re.M)]


def test_query_extractive_stream_and_sources_by_score(saved_index, hotpot, capsys):
    q = hotpot[0][6]          # one passage's sentence answers it
    assert main(["query", str(saved_index), q["question"], "--no-llm", "--style", "extractive", "--stream",
                 "-k", "5"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Q: {q['question']}\nA: ") and q["answer"] in out.split("\n")[1]
    assert "style extractive" in out and "Sources (5;" in out and "*" in out
    s = _scores(out)
    assert len(s) == 5 and s == sorted(s, reverse=True) and _numbers(out) == [1, 2, 3, 4, 5]
    assert main(["query", str(saved_index), q["question"], "--no-llm", "--style", "extractive", "--stream",
                 "--json", "-k", "3"]) == 0
    lines = capsys.readouterr().out.split("\n", 1)
    delta, final = json.loads(lines[0]), json.loads(lines[1])
    assert delta["delta"] == final["answer"] and final["style"] == "extractive" and final["citations"]


def test_sources_are_numbered_in_display_order_with_their_scores(capsys):
    from contextrag.commands.query import print_result, rewrites_note
    from contextrag.query import Hit

    def hit(i, score, rel):
        return Hit(id=f"c{i}", doc_id=f"d{i}", kind="chunk", text=f"text {i}", score=score, relevance=rel,
                   parts={"rrf": 0.03, "rerank_rank": i})
    hits = [hit(1, 0.41, 0.2), hit(2, 0.93, 0.7), hit(3, 0.67, None)]   # reranked order
    print_result("q", hits, answer="a [2]", citations=[2])
    out = capsys.readouterr().out
    assert _numbers(out) == [1, 2, 3] and _scores(out) == [0.41, 0.93, 0.67]    # the number is the citation's
    assert " [2]*chunk" in out and "rel 0.700" in out and "rel 0.200" in out and "rel   -  " in out
    note = rewrites_note([{"kind": "paraphrase", "reply": "Who?", "used": True},
                          {"kind": "decompose", "reply": "q", "used": False},
                          {"kind": "entities", "reply": None, "used": False}])
    assert note == ("rewrites (3 calls): paraphrase “Who?”; decompose “q” (a repeat, not searched); "
                    "entities no usable reply")

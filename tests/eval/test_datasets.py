"""Loaders for every format, on real text from the shared data sets."""
import json

import pytest

from contextrag.eval import datasets as D
from shared_data import hotpot_file


def test_hotpotqa_slice(data, hotpot):
    qa = D.load(hotpot_file(data), "hotpotqa", limit=12)
    assert len(qa.questions) == 12
    q0, r0 = qa.questions[0], hotpot[0]
    assert q0.id == r0["_id"] and q0.text == r0["question"] and q0.answers == [r0["answer"]]
    assert q0.type == r0["type"]
    ids = {d.id: d for d in qa.corpus}
    # gold = the paragraphs named by the supporting facts, found in the corpus with their text
    sup = {t for t, _ in r0["supporting_facts"]}
    assert {ids[g].title for g in q0.gold_ids} == sup
    for g in q0.gold_ids:
        para = dict((t, s) for t, s in r0["context"])[ids[g].title]
        assert ids[g].text.startswith(para[0].strip()[:30])
    # union of paragraphs, deduplicated: at most 10 per question
    titles = {(t, " ".join(x.strip() for x in s)) for r in hotpot[:12] for t, s in r["context"]}
    assert len(qa.corpus) == len(titles)
    assert len({d.id for d in qa.corpus}) == len(qa.corpus)


def test_hotpotqa_whole_file_shape(data, hotpot):
    qa = D.load(hotpot_file(data), "hotpotqa")       # the full 500, or the shipped fixture's first 201
    s = qa.summary()
    assert s["questions"] == len(hotpot) and s["with_gold"] == len(hotpot)
    assert set(s["types"]) == {"bridge", "comparison"}
    assert all(len(q.gold_ids) == 2 for q in qa.questions)
    # paragraphs are deduplicated by (title, text): a title with two different texts keeps both, under
    # distinct ids (the full set has one such title: 4,9xx paragraphs from 5,000)
    pairs = {(t.strip(), D._join_sentences(sents)) for r in hotpot for t, sents in r["context"]}
    assert len(qa.corpus) == len(pairs) and len({d.id for d in qa.corpus}) == len(pairs)
    if len(hotpot) == 500:
        assert 4900 < len(qa.corpus) < 5000


def test_multihoprag(data):
    qa = D.load(data / "multihoprag_small.json", "multihoprag",
                corpus=data / "multihoprag_small_corpus.json")
    raw = json.loads((data / "multihoprag_small_corpus.json").read_text())
    assert len(qa.questions) == 20
    assert len(qa.corpus) == len({(r["title"], r["body"]) for r in raw}) < len(raw)   # exact duplicates merged
    by_id = {d.id: d for d in qa.corpus}
    q = qa.questions[0]
    assert q.answers == ["Sam Bankman-Fried"] and q.type == "inference_query"
    assert len(q.gold_ids) >= 2 and all(g in by_id for g in q.gold_ids)
    assert not qa.warnings
    # the corpus file beside the data is found by name
    assert D.load(data / "multihoprag_small.json", "multihoprag").corpus_hash() == qa.corpus_hash()


def _musique_record(r, qid):
    """A MuSiQue-shaped record built from a real HotpotQA question."""
    sup = {t for t, _ in r["supporting_facts"]}
    return {"id": qid, "question": r["question"], "answer": r["answer"], "answer_aliases": [r["answer"].upper()],
            "answerable": True,
            "paragraphs": [{"idx": i, "title": t, "paragraph_text": "".join(s).strip(), "is_supporting": t in sup}
                           for i, (t, s) in enumerate(r["context"])]}


def test_musique(tmp_path, hotpot):
    path = tmp_path / "musique.jsonl"
    path.write_text("\n".join(json.dumps(_musique_record(r, f"{'2hop' if i % 2 else '3hop1'}__{i}_{i + 1}"))
                              for i, r in enumerate(hotpot[:6])))
    qa = D.load(path, "musique")
    assert [q.type for q in qa.questions] == ["3hop1", "2hop"] * 3
    q = qa.questions[1]
    a = hotpot[1]["answer"]
    assert q.answers == list(dict.fromkeys([a, a.upper()]))
    by_id = {d.id: d for d in qa.corpus}
    assert {by_id[g].title for g in q.gold_ids} == {t for t, _ in hotpot[1]["supporting_facts"]}
    # a JSON list loads the same
    lpath = tmp_path / "musique.json"
    lpath.write_text(json.dumps([json.loads(x) for x in path.read_text().splitlines()]))
    assert D.load(lpath, "musique").corpus_hash() == qa.corpus_hash()


def test_jsonl(tmp_path, hotpot):
    corpus, questions, seen = [], [], {}
    for i, r in enumerate(hotpot[:5]):
        for t, s in r["context"]:
            if t not in seen:
                seen[t] = f"doc{len(seen)}"
                corpus.append({"id": seen[t], "title": t, "text": "".join(s).strip()})
        questions.append({"question": r["question"], "answer": r["answer"],
                          "gold_ids": [seen[t] for t, _ in r["supporting_facts"]], "type": r["type"]})
    (tmp_path / "q.jsonl").write_text("\n".join(json.dumps(q) for q in questions))
    (tmp_path / "c.jsonl").write_text("\n".join(json.dumps(c) for c in corpus))
    qa = D.load(tmp_path / "q.jsonl", "jsonl", corpus=tmp_path / "c.jsonl")
    assert len(qa.questions) == 5 and len(qa.corpus) == len(corpus)
    assert qa.questions[2].gold_ids == questions[2]["gold_ids"]
    assert {d.id for d in qa.corpus} == {c["id"] for c in corpus}
    # a gold id missing from the corpus is reported, not silently counted
    questions[0]["gold_ids"].append("nope")
    (tmp_path / "q2.jsonl").write_text("\n".join(json.dumps(q) for q in questions))
    qa2 = D.load(tmp_path / "q2.jsonl", "jsonl", corpus=tmp_path / "c.jsonl")
    assert any("nope" in w for w in qa2.warnings) and "nope" not in qa2.questions[0].gold_ids


def test_shuffle_is_deterministic_and_breaks_adjacency(data, hotpot):
    a = D.load(hotpot_file(data), "hotpotqa", limit=40)
    b = D.load(hotpot_file(data), "hotpotqa", limit=40)
    c = D.load(hotpot_file(data), "hotpotqa", limit=40, seed=1)
    assert [d.id for d in a.corpus] == [d.id for d in b.corpus]
    assert a.corpus_hash() == b.corpus_hash() != c.corpus_hash()
    assert sorted(d.id for d in a.corpus) == sorted(d.id for d in c.corpus)
    # in the file, each question's 10 paragraphs sit together; after the shuffle its gold pair rarely does
    pos = {d.id: i for i, d in enumerate(a.corpus)}
    gaps = [abs(pos[q.gold_ids[0]] - pos[q.gold_ids[1]]) for q in a.questions]
    assert sum(g == 1 for g in gaps) <= 4
    assert sorted(gaps)[len(gaps) // 2] > 20


def test_bad_input(tmp_path, data):
    with pytest.raises(ValueError, match="format"):
        D.load(hotpot_file(data), "squad")
    with pytest.raises(ValueError, match="limit"):
        D.load(hotpot_file(data), "hotpotqa", limit=0)
    with pytest.raises(FileNotFoundError):
        D.load(tmp_path / "missing.json", "hotpotqa")
    (tmp_path / "q.jsonl").write_text(json.dumps({"question": "q?", "answer": "a", "gold_ids": []}))
    with pytest.raises(ValueError, match="corpus"):
        D.load(tmp_path / "q.jsonl", "jsonl")
    (tmp_path / "bad.json").write_text(json.dumps([{"question": "q?", "answer": "a"}]))
    with pytest.raises(ValueError, match="context"):
        D.load(tmp_path / "bad.json", "hotpotqa")
    (tmp_path / "garbage.json").write_text("{not json\n")
    with pytest.raises(ValueError, match="JSON"):
        D.load(tmp_path / "garbage.json", "musique")

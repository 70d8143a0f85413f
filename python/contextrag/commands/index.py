"""`contextrag index CORPUS --out DIR`: build an index from a folder of .txt/.md files, a JSONL file or
a JSON list (of strings or of objects with --text-field / --id-field / --title-field)."""
from __future__ import annotations

import json
import os
from pathlib import Path

TEXT_SUFFIXES = (".txt", ".md")


def add_arguments(p):
    p.add_argument("corpus", help="a folder of .txt/.md files, a .jsonl file, or a .json list")
    p.add_argument("--out", required=True, help="index directory to create or replace")
    p.add_argument("--text-field", default="text", help="field holding the text (JSON/JSONL; default text)")
    p.add_argument("--id-field", default="id", help="field holding the document id (default id; "
                   "absent: the record's position)")
    p.add_argument("--title-field", default="title", help="field holding the title (default title)")
    p.add_argument("--config", help="a JSON file of Config fields (see contextrag.config.Config)")
    p.add_argument("--llm", default="none", help="LLM for cluster summaries: 'none' (default), 'local', "
                   "'http://host:port/v1#MODEL', 'vllm:MODEL' (contextrag.llm.make_client)")
    p.add_argument("--json", action="store_true", help="print the index statistics as JSON")
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="build on Ray (contextrag[ray]): a local cluster, or the one at ADDRESS")


def _record(obj, i, args, where):
    if isinstance(obj, str):
        return {"id": str(i), "text": obj}
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: record {i} must be a string or an object, got {type(obj).__name__}")
    if args.text_field not in obj:
        raise ValueError(f"{where}: record {i} has no field {args.text_field!r} (--text-field); "
                         f"fields: {sorted(obj)[:10]}")
    doc = {"id": str(obj.get(args.id_field, i)), "text": obj[args.text_field]}
    title = obj.get(args.title_field)
    if title is not None:
        doc["title"] = str(title)
    meta = {k: v for k, v in obj.items() if k not in (args.text_field, args.id_field, args.title_field)
            and isinstance(v, (str, int, float, bool))}
    if meta:
        doc["metadata"] = meta
    return doc


def read_corpus(path, args) -> list[dict]:
    """Documents from a folder, a JSONL file or a JSON file (list, or dict of lists)."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"corpus {str(p)!r} does not exist")
    if p.is_dir():
        files = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in TEXT_SUFFIXES)
        if not files:
            raise ValueError(f"corpus folder {str(p)!r} holds no .txt or .md files")
        return [{"id": f.relative_to(p).as_posix(), "title": f.stem.replace("_", " "),
                 "text": f.read_text(errors="replace")} for f in files]
    if p.suffix.lower() == ".jsonl":
        docs = []
        with open(p) as fh:
            for ln, line in enumerate(fh):
                if line.strip():
                    try:
                        obj = json.loads(line)
                    except json.JSONDecodeError as e:
                        raise ValueError(f"corpus {p.name}: line {ln + 1} is not JSON ({e})") from None
                    docs.append(_record(obj, len(docs), args, p.name))
        return docs
    if p.suffix.lower() == ".json":
        try:
            data = json.loads(p.read_text())
        except json.JSONDecodeError as e:
            raise ValueError(f"corpus {p.name} is not valid JSON ({e})") from None
        if not isinstance(data, list):
            raise ValueError(f"corpus {p.name} must hold a JSON list of strings or objects")
        return [_record(o, i, args, p.name) for i, o in enumerate(data)]
    raise ValueError(f"corpus must be a folder, a .jsonl or a .json file, got {str(p)!r}")


def load_config(path):
    from contextrag.config import Config
    if path is None:
        return Config()
    try:
        d = json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"--config {path} is not valid JSON ({e})") from None
    if not isinstance(d, dict):
        raise ValueError(f"--config {path} must hold a JSON object of Config fields")
    d = {k: tuple(v) if k in ("rq_sizes", "theta") and isinstance(v, list) else v for k, v in d.items()}
    return Config.from_dict(d)


def run(args) -> int:
    from contextrag import ContextRAG
    docs = read_corpus(args.corpus, args)
    config = load_config(args.config)
    llm = None
    if args.llm and args.llm.lower() not in ("none", "off"):
        from contextrag.llm import make_client
        llm = make_client(args.llm)
    ray_kw = {} if getattr(args, "ray", None) is None else \
        {"executor": "ray", "ray_address": None if args.ray == "local" else args.ray}
    rag = ContextRAG.build(docs, path=os.fspath(args.out), config=config, llm=llm, **ray_kw)
    st = rag.stats()
    if args.json:
        print(json.dumps(st, indent=2, default=str))
    else:
        print(f"indexed {st['docs']} documents -> {st['chunks']} chunks, {st['items']} items "
              f"({', '.join(f'{k} {v}' for k, v in st['items_by_kind'].items())}), "
              f"{sum(v['count'] for v in st['nodes'].values())} concept nodes, "
              f"{sum(st['edges'].values())} edges -> {args.out} ({st['bytes_on_disk']} bytes)")
        print("seconds per stage: " + ", ".join(f"{k} {v:.2f}" for k, v in st["timings"].items()))
        print(f"graph-construction LLM tokens: {st['graph_llm_tokens']}; summaries: {st['summaries']}")
    return 0

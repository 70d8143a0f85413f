"""`contextrag index CORPUS --out DIR`: build an index from a folder of .txt/.md files, a JSONL file or
a JSON list (of strings or of objects with --text-field / --id-field / --title-field)."""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

from contextrag.textfile import TextFileWarning, decode, read_text

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
    """One corpus record as a document dict, or None (an empty text: skipped with a warning)."""
    if isinstance(obj, str):
        doc = {"id": str(i), "text": obj}
    elif not isinstance(obj, dict):
        raise ValueError(f"{where}: record {i} must be a string or an object, got {type(obj).__name__}")
    else:
        if args.text_field not in obj:
            raise ValueError(f"{where}: record {i} has no field {args.text_field!r} (--text-field); "
                             f"fields: {sorted(obj)[:10]}")
        text = obj[args.text_field]
        if not isinstance(text, str):
            raise ValueError(f"{where}: record {i} field {args.text_field!r} must be a string, "
                             f"got {type(text).__name__}")
        did = obj.get(args.id_field, i)
        if isinstance(did, bool) or not isinstance(did, (str, int)) or did == "":
            raise ValueError(f"{where}: record {i} field {args.id_field!r} must be a non-empty string or an "
                             f"integer, got {did!r}"[:300])
        doc = {"id": str(did), "text": text}
        title = obj.get(args.title_field)
        if title is not None:
            if not isinstance(title, (str, int, float)) or isinstance(title, bool):
                raise ValueError(f"{where}: record {i} field {args.title_field!r} must be a string, "
                                 f"got {type(title).__name__}")
            doc["title"] = str(title)
        meta = {k: v for k, v in obj.items() if k not in (args.text_field, args.id_field, args.title_field)
                and isinstance(v, (str, int, float, bool))}
        if meta:
            doc["metadata"] = meta
    if not doc["text"].strip():
        warnings.warn(f"{where}: record {i} (id {doc['id']!r}) has an empty text; skipped", TextFileWarning)
        return None
    return doc


def _unique(docs, where):
    seen: dict[str, int] = {}
    for i, d in enumerate(docs):
        if d["id"] in seen:
            raise ValueError(f"{where}: records {seen[d['id']]} and {i} share the id {d['id']!r}; "
                             "document ids must be unique")
        seen[d["id"]] = i
    return docs


def _parse_json(text, where):
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{where} is not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except RecursionError:
        raise ValueError(f"{where} is nested too deeply to be a corpus") from None


def read_corpus(path, args) -> list[dict]:
    """Documents from a folder, a JSONL file or a JSON file (list, or dict of lists).

    Binary files are skipped and other encodings decoded by detection (contextrag.textfile), each
    with a warning; empty texts are skipped with a warning; anything malformed is a ValueError that
    names the file and the record.
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"corpus {str(p)!r} does not exist")
    if p.is_dir():
        files = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in TEXT_SUFFIXES)
        if not files:
            raise ValueError(f"corpus folder {str(p)!r} holds no .txt or .md files")
        docs = []
        for f in files:
            text = read_text(f, f"corpus file {f.relative_to(p).as_posix()}")
            if text is None:
                continue
            if not text.strip():
                warnings.warn(f"corpus file {f.relative_to(p).as_posix()} is empty; skipped", TextFileWarning)
                continue
            docs.append({"id": f.relative_to(p).as_posix(), "title": f.stem.replace("_", " "), "text": text})
        if not docs:
            raise ValueError(f"corpus folder {str(p)!r} holds no readable text (every file was skipped)")
        return docs
    suffix = p.suffix.lower()
    if suffix not in (".jsonl", ".json"):
        raise ValueError(f"corpus must be a folder, a .jsonl or a .json file, got {str(p)!r}")
    raw = p.read_bytes()
    if not raw.strip():
        raise ValueError(f"corpus {p.name} is empty")
    text = decode(raw, f"corpus {p.name}")     # the bytes already read: no second read of the file
    if text is None:
        raise ValueError(f"corpus {p.name} is not a text file (see the warning above)")
    docs = []
    if suffix == ".jsonl":
        for ln, line in enumerate(text.splitlines()):
            if line.strip():
                obj = _parse_json(line, f"corpus {p.name}: line {ln + 1}")
                d = _record(obj, len(docs), args, f"{p.name} line {ln + 1}")
                if d is not None:
                    docs.append(d)
    else:
        data = _parse_json(text, f"corpus {p.name}")
        if not isinstance(data, list):
            raise ValueError(f"corpus {p.name} must hold a JSON list of strings or objects, "
                             f"got a JSON {type(data).__name__}")
        docs = [d for d in (_record(o, i, args, p.name) for i, o in enumerate(data)) if d is not None]
    if not docs:
        raise ValueError(f"corpus {p.name} holds no documents with text")
    return _unique(docs, f"corpus {p.name}")


def load_config(path):
    from contextrag.config import Config
    if path is None:
        return Config()
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"--config {path}: no such file")
    try:
        d = json.loads(p.read_bytes().decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise ValueError(f"--config {path} is not valid JSON ({e})") from None
    if not isinstance(d, dict):
        raise ValueError(f"--config {path} must hold a JSON object of Config fields")
    d = {k: tuple(v) if k in ("rq_sizes", "theta") and isinstance(v, list) else v for k, v in d.items()}
    try:
        return Config.from_dict(d)
    except (TypeError, ValueError) as e:
        raise ValueError(f"--config {path}: {e}") from None


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

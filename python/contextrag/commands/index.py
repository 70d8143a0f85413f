"""`contextrag index CORPUS... --out DIR`: build an index from a folder (walked recursively) or files:
PDF, HTML, Markdown, DOCX and text files (contextrag.ingest), a JSONL file or a JSON list (of strings or
of objects with --text-field / --id-field / --title-field). Unreadable files are skipped with one
warning each (``--strict``: an error)."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:      # contextrag.ingest is imported by the commands that read files, not by every command
    from contextrag.ingest import Fields



def add_corpus_arguments(p, *, what="corpus", root_help=None):
    """The options every command that reads documents shares (index, add)."""
    p.add_argument("--strict", action="store_true", help="an unreadable file is an error (default: skipped "
                   "with a warning)")
    p.add_argument("--root", help=root_help or "make document ids paths relative to this folder, which the "
                   "index remembers as its source folder (default: a folder's files get paths relative to "
                   "that folder, a file given by itself its name)")
    p.add_argument("--text-field", default="text", help="field holding the text (JSON/JSONL; default text)")
    p.add_argument("--id-field", default="id", help="field holding the document id (default id; "
                   "absent: the record's position)")
    p.add_argument("--title-field", default="title", help="field holding the title (default title)")


def add_arguments(p):
    p.add_argument("corpus", nargs="+", help="a folder (read recursively), or files: .pdf .html .md .docx .txt, "
                   "a .jsonl file or a .json list")
    p.add_argument("--out", required=True, help="index directory to create or replace")
    add_corpus_arguments(p)
    p.add_argument("--config", help="a JSON file of Config fields (see contextrag.config.Config)")
    p.add_argument("--llm", default="none", help="LLM for cluster summaries: 'none' (default), 'local', "
                   "'http://host:port/v1#MODEL', 'vllm:MODEL' (contextrag.llm.make_client)")
    p.add_argument("--json", action="store_true", help="print the index statistics as JSON")
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="build on Ray (contextrag[ray]): a local cluster, or the one at ADDRESS")


def fields_of(args) -> Fields:
    from contextrag.ingest import Fields
    return Fields(getattr(args, "text_field", "text"), getattr(args, "id_field", "id"),
                  getattr(args, "title_field", "title"))


def ingest(paths, args, *, file_roots=()):
    """contextrag.ingest.Ingested for ``paths`` with the command's options (``file_roots``: see
    contextrag.ingest.files)."""
    from contextrag.ingest import read_documents
    return read_documents(paths, root=getattr(args, "root", None), strict=bool(getattr(args, "strict", False)),
                          fields=fields_of(args), file_roots=file_roots)


def read_corpus(path, args) -> list[dict]:
    """Documents from a folder, files, a JSONL file or a JSON file (list): contextrag.ingest.

    Unreadable files are skipped with a warning (an error with ``args.strict``), other encodings
    decoded by detection (contextrag.textfile) with a warning; empty texts are skipped with a
    warning; anything malformed in a JSON corpus is a ValueError that names the file and the record.
    """
    return ingest(path, args).docs


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
    got = ingest(args.corpus, args)
    docs = got.docs
    config = load_config(args.config)
    llm = None
    if args.llm and args.llm.lower() not in ("none", "off"):
        from contextrag.llm import make_client
        llm = make_client(args.llm)
    ray_kw = {} if getattr(args, "ray", None) is None else \
        {"executor": "ray", "ray_address": None if args.ray == "local" else args.ray}
    rag = ContextRAG.build(docs, path=os.fspath(args.out), config=config, llm=llm, root=got.root, **ray_kw)
    st = rag.stats()
    if args.json:
        print(json.dumps(st, indent=2, default=str))
    else:
        if got.skipped:
            print(f"skipped {len(got.skipped)} unreadable files: "
                  + ", ".join(name for name, _ in got.skipped[:5]) + (" …" if len(got.skipped) > 5 else ""))
        print(f"indexed {st['docs']} documents -> {st['chunks']} chunks, {st['items']} items "
              f"({', '.join(f'{k} {v}' for k, v in st['items_by_kind'].items())}), "
              f"{sum(v['count'] for v in st['nodes'].values())} concept nodes, "
              f"{sum(st['edges'].values())} edges -> {args.out} ({st['bytes_on_disk']} bytes)")
        print("seconds per stage: " + ", ".join(f"{k} {v:.2f}" for k, v in st["timings"].items()))
        print(f"graph-construction LLM tokens: {st['graph_llm_tokens']}; summaries: {st['summaries']}")
    return 0

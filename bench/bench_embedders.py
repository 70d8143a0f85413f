#!/usr/bin/env python
"""The embedder backends side by side, in one process, on the same texts -> bench/results/embedders.json

    python bench/bench_embedders.py [--n 512] [--out embedders.json] [--only torch,torch-bf16,onnx-fp32]
        [--repeats 1]

Texts: the first ``n`` chunks ("title\\ntext", as the index embeds them) of HotpotQA-500's corpus in its
indexed (shuffled) order, chunked as the index does. Each variant embeds them all once after a
warm-up batch; reported: texts per second (wall and CPU seconds), and the cosine deviation
1 - cos(v, v_torch) from sentence-transformers on torch (max and mean). Variants:

* torch: sentence-transformers on PyTorch (its encode sorts by length), batch 16 / 64;
* torch-bf16: the ``torch-bf16`` backend, batch 64 (the fused forward of embed/bert_cpu.py where the
  extension has its kernels: one batch per thread), torch-bf16 in turn: the same forward with its
  batches one after another, each GEMM and kernel on every thread, and torch-bf16-autocast:
  sentence-transformers under bf16 autocast;
* onnx (fp32 export) on ONNX Runtime, length-sorted batches of 16 / 32 / 64, and 1 thread;
* onnx-int8 (dynamic int8 weights), batch 32;
* openvino: the same fp32 export compiled by OpenVINO (when installed), batch 32;
* static: the model2vec model distilled from MiniLM (when made), batch 1024.

``--only`` keeps the variants whose names start with one of the given prefixes; ``--repeats r`` runs
the kept ones r times, interleaved, and keeps each one's best (on a shared machine the neighbours
only ever add time). The machine may be shared: load averages before and after, and the machine
profile (``contextrag.machine``), are recorded beside the figures.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_index import DATA, cpu_seconds, machine, write  # noqa: E402


def corpus_texts(n: int) -> list[str]:
    from contextrag import Config
    from contextrag.eval import datasets as ds
    from contextrag.index.build import embed_inputs, make_chunker
    from contextrag.index.chunking import normalize_docs
    from contextrag.embed.embedder import Embedder
    qa = ds.load(DATA / "hotpotqa_500.json", "hotpotqa")
    docs = normalize_docs(qa.docs_for_index())
    chunker = make_chunker(Config(), Embedder(backend="onnx"))
    chunks = []
    for d in docs:
        chunks.extend(chunker.split(d))
        if len(chunks) >= n:
            break
    chunks = chunks[:n]
    return embed_inputs([c.title for c in chunks], [c.text for c in chunks], Config())


def timed(fn, texts):
    fn(texts[:8])                                   # warm-up: first-run allocations, lazy loads
    t, c = time.perf_counter(), cpu_seconds()
    E = np.asarray(fn(texts), dtype=np.float32)
    wall, cpu = time.perf_counter() - t, cpu_seconds() - c
    E /= np.maximum(np.linalg.norm(E, axis=1, keepdims=True), 1e-12)
    return E, wall, cpu


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=512)
    p.add_argument("--out", default="embedders.json")
    p.add_argument("--only", default="", help="comma-separated variant-name prefixes (default: all)")
    p.add_argument("--repeats", type=int, default=1)
    args = p.parse_args(argv)
    only = tuple(x for x in args.only.split(",") if x)
    todo = []
    from contextrag.embed.embedder import Embedder, resolve_model
    from contextrag.embed.onnx import OnnxEncoder, ensure_export
    texts = corpus_texts(args.n)
    out = {"benchmark": "embedders_side_by_side", "machine": machine(), "texts": len(texts),
           "corpus": "hotpotqa_500.json (first chunks in indexed order)",
           "mean_chars": float(np.mean([len(t) for t in texts])), "variants": {}}
    path = resolve_model("all-MiniLM-L6-v2")
    ref = None

    def record(name, fn, **extra):
        if not only or name.startswith(only):
            todo.append((name, fn, extra))

    def measure(name, fn, **extra):
        nonlocal ref
        E, wall, cpu = timed(fn, texts)
        old = out["variants"].get(name)
        if old is not None and old["seconds"] <= wall:
            return
        if ref is None:
            ref = E
        # texts per CPU-second (all threads): on a shared machine wall time measures the neighbours
        # too, CPU time much less so; texts_per_s is wall-clock
        row = {"texts_per_s": len(texts) / wall, "texts_per_cpu_s": len(texts) / cpu, "seconds": wall,
               "cpu_seconds": cpu, "niceness": os.nice(0), **extra}
        if E.shape == ref.shape:
            dev = 1.0 - (E * ref).sum(1)
            row.update({"cos_dev_max": float(dev.max()), "cos_dev_mean": float(dev.mean())})
        row["load_1min"] = os.getloadavg()[0]
        out["variants"][name] = row
        print(f"{name:24s} {row['texts_per_s']:8.1f} texts/s {row['texts_per_cpu_s']:8.1f} texts/cpu-s  dev max {row.get('cos_dev_max', float('nan')):.2e}"
              f"  load {os.getloadavg()[0]:.1f}", flush=True)

    st = Embedder(backend="torch", device="cpu").load().model
    import torch
    for bs in (64, 16):
        record(f"torch bs{bs}", lambda x, bs=bs: st.encode(x, batch_size=bs, normalize_embeddings=True),
               batch=bs, threads=torch.get_num_threads())
    bf16 = Embedder(backend="torch-bf16", device="cpu")
    bf16.load()
    record("torch-bf16 bs64", bf16.embed_passages, batch=64, threads=torch.get_num_threads(),
           fused_forward=bf16._bert_bf16() is not None)
    in_turn = Embedder(backend="torch-bf16", device="cpu")
    in_turn_fast = in_turn._bert_bf16()
    if in_turn_fast is not None:
        in_turn_fast.workers = 1                    # batches one after another, each op on every thread
        record("torch-bf16 bs64 in turn", in_turn.embed_passages, batch=64, threads=torch.get_num_threads())
    autocast = Embedder(backend="torch-bf16", device="cpu")
    autocast._fast = False                          # sentence-transformers under autocast, not embed/bert_cpu.py
    record("torch-bf16-autocast bs64", autocast.embed_passages, batch=64, threads=torch.get_num_threads())
    for variant, batches in (("fp32", (32, 16, 64)), ("int8", (32,))):
        enc = OnnxEncoder(ensure_export(path, variant))
        for bs in batches:
            record(f"onnx-{variant} bs{bs}", lambda x, bs=bs, enc=enc: enc.encode(x, batch_size=bs), batch=bs)
    one = OnnxEncoder(ensure_export(path, "fp32"), threads=1)
    record("onnx-fp32 bs32 1 thread", lambda x: one.encode(x, batch_size=32), batch=32, threads=1)
    try:
        import openvino as ov
        folder = ensure_export(path, "fp32")
        compiled = ov.Core().compile_model(str(folder / "model.onnx"), "CPU")
        enc = OnnxEncoder(folder)
        enc._runner = _OpenVINORunner(compiled)
        # the export is fp32; OpenVINO's CPU plugin runs it in its default inference precision, bf16 on
        # a CPU with AMX or AVX512-BF16 (recorded)
        record("openvino-fp32 bs32", lambda x: enc.encode(x, batch_size=32), batch=32, openvino=ov.__version__,
               inference_precision=str(compiled.get_property("INFERENCE_PRECISION_HINT")))
    except ImportError:
        out["variants"]["openvino-fp32 bs32"] = {"skipped": "openvino is not installed"}
    try:
        from contextrag.embed.static import StaticEncoder, ensure_static
        senc = StaticEncoder(ensure_static(path))
        record("static bs1024", lambda x: senc.encode(x, batch_size=1024), batch=1024, dim=senc.dim)
    except ImportError as e:
        out["variants"]["static bs1024"] = {"skipped": str(e)}
    for _ in range(max(1, args.repeats)):
        for name, fn, extra in todo:
            measure(name, fn, **extra)
    base = out["variants"].get("torch bs64") or next(iter(out["variants"].values()))
    out["speedups_against"] = next(k for k, v in out["variants"].items() if v is base)
    for row in out["variants"].values():
        if "texts_per_s" in row:
            row["speedup_vs_torch_bs64"] = row["texts_per_s"] / base["texts_per_s"]
            row["cpu_speedup_vs_torch_bs64"] = row["texts_per_cpu_s"] / base["texts_per_cpu_s"]
    import onnxruntime
    out["versions"] = {"onnxruntime": onnxruntime.__version__}
    write(args.out, out)
    return 0


class _OpenVINORunner:
    """OpenVINO's compiled model behind the onnxruntime ``run`` call OnnxEncoder makes."""

    def __init__(self, compiled):
        self.compiled = compiled

    def run(self, _names, feed):
        return [self.compiled(feed)[0]]


if __name__ == "__main__":
    sys.exit(main())

"""The "embedding" group: stage 1b (the packaged MiniLM) on the device, then stages 2–3 on its vectors.
Not in the default run: the device has no copy of the model package."""
from __future__ import annotations

import json
import sys
import time

from .common import REPO, Ctx
from .graph import graph_stages


EMBED_TEXTS = {True: 48, False: 50_000}      # texts embedded: smoke, device
EMBED_BATCH = {True: 16, False: 1024}


def embedding_texts(n: int) -> list[str]:
    """n chunk-sized texts ("title\ntext") from HotpotQA passages ($CONTEXTRAG_DATA, the shared
    data beside the repository, or the test fixture), repeated with a numbered suffix past the
    corpus (a repeat must not be an exact duplicate that a cache could serve)."""
    sys.path.insert(0, str(REPO / "tests"))
    from shared_data import hotpot_file
    base = []
    for q in json.loads(hotpot_file().read_text()):
        for title, sents in q["context"]:
            base.append(f"{title}\n{''.join(sents)}")
    base = list(dict.fromkeys(base))
    return [base[i % len(base)] + ("" if i < len(base) else f" ({i // len(base)})") for i in range(n)]


def group_embedding(ctx: Ctx):
    """Stage 1b on the device: the packaged MiniLM through sentence-transformers in fp16 at a large
    batch (chunks/s), then stages 2–3 on the same vectors, for one end-to-end build rate
    (chunks / (embed + graph seconds)). CPU smoke: fp32 on the CPU, tiny batch, graph on "cpu"."""
    try:
        from contextrag.embed.embedder import Embedder
        emb = Embedder(backend="torch", device=str(ctx.dev))
        st = emb.load().model
    except ImportError as e:
        ctx.out["skipped"] = f"the embedder is not installed here ({e}); pip install 'contextrag[index]'"
        return
    torch = ctx.torch
    fp16 = ctx.dev.type == "cuda"
    if fp16:
        st.half()
    texts = embedding_texts(EMBED_TEXTS[ctx.smoke])
    bs = EMBED_BATCH[ctx.smoke]
    holder = {}

    def embed():
        st.encode(texts[:bs], batch_size=bs)            # warm-up: kernels, allocator
        ctx.sync()
        t0 = time.perf_counter()
        E = st.encode(texts, batch_size=bs, convert_to_tensor=True, normalize_embeddings=True)
        ctx.sync()
        s = time.perf_counter() - t0
        holder["X"] = torch.nn.functional.normalize(E.float(), dim=1).contiguous()
        return {"texts": len(texts), "batch": bs, "dtype": "float16" if fp16 else "float32",
                "seconds": s, "chunks_per_s": len(texts) / s, "dim": int(E.shape[1])}

    ctx.step("embed", embed)
    if "X" not in holder:
        return
    e = ctx.out["embed"]
    # the smoke run checks the wiring on the CPU kernels; the Triton interpreter is the graph group's
    for b in (["cpu"] if ctx.smoke else (ctx.backends or ["cpu"])):
        def run(b=b):
            r = graph_stages(ctx, holder["X"], b)
            total = e["seconds"] + r["total_s"]
            return {**r, "embed_s": e["seconds"], "end_to_end_s": total,
                    "end_to_end_chunks_per_s": len(texts) / total}

        ctx.step(f"build/{b}", run)

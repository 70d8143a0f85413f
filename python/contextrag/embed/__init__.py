"""contextrag.embed: the sentence embedders (stage 1b of §4.1). ``embedder.Embedder`` picks a backend
(torch, ONNX Runtime fp32/int8, a distilled static model) and loads it lazily; ``onnx`` and ``static``
make and run the exported models, which ``model_cache`` keeps on disk."""

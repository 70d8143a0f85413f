"""Triton kernels, one module per op family; installed as contextrag.kernels."""

"""The GPU check, one module per group; bench/gpu_check.py is the entry point."""

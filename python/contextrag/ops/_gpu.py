"""GPU registrations (Triton and CUDA implementations of the ops): added by the GPU kernels work."""

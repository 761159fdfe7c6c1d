"""The triton backend: fused kernels that rank each list in registers (see :mod:`torchrank.functional.backends`)."""

"""The numpy backend: CPU tensors ranked by numpy's SIMD sorts of packed keys (:mod:`torchrank.functional.backends`)."""

"""kael.backends: torch.backends' switches and queries that scripts touch on any machine
(PyTorch's MNIST example asks backends.mps.is_available(); nanoGPT sets
backends.cuda.matmul.allow_tf32 and backends.cudnn.allow_tf32)."""
from . import cuda, cudnn, mps  # noqa: F401

__all__ = ["cuda", "cudnn", "mps"]

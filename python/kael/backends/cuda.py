"""kael.backends.cuda: `matmul.allow_tf32` is torch's other spelling of the float32 matmul
precision, as in torch: True sets it to "high", False to "highest", and it reads True whenever
the precision is not "highest" (kael.set_float32_matmul_precision)."""
from .. import _kael

__all__ = ["matmul"]


class _Matmul:
    # torch keeps these two as plain switches of its own; kael's products ignore them.
    allow_fp16_reduced_precision_reduction = True
    allow_bf16_reduced_precision_reduction = True

    @property
    def allow_tf32(self) -> bool:
        return _kael.get_float32_matmul_precision() != "highest"

    @allow_tf32.setter
    def allow_tf32(self, value: bool) -> None:
        _kael.set_float32_matmul_precision("high" if value else "highest")


matmul = _Matmul()

"""Iter and LearningRate on a GPU: their operand is a one-element counter, so the update
is computed on the host (the CPU kernels' own code) and copied back to the GPU; one
scalar's round trip per step, where a kernel launch would cost about as much."""

from __future__ import annotations

from netbrew.cuda import to_gpu, to_host
from netbrew.operators.schema import kernel as register
from netbrew.operators.train import iter_cpu, learning_rate_cpu


@register("Iter", device="cuda")
def iter_cuda(counter):
    (out,) = iter_cpu(to_host(counter))
    return (to_gpu(out, device=None),)


@register("LearningRate", device="cuda")
def learning_rate_cuda(counter, **attrs):
    (lr,) = learning_rate_cpu(to_host(counter), **attrs)
    return (to_gpu(lr, device=None),)

"""CopyCPUToGPU and CopyGPUToCPU: the explicit copies the placement pass puts where a blob
crosses devices, so they print, profile and save like any op (DESIGN §6).

Both run in their GPU's context (the placement pass gives them its device option). On
the CPU device (a placed net with its device options cleared, as ONNX export runs it) a
copy stays in host memory. Exported to ONNX as Identity, since ONNX has no devices. Each
one's gradient is the other copy.
"""

from __future__ import annotations

from netbrew.netdef.net import op_def
from netbrew.operators.schema import gradient, kernel, schema

schema(
    "CopyCPUToGPU",
    dtypes="any",
    onnx=False,
    doc="Y = X copied from host memory to the op's GPU (a pycuda GPUArray); same shape, dtype",
)
schema(
    "CopyGPUToCPU",
    dtypes="any",
    onnx=False,
    doc="Y = X copied from its GPU to host memory (a NumPy array); same shape and dtype",
)


@kernel("CopyCPUToGPU", device="cuda")
def copy_cpu_to_gpu_cuda(x):
    from netbrew.cuda import to_gpu

    return (to_gpu(x, device=None),)  # the GPU whose context the executor made current


@kernel("CopyGPUToCPU", device="cuda")
def copy_gpu_to_cpu_cuda(x):
    from netbrew.cuda import to_host

    return (to_host(x),)


@kernel("CopyCPUToGPU")
def copy_cpu_to_gpu_cpu(x):
    return (x.get() if hasattr(x, "gpudata") else x,)


kernel("CopyGPUToCPU")(copy_cpu_to_gpu_cpu)


@gradient("CopyCPUToGPU")
def copy_cpu_to_gpu_grad(op, g_out, g_in):
    return [op_def("CopyGPUToCPU", [g_out[0]], [g_in[0]], device=op.device_option)]


@gradient("CopyGPUToCPU")
def copy_gpu_to_cpu_grad(op, g_out, g_in):
    return [op_def("CopyCPUToGPU", [g_out[0]], [g_in[0]], device=op.device_option)]

"""FusedElementwise on the GPU: the chain's steps run one after another with the step ops'
own CUDA kernels (netbrew.operators.KERNELS[(step, "cuda")]), so its results equal those
of the unfused ops on the GPU. The chain is decoded as the CPU kernel decodes it (the same
cached plan, the same errors); each step is called as the executor calls a kernel: its
inputs checked against the step's schema, its attributes (the recorded ones, the rest
defaulted) by name. A step whose op has no CUDA kernel is an error that names it.

This saves no memory traffic over the unfused ops (one launch per step, an array per
step); a single generated kernel per chain would.
"""

from __future__ import annotations

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.fused_elementwise import ABSENT, STEP, _plan
from netbrew.operators.schema import KERNELS, get_schema
from netbrew.operators.schema import kernel as register


def step_kernel(op: str, k: int):
    """The CUDA kernel of step k's op; SchemaError naming the op when there is none."""
    fn = KERNELS.get((op, "cuda"))
    if fn is None:
        raise SchemaError(
            f"step {k} ({op}): {op} has no CUDA kernel, so this FusedElementwise cannot run "
            "on the GPU (place it on the CPU, or unfuse the chain)"
        )
    return fn


@register("FusedElementwise", device="cuda")
def fused_elementwise_cuda(*inputs, ops, slots, results=(), params=(), blobs=(), names=()):
    plan = _plan(tuple(ops), tuple(slots), tuple(params), len(inputs), tuple(results))
    kernels = [step_kernel(op, k) for k, (op, _, _) in enumerate(plan.steps)]  # all, up front
    values = []
    for k, ((op, where, attrs), fn) in enumerate(zip(plan.steps, kernels)):
        args = [values[STEP - c] if c <= STEP else None if c == ABSENT else inputs[c]
                for c in where]  # fmt: skip
        while args and args[-1] is None:  # trailing omitted optionals (Clip's bounds)
            args.pop()
        schema = get_schema(op)
        given = schema.parse_attrs(attrs, f"FusedElementwise step {k} ({op})")
        try:
            schema.check_dtypes(args)
            values.append(fn(*args, **given)[0])
        except (SchemaError, ShapeError) as e:
            raise type(e)(f"step {k} ({op}): {e}") from e
    return tuple(values[o] for o in plan.outputs)

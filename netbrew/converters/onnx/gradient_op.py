"""ONNX's preview-training Gradient op, imported as the gradient ops autodiff writes.

`Gradient(xs=[...], zs=[...], y="Y")(*xs, *zs)` answers dY/dx for each x of xs, the
gradient of the sum of Y's elements, with the zs held constant. netbrew builds gradients
as ops (netbrew.netdef.autodiff), so the importer replaces each Gradient node by the
backward pass of the ops before it, from Y to the xs, seeded with ones, and copies each
gradient to the node's output (zeros where Y does not depend on that x). The result is a
training net: exporting it to ONNX again gives its gradient ops, which ONNX has no nodes
for, so the export refuses it as it refuses any net with gradient ops.
"""

from __future__ import annotations

from netbrew.errors import ModelLoadError
from netbrew.netdef.args import args_dict
from netbrew.netdef.autodiff import add_gradient_ops
from netbrew.operators.onnx_training import DOMAIN
from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef


def is_gradient_node(op: OperatorDef) -> bool:
    return op.type == "Gradient" and op.domain == DOMAIN


def expand_gradient_ops(net: NetDef) -> None:
    """Replaces every preview-domain Gradient op of `net` (in place) by gradient ops."""
    while True:
        index = next((i for i, op in enumerate(net.op) if is_gradient_node(op)), None)
        if index is None:
            return
        ops = _expand(net, index)
        del net.op[index]
        for k, op in enumerate(ops):
            net.op.insert(index + k, op)


def _expand(net: NetDef, index: int) -> list[OperatorDef]:
    node = net.op[index]
    where = f"op #{index} Gradient" + (f" {node.name!r}" if node.name else "")
    args = args_dict(node.arg)
    xs, zs, y = list(args.get("xs") or []), list(args.get("zs") or []), args.get("y")
    if not y or not xs:
        raise ModelLoadError(f"{where}: attributes 'xs' and 'y' are required")
    if list(node.input) != xs + zs:
        raise ModelLoadError(
            f"{where}: its inputs must be xs then zs, {xs + zs}, got {list(node.input)}"
        )
    if len(node.output) > len(xs):
        raise ModelLoadError(f"{where}: {len(node.output)} outputs for {len(xs)} xs")
    forward = NetDef(name=f"{net.name}_gradient_{index}")
    forward.op.extend(net.op[:index])  # earlier Gradient nodes are expanded already
    produced = {o for op in forward.op for o in op.output}
    if y not in produced:
        raise ModelLoadError(f"{where}: y {y!r} is not computed by an op before it")
    grads = add_gradient_ops(forward, [y], wrt=xs)
    new_ops = list(forward.op[index:])
    taken = {name for op in net.op for name in [*op.input, *op.output]} | set(net.external_input)
    renames = _fresh_names(new_ops, taken, f"__gradient{index}")
    for op in new_ops:
        op.input[:] = [renames.get(n, n) for n in op.input]
        op.output[:] = [renames.get(n, n) for n in op.output]
    for x, out in zip(xs, node.output):
        if not out:
            continue
        source = grads.get(x)
        if source is None:  # Y does not depend on x: its gradient is zeros
            zero = OperatorDef(type="ConstantFill", input=[x], output=[out])
            zero.arg.add(name="value", f=0.0)
            new_ops.append(zero)
        else:
            new_ops.append(OperatorDef(type="Copy", input=[renames.get(source, source)],
                                       output=[out]))  # fmt: skip
    for op in new_ops:
        op.is_gradient_op = True
    return new_ops


def _fresh_names(ops: list[OperatorDef], taken: set[str], suffix: str) -> dict[str, str]:
    """New names for the blobs `ops` write that the net already uses elsewhere."""
    renames = {}
    for op in ops:
        for name in op.output:
            if name and name in taken and name not in renames:
                renames[name] = f"{name}{suffix}"
    return renames

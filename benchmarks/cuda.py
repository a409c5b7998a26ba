"""netbrew CUDA beside PyTorch CUDA (eager), on the same GPU in the same run.

- Inference of the light-zoo ResNet-50 at batch 1 and 32: netbrew's Predictor(device=
  "cuda") against the same weights in PyTorch (netbrew.converters.module.to_torch).
- A training step of the demo CNN (batch 64) and of a ResNet-18-sized net (batch 64,
  32x32 images), in netbrew (the model on the GPU via run_all_on) and in PyTorch.
- Peak GPU memory of each (the growth of netbrew's memory pool for netbrew,
  torch.cuda.max_memory_allocated for PyTorch).

Each step is synchronized. netbrew and PyTorch alternate: --rounds rounds of --reps steps
each, after warm-up; the table gives the medians of the rounds' medians and the median of
the rounds' ratios, so that a slow spell of the host (both sides issue kernels from
Python, and the small nets wait on the host) falls on both. Writes benchmarks/CUDA.md.
Needs a GPU, pycuda (tools/gpu_env.sh builds it on a machine without network) and torch.

    python benchmarks/cuda.py [--reps 10] [--rounds 5]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


ROUNDS = 5
PROFILE = False  # --profile: per-op GPU times (each op synchronized) after the table
PROFILES: list[tuple[str, object]] = []


def median_ms(step, reps: int, sync, warmup: int = 3) -> float:
    for _ in range(warmup):
        step()
    sync()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def paired_ms(ours, theirs, reps: int, rounds: int) -> tuple[float, float, float]:
    """(netbrew ms, PyTorch ms, ratio): `ours` and `theirs` ((step, sync) pairs) alternate
    over `rounds` rounds of `reps` steps; medians of the rounds' medians and of their
    ratios."""
    for step, sync in (ours, theirs):
        median_ms(step, 1, sync)  # warm-up
    a, b = [], []
    for _ in range(rounds):
        a.append(median_ms(ours[0], reps, ours[1], warmup=1))
        b.append(median_ms(theirs[0], reps, theirs[1], warmup=1))
    ratio = statistics.median(x / y for x, y in zip(a, b))
    return statistics.median(a), statistics.median(b), ratio


class GpuMemory:
    """netbrew's peak device memory over a row: its memory pool, emptied of kept blocks at
    the start, only grows while it keeps freed ones, so the bytes it manages at the end,
    less those at the start, are the row's peak (to the pool's size classes)."""

    def __init__(self) -> None:
        from netbrew.cuda import activate, memory_pool

        activate(0)
        self.pool = memory_pool(0)
        self.pool.free_held()  # blocks an earlier row kept
        self.start = self.pool.managed_bytes

    @property
    def peak_mib(self) -> float:
        return (self.pool.managed_bytes - self.start) / 2**20


def any_batch(model):
    """`model` with its Reshape targets of batch 1 (the light zoo's [1, 2048]) made -1."""
    from onnx import numpy_helper

    targets = {node.input[1] for node in model.graph.node if node.op_type == "Reshape"}
    for tensor in model.graph.initializer:
        if tensor.name in targets:
            shape = numpy_helper.to_array(tensor).copy()
            shape[0] = -1
            tensor.CopyFrom(numpy_helper.from_array(shape, tensor.name))
    for node in model.graph.node:
        if node.op_type == "Constant" and node.output[0] in targets:
            value = node.attribute[0]
            shape = numpy_helper.to_array(value.t).copy()
            shape[0] = -1
            value.t.CopyFrom(numpy_helper.from_array(shape))
    return model


def resnet50_inference(batch: int, reps: int, rounds: int) -> dict:
    import onnx
    import torch
    from zoo import model_path

    import netbrew as nb
    from netbrew import cuda
    from netbrew.converters.module import to_torch
    from netbrew.converters.onnx import import_model

    init, predict = import_model(any_batch(onnx.load(model_path("resnet50"))))
    x = np.random.default_rng(0).random((batch, 3, 224, 224), dtype=np.float32)
    memory = GpuMemory()
    ours = nb.Predictor(init, predict, device="cuda", strict=True)
    name = ours.input_names[0]
    module = to_torch(init, predict).cuda().eval()
    xt = torch.from_numpy(x).cuda()
    torch.cuda.reset_peak_memory_stats()
    with torch.no_grad():  # NumPy in and out, as Predictor.run

        def run_theirs():
            module(torch.from_numpy(x).cuda()).cpu()

        ours_ms, theirs_ms, ratio = paired_ms(
            (lambda: ours.run({name: x}), cuda.synchronize),
            (run_theirs, torch.cuda.synchronize),
            reps,
            rounds,
        )
        with tf32():
            theirs_tf32_ms = median_ms(run_theirs, reps, torch.cuda.synchronize)
        agree = np.allclose(ours.run({name: x})[ours.output_names[0]],
                            module(xt).cpu().numpy(), atol=1e-3)  # fmt: skip
    if PROFILE:
        PROFILES.append((f"ResNet-50 inference, batch {batch}", ours.profile({name: x}, 3)))
    return {"what": f"ResNet-50 inference, batch {batch}", "netbrew_ms": ours_ms,
            "torch_ms": theirs_ms, "ratio": ratio, "torch_tf32_ms": theirs_tf32_ms,
            "netbrew_mib": memory.peak_mib, "torch_mib": torch.cuda.max_memory_allocated() / 2**20,
            "agree": agree}  # fmt: skip


def resnet18_like(model, data: str = "data") -> str:
    """A ResNet-18-sized net for 32x32 images: a stem, 4 stages of 2 basic blocks."""
    from netbrew import brew

    x = brew.relu(model, brew.spatial_bn(model, brew.conv(model, data, "stem", 3, 64, kernel=3,
                  pad=1, no_bias=True), "stem_bn", 64), "stem_relu")  # fmt: skip
    channels = 64
    for stage, width in enumerate((64, 128, 256, 512)):
        for block in range(2):
            stride = 2 if stage and not block else 1
            tag = f"s{stage}b{block}"
            y = brew.conv(model, x, f"{tag}_c1", channels, width, kernel=3, pad=1, stride=stride,
                          no_bias=True)  # fmt: skip
            y = brew.relu(model, brew.spatial_bn(model, y, f"{tag}_bn1", width), f"{tag}_r1")
            y = brew.conv(model, y, f"{tag}_c2", width, width, kernel=3, pad=1, no_bias=True)
            y = brew.spatial_bn(model, y, f"{tag}_bn2", width)
            if stride != 1 or channels != width:
                x = brew.conv(model, x, f"{tag}_down", channels, width, kernel=1, stride=stride,
                              no_bias=True)  # fmt: skip
            x = brew.relu(model, brew.sum(model, [y, x], f"{tag}_sum"), f"{tag}_out")
            channels = width
    pool = brew.global_avg_pool(model, x, "pool")
    return brew.fc(model, brew.flatten(model, pool, "flat"), "logits", 512, 10)


def netbrew_training_step(kind: str, batch: int):
    """(step, memory): one training step of `kind` on the GPU, and the GpuMemory that
    counts it (the parameters too, as torch.cuda.max_memory_allocated does)."""
    from netbrew import brew
    from netbrew.brew import ModelHelper
    from netbrew.demo import training_model
    from netbrew.executor import Workspace

    if kind == "demo":
        model, shape = training_model(), (batch, 1, 8, 8)
    else:
        model, shape = ModelHelper("resnet18", seed=0), (batch, 3, 32, 32)
        softmax = brew.softmax(model, resnet18_like(model), "softmax")
        xent = model.net.LabelCrossEntropy([softmax, "label"], "xent")
        model.add_gradient_operators([model.net.AveragedLoss(xent, "loss")])
        brew.optimizer.build_sgd(model, 0.05, momentum=0.9, weight_decay=1e-4)
    model.run_all_on("cuda:0")
    rng = np.random.default_rng(0)
    memory = GpuMemory()
    ws = Workspace()
    ws.run_net_once(model.param_init_net)
    ws.feed_blob("data", rng.random(shape, dtype=np.float32), device="cuda:0")
    ws.feed_blob("label", rng.integers(0, 10, batch).astype(np.int32), device="cuda:0")
    ws.create_net(model.net)
    if PROFILE:
        PROFILES.append((f"{kind} training step", ws.run_net(model.net.name, profile=True)))
    return (lambda: ws.run_net(model.net.name)), memory


def torch_training_step(kind: str, batch: int):
    """One PyTorch training step of `kind` (peak memory counted from here)."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    if kind == "demo":
        net, shape = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10),
        ), (batch, 1, 8, 8)  # fmt: skip
    else:
        net, shape = _torch_resnet18_like(), (batch, 3, 32, 32)
    net = net.cuda()
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                          weight_decay=1e-4)  # fmt: skip
    x = torch.rand(shape, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")
    torch.cuda.reset_peak_memory_stats()

    def step():
        opt.zero_grad()
        nn.functional.cross_entropy(net(x), y).backward()
        opt.step()

    return step


def training_row(kind: str, what: str, reps: int, rounds: int) -> dict:
    import torch

    from netbrew import cuda

    ours, memory = netbrew_training_step(kind, 64)
    theirs = torch_training_step(kind, 64)
    ours_ms, theirs_ms, ratio = paired_ms(
        (ours, cuda.synchronize), (theirs, torch.cuda.synchronize), reps, rounds
    )
    with tf32():
        theirs_tf32_ms = median_ms(theirs, reps, torch.cuda.synchronize)
    return {"what": what, "netbrew_ms": ours_ms, "torch_ms": theirs_ms, "ratio": ratio,
            "torch_tf32_ms": theirs_tf32_ms, "netbrew_mib": memory.peak_mib,
            "torch_mib": torch.cuda.max_memory_allocated() / 2**20}  # fmt: skip


@contextlib.contextmanager
def tf32():
    """PyTorch's TF32 tensor cores on (its default for convs); off otherwise, so that both
    sides compute in float32, as netbrew does."""
    import torch

    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False


def _torch_resnet18_like():
    from torch import nn

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout),
            )  # fmt: skip
            self.down = (nn.Conv2d(cin, cout, 1, stride, bias=False)
                         if stride != 1 or cin != cout else nn.Identity())  # fmt: skip

        def forward(self, x):
            return nn.functional.relu(self.body(x) + self.down(x))

    layers = [nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU()]
    cin = 64
    for stage, width in enumerate((64, 128, 256, 512)):
        for block in range(2):
            layers.append(Block(cin, width, 2 if stage and not block else 1))
            cin = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 10)]
    return nn.Sequential(*layers)


def render(rows: list[dict], device: str) -> str:
    lines = [
        "# netbrew CUDA vs PyTorch CUDA",
        "",
        f"Generated by `python benchmarks/cuda.py` on {datetime.date.today()}, {device}.",
        "",
        "Both sides compute in float32 (PyTorch with TF32 off; its TF32 time, the default for "
        "its convs, is given beside). Inference takes NumPy in and gives NumPy out on both "
        "sides, as Predictor.run does; training steps start from data on the GPU. The two "
        f"alternate over {ROUNDS} rounds: times are medians of the rounds' medians, the "
        "ratio the median of the rounds' ratios.",
        "",
        "| what | netbrew ms | PyTorch ms | netbrew / PyTorch | PyTorch TF32 ms | "
        "netbrew peak MiB | PyTorch peak MiB |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = r["ratio"]
        lines.append(f"| {r['what']} | {r['netbrew_ms']:.2f} | {r['torch_ms']:.2f} | "
                     f"{ratio:.2f} | {r['torch_tf32_ms']:.2f} | {r['netbrew_mib']:.0f} | "
                     f"{r['torch_mib']:.0f} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=10, help="steps per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="print per-op GPU times too")
    args = parser.parse_args()
    global PROFILE, ROUNDS
    PROFILE, ROUNDS = args.profile, args.rounds
    import torch

    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    from netbrew import cuda

    if not cuda.is_available():
        try:
            cuda.require(0)
        except cuda.DeviceError as e:
            print(f"benchmarks/cuda.py needs a GPU: {e}", file=sys.stderr)
        return 2
    rows = [resnet50_inference(batch, args.reps, args.rounds) for batch in (1, 32)]
    for kind, what in (("demo", "demo CNN training step, batch 64"),
                       ("resnet18", "ResNet-18-sized training step, batch 64")):  # fmt: skip
        rows.append(training_row(kind, what, args.reps, args.rounds))
    table = render(rows, cuda.device_name(0))
    print(table)
    (HERE / "CUDA.md").write_text(table)
    for what, profile in PROFILES:
        print(f"\n## {what}\n\n{profile.table()}\n\n{profile.op_table(12)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

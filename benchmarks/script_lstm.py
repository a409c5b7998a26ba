"""A custom LSTM (its own gate math, a Python loop over time) three ways, on the CPU:

- netbrew.script: one Loop op whose body is the cell (the net runs any sequence length),
  its gate math fused into one FusedElementwise by the elementwise-fusion pass;
- the same Loop with its body left unfused (the level-1 passes only), to show the fusion;
- the same module unrolled by `trace` (one copy of the cell per time step, fixed length);
- PyTorch eager, the same weights and math.

The netbrew nets run through Predictor (inference passes on, but for the unfused row). The
four alternate in one process, run after run, so that a slow spell of the shared machine
falls on all of them; the table gives medians and minimums, and the ratios to PyTorch.

    python benchmarks/script_lstm.py [--steps 20 50] [--batch 8] [--hidden 64] [--reps 60]
        [--out benchmarks/SCRIPT.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import time

import numpy as np

import netbrew
import netbrew.nn.functional as F
from netbrew import nn
from netbrew.converters.module import trace
from netbrew.netdef.passes import optimize


class Cell(nn.Module):
    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.ih = nn.Linear(input_size, 4 * hidden_size)
        self.hh = nn.Linear(hidden_size, 4 * hidden_size, bias=False)

    def forward(self, x, h, c):
        gates = self.ih(x) + self.hh(h)
        n = self.hidden_size
        i = F.sigmoid(gates[:, 0:n])
        f = F.sigmoid(gates[:, n : 2 * n] + 1.0)
        g = F.tanh(gates[:, 2 * n : 3 * n])
        o = F.sigmoid(gates[:, 3 * n :])
        c = f * c + i * g
        return o * F.tanh(c), c


class LSTM(nn.Module):
    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.cell = Cell(input_size, hidden_size)

    def forward(self, x):
        h = F.zeros(x.shape[1], self.hidden_size)
        c = F.zeros(x.shape[1], self.hidden_size)
        outputs = []
        for t in range(x.shape[0]):
            h, c = self.cell(x[t], h, c)
            outputs.append(h)
        return F.stack(outputs), h


def torch_lstm(model: LSTM):
    import torch

    w_ih = torch.from_numpy(np.asarray(model.cell.ih.weight))
    b_ih = torch.from_numpy(np.asarray(model.cell.ih.bias))
    w_hh = torch.from_numpy(np.asarray(model.cell.hh.weight))
    n = model.hidden_size

    def run(x):
        h = torch.zeros(x.shape[1], n)
        c = torch.zeros(x.shape[1], n)
        outputs = []
        for t in range(x.shape[0]):
            gates = x[t] @ w_ih.T + b_ih + h @ w_hh.T
            i = torch.sigmoid(gates[:, 0:n])
            f = torch.sigmoid(gates[:, n : 2 * n] + 1.0)
            g = torch.tanh(gates[:, 2 * n : 3 * n])
            o = torch.sigmoid(gates[:, 3 * n :])
            c = f * c + i * g
            h = o * torch.tanh(c)
            outputs.append(h)
        return torch.stack(outputs), h

    return run


def measure(steps: int, batch: int, hidden: int, reps: int) -> dict:
    import torch

    torch.set_num_threads(netbrew.get_num_threads())
    nn.manual_seed(0)
    model = LSTM(hidden, hidden)
    x = np.random.default_rng(0).normal(size=(steps, batch, hidden)).astype(np.float32)
    scripted = netbrew.script(model)
    scripted(x)
    script_pred = netbrew.Predictor(scripted.init_net, scripted.predict_net)
    unfused_pred = netbrew.Predictor(
        scripted.init_net, optimize(scripted.predict_net, level=1), optimize=False
    )
    init, predict = trace(model, x)
    trace_pred = netbrew.Predictor(init, predict)
    run_torch, xt = torch_lstm(model), torch.from_numpy(x)
    want = model(x)[0]
    np.testing.assert_allclose(script_pred.run({"x": x})["output_0"], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(unfused_pred.run({"x": x})["output_0"], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(trace_pred.run({"x": x})["output_0"], want, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        np.testing.assert_allclose(run_torch(xt)[0].numpy(), want, rtol=1e-5, atol=1e-5)
    runs = {
        "script (Loop)": lambda: script_pred.run({"x": x}),
        "script (Loop, body unfused)": lambda: unfused_pred.run({"x": x}),
        "trace (unrolled)": lambda: trace_pred.run({"x": x}),
        "PyTorch eager": lambda: run_torch(xt),
    }
    times: dict[str, list[float]] = {k: [] for k in runs}
    with torch.no_grad():
        for _ in range(reps):
            for name, fn in runs.items():
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
    ops = {
        name: f"{len(p.predict_net.op)} / {_count(p.predict_net)}"
        for name, p in (
            ("script (Loop)", script_pred),
            ("script (Loop, body unfused)", unfused_pred),
            ("trace (unrolled)", trace_pred),
        )
    }
    return {"times": times, "ops": ops}


def _count(net) -> int:
    """FusedElementwise ops in `net` and its subnets."""
    n = 0
    for op in net.op:
        n += op.type == "FusedElementwise"
        for arg in op.arg:
            if arg.HasField("n"):
                n += _count(arg.n)
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[20, 50])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--reps", type=int, default=60)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    lines = [
        f"# Custom LSTM: script vs trace vs PyTorch eager ({datetime.date.today()})",
        "",
        f"batch {args.batch}, input = hidden = {args.hidden}, float32, "
        f"{netbrew.get_num_threads()} threads, {platform.processor() or platform.machine()}; "
        f"{args.reps} interleaved runs each. Ratios are median time / PyTorch's median. "
        "Ops: the top-level ops Predictor runs / FusedElementwise ops in the net and its "
        "Loop body.",
        "",
        "| steps | way | ops / fused | median ms | min ms | vs PyTorch |",
        "|---|---|---|---|---|---|",
    ]
    for steps in args.steps:
        result = measure(steps, args.batch, args.hidden, args.reps)
        base = statistics.median(result["times"]["PyTorch eager"])
        for name, ts in result["times"].items():
            med = statistics.median(ts)
            ops = result["ops"].get(name, "-")
            lines.append(
                f"| {steps} | {name} | {ops} | {med * 1e3:.2f} | {min(ts) * 1e3:.2f} "
                f"| {med / base:.2f}x |"
            )
    lines += ["", f"Load average (1, 5, 15 min) after the runs: {os.getloadavg()}"]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()

"""The zoo's PyTorch-built models: a MobileNetV2 and a BERT-base encoder layer, as a new user
would bring them, built with nn.Module and exported with torch.onnx.export.

torchvision cannot be installed beside the local torch, so the modules are written here:
- mobilenetv2: torchvision's MobileNetV2 layout at width 1.0 on 224 x 224 (a 3x3 stride-2
  stem of 32, seventeen inverted residuals (1x1 expand, depthwise 3x3, 1x1 project, the
  skip where shapes allow), a 1x1 conv to 1280, global average pool, a 1000-way Linear;
  BatchNorm and ReLU6, which exports as Clip(0, 6));
- bert_layer: one BERT-base encoder layer (hidden 768, 12 heads, FFN 3072, exact GELU,
  post-LayerNorm) on a sequence of 128 at batch 1.

Weights are torch's seeded default initialisation; BatchNorm's running statistics are
randomised so they do not fold to the identity. Each export is cached as
<cache>/<name>-torch<version>-<hash of this file>.onnx, so it is made once per torch install
and again only when this file changes.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from pathlib import Path

MODELS = ("mobilenetv2", "bert_layer")
OPSET = 17  # LayerNormalization's first opset
# (expansion t, output channels c, repeats n, first stride s), as in the MobileNetV2 paper
INVERTED_RESIDUALS = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


def default_cache() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "netbrew" / "zoo"


def torch_missing() -> str | None:
    """Why the torch models cannot be made here, or None when they can."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return "PyTorch is not installed (pip install torch==2.13.0 to add them)"
    return None


def export_path(name: str, cache: Path) -> Path:
    """Where the export of `name` is cached, made now if it is not there yet."""
    import torch

    digest = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:10]
    path = Path(cache) / f"{name}-torch{torch.__version__}-{digest}.onnx"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        module, example = build(name)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
            torch.onnx.export(
                module,
                (example,),
                str(tmp),
                input_names=["input"],
                output_names=["output"],
                opset_version=OPSET,
                dynamo=False,  # the torch.export-based exporter needs onnxscript
            )
        os.replace(tmp, path)  # atomic: a concurrent run never reads half a file
    return path


def build(name: str):
    """(module in eval mode, example input) for model `name`."""
    import torch

    torch.manual_seed(0)
    if name == "mobilenetv2":
        return mobilenet_v2().eval(), torch.randn(1, 3, 224, 224)
    if name == "bert_layer":
        return bert_layer().eval(), torch.randn(1, 128, 768)
    raise ValueError(f"unknown torch zoo model {name!r}, expected one of {MODELS}")


def conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1, relu6=True):
    import torch
    from torch import nn

    bn = nn.BatchNorm2d(cout)
    with torch.no_grad():  # running statistics that are not the identity
        bn.running_mean.uniform_(-0.1, 0.1)
        bn.running_var.uniform_(0.5, 1.5)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.1, 0.1)
    conv = nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False)
    return nn.Sequential(conv, bn, *([nn.ReLU6()] if relu6 else []))


def mobilenet_v2(num_classes: int = 1000):
    from torch import nn

    class InvertedResidual(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
            super().__init__()
            hidden = cin * expand
            layers = [conv_bn(cin, hidden, 1)] if expand != 1 else []
            layers += [conv_bn(hidden, hidden, 3, stride, groups=hidden)]
            layers += [conv_bn(hidden, cout, 1, relu6=False)]
            self.body = nn.Sequential(*layers)
            self.skip = stride == 1 and cin == cout

        def forward(self, x):
            return x + self.body(x) if self.skip else self.body(x)

    layers, cin = [conv_bn(3, 32, 3, 2)], 32
    for t, c, n, s in INVERTED_RESIDUALS:
        for i in range(n):
            layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
            cin = c
    layers += [conv_bn(cin, 1280, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten()]
    layers += [nn.Linear(1280, num_classes)]
    return nn.Sequential(*layers)


def bert_layer(hidden: int = 768, heads: int = 12, ffn: int = 3072):
    import torch
    from torch import nn

    class BertLayer(nn.Module):
        """Self-attention with one fused QKV projection, then the GELU feed-forward; each
        sublayer adds its input and applies LayerNorm after (BERT's post-norm)."""

        def __init__(self) -> None:
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(hidden, 3 * hidden)
            self.proj = nn.Linear(hidden, hidden)
            self.norm1 = nn.LayerNorm(hidden, eps=1e-12)
            self.ffn_in = nn.Linear(hidden, ffn)
            self.ffn_out = nn.Linear(ffn, hidden)
            self.norm2 = nn.LayerNorm(hidden, eps=1e-12)
            self.gelu = nn.GELU()

        def forward(self, x):
            batch, seq, hidden = x.shape
            head = hidden // self.heads
            q, k, v = (
                t.reshape(batch, seq, self.heads, head).transpose(1, 2)
                for t in self.qkv(x).split(hidden, dim=-1)
            )
            scores = q @ k.transpose(-1, -2) / head**0.5
            attn = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(x.shape)
            x = self.norm1(x + self.proj(attn))
            return self.norm2(x + self.ffn_out(self.gelu(self.ffn_in(x))))

    return BertLayer()

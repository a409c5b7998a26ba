"""NetDef <-> nn.Module-style definitions: netbrew.nn by tracing, torch.nn through torch.fx.

PyTorch is optional (the `[torch]` extra): `from_torch`/`to_torch` import it when called.
"""

from netbrew.converters.module.from_torch import from_torch
from netbrew.converters.module.to_module import to_module
from netbrew.converters.module.to_torch import to_torch
from netbrew.converters.module.trace import trace

__all__ = ["from_torch", "to_module", "to_torch", "trace"]

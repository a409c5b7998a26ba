"""caffe2.python.predictor.predictor_py_utils on netbrew: the MetaNetDef map helpers.

MetaNetDef keeps its maps as repeated key/value messages; these look entries up by key
and add them, as Caffe2's helpers did.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from netbrew.proto.netbrew_pb2 import MetaNetDef, NetDef, PlanDef


def get_comp_name(string: str, name: str) -> str:
    """`string`, suffixed "_<name>" when a name is given."""
    return f"{string}_{name}" if name else string


def _ProtoMapGet(field: Any, key: str) -> Any:  # noqa: N802
    for entry in field:
        if entry.key == key:
            return entry.value
    return None


def GetPlan(meta_net_def: MetaNetDef, key: str) -> PlanDef | None:  # noqa: N802
    return _ProtoMapGet(meta_net_def.plans, key)


def GetNet(meta_net_def: MetaNetDef, key: str) -> NetDef | None:  # noqa: N802
    return _ProtoMapGet(meta_net_def.nets, key)


def GetBlobs(meta_net_def: MetaNetDef, key: str) -> Any:  # noqa: N802
    """The blob names under `key`; an empty list when there is no such entry."""
    blobs = _ProtoMapGet(meta_net_def.blobs, key)
    return [] if blobs is None else blobs


def GetApplicationSpecificInfo(meta_net_def: MetaNetDef, key: str) -> str | None:  # noqa: N802
    return _ProtoMapGet(meta_net_def.applicationSpecificInfo, key)


def AddBlobs(meta_net_def: MetaNetDef, blob_name: str, blob_def: Iterable[str]) -> None:  # noqa: N802
    """Appends `blob_def` to the entry `blob_name`, adding it if missing."""
    blobs = _ProtoMapGet(meta_net_def.blobs, blob_name)
    if blobs is None:
        blobs = meta_net_def.blobs.add(key=blob_name).value
    blobs.extend(str(b) for b in blob_def)


def AddNet(meta_net_def: MetaNetDef, net_name: str, net_def: NetDef) -> None:  # noqa: N802
    meta_net_def.nets.add(key=net_name, value=net_def)


def AddPlan(meta_net_def: MetaNetDef, plan_name: str, plan_def: PlanDef) -> None:  # noqa: N802
    meta_net_def.plans.add(key=plan_name, value=plan_def)

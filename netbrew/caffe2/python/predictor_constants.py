"""caffe2.python.predictor_constants on netbrew: the names a predictor DB is laid out by.

Caffe2 kept them as the defaults of caffe2/proto/predictor_consts.proto and exposed one
instance, `predictor_constants`; the values below are those defaults, so a DB written
here has the keys Caffe2 wrote and read. They are also module attributes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PredictorConsts:
    """Caffe2's PredictorConsts message with its default values."""

    # The DB key of the serialized MetaNetDef; "!!" sorts it before the parameters.
    META_NET_DEF: str = "!!META_NET_DEF"
    # The workspace blob holding the DB reader the global init net's Load reads from.
    PREDICTOR_DBREADER: str = "!!PREDICTOR_DBREADER"
    # Keys of MetaNetDef.blobs.
    PARAMETERS_BLOB_TYPE: str = "PARAMETERS_BLOB_TYPE"
    INPUTS_BLOB_TYPE: str = "INPUTS_BLOB_TYPE"
    OUTPUTS_BLOB_TYPE: str = "OUTPUTS_BLOB_TYPE"
    # Keys of MetaNetDef.nets.
    GLOBAL_INIT_NET_TYPE: str = "GLOBAL_INIT_NET_TYPE"
    PREDICT_INIT_NET_TYPE: str = "PREDICT_INIT_NET_TYPE"
    PREDICT_NET_TYPE: str = "PREDICT_NET_TYPE"
    # ModelInfo.predictorType values.
    SINGLE_PREDICTOR: str = "SINGLE_PREDICTOR"
    MULTI_PREDICTOR: str = "MULTI_PREDICTOR"
    # Keys of MetaNetDef.plans.
    TRAIN_INIT_PLAN_TYPE: str = "TRAIN_INIT_PLAN_TYPE"
    TRAIN_PLAN_TYPE: str = "TRAIN_PLAN_TYPE"
    # Shape info blob name.
    SHAPE_INFO_BLOB: str = "SHAPE_INFO_BLOB"
    # Sequential blob reader name.
    DEFERRED_BLOB_READER: str = "__DEFERRED_BLOB_READER__"


predictor_constants = PredictorConsts()

META_NET_DEF = predictor_constants.META_NET_DEF
PREDICTOR_DBREADER = predictor_constants.PREDICTOR_DBREADER
PARAMETERS_BLOB_TYPE = predictor_constants.PARAMETERS_BLOB_TYPE
INPUTS_BLOB_TYPE = predictor_constants.INPUTS_BLOB_TYPE
OUTPUTS_BLOB_TYPE = predictor_constants.OUTPUTS_BLOB_TYPE
GLOBAL_INIT_NET_TYPE = predictor_constants.GLOBAL_INIT_NET_TYPE
PREDICT_INIT_NET_TYPE = predictor_constants.PREDICT_INIT_NET_TYPE
PREDICT_NET_TYPE = predictor_constants.PREDICT_NET_TYPE
SINGLE_PREDICTOR = predictor_constants.SINGLE_PREDICTOR
MULTI_PREDICTOR = predictor_constants.MULTI_PREDICTOR
TRAIN_INIT_PLAN_TYPE = predictor_constants.TRAIN_INIT_PLAN_TYPE
TRAIN_PLAN_TYPE = predictor_constants.TRAIN_PLAN_TYPE
SHAPE_INFO_BLOB = predictor_constants.SHAPE_INFO_BLOB
DEFERRED_BLOB_READER = predictor_constants.DEFERRED_BLOB_READER

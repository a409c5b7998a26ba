"""caffe2.python.predictor.predictor_exporter: netbrew.caffe2.python.predictor_exporter."""

from netbrew.caffe2.python.predictor_exporter import (  # noqa: F401  (Caffe2's module path)
    PredictorExportMeta,
    get_meta_net_def,
    load_from_db,
    prepare_prediction_net,
    runnable_global_init_net,
    save_to_db,
    set_model_info,
)

"""caffe2.python on netbrew: core, workspace, model_helper, brew, optimizer, and the rest."""

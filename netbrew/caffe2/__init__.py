"""Caffe2's Python API on netbrew: `caffe2.python` and `caffe2.proto`, as a thin map.

A Caffe2 script ports by replacing `caffe2` with `netbrew.caffe2` in its imports:

    from netbrew.caffe2.python import core, workspace, model_helper, brew

or runs unchanged under `python -m netbrew.caffe2 script.py [args]`, whose import hook
resolves `caffe2.*` to `netbrew.caffe2.*`. Each name calls netbrew's own API (the
module-level workspace is a netbrew Workspace, `brew` is netbrew.brew, ModelHelper is
netbrew's), and the ops a script adds with Caffe2's spellings (Conv's kernel/pad,
Softmax's flattening axis, Reshape's shape argument) are translated once, as they are
added, by netbrew.converters.caffe2. Arguments that only tuned Caffe2's implementation
(use_cudnn, engine, order on layout-free ops, run_once) are accepted and ignored here;
netbrew's own API keeps refusing unknown arguments.

Programs written for a GPU (ops under `DeviceScope(DeviceOption(CUDA, 0))`, blobs fed
with a CUDA device_option) run on the CPU when no GPU is present, with one
DeviceFallbackWarning that says so.
"""

from netbrew.caffe2.hook import install, uninstall

__all__ = ["install", "uninstall"]

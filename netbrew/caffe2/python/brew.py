"""caffe2.python.brew is netbrew.brew itself, which takes Caffe2's signatures too."""

from netbrew.brew import *  # noqa: F403  (Caffe2 scripts call brew.<helper>)
from netbrew.brew import __all__  # noqa: F401

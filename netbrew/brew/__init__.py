"""brew: helpers that add parameters and ops to a model (ModelHelper, fc, conv, ...)."""

"""BatchNormalization (inference), LayerNormalization and Dropout."""

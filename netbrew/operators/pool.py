"""MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool."""

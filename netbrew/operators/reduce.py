"""ReduceMean, ReduceSum, ReduceMax and ArgMax."""

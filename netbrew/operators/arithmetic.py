"""Elementwise arithmetic with NumPy broadcasting: Add, Sub, Mul, Div, Pow, Neg, Abs, Exp, Log, Sqrt, Reciprocal and Clip."""

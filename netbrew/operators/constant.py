"""Cast, Constant and Identity."""

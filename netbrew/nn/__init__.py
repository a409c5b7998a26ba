"""nn.Module-style frontend that traces into NetDefs."""

"""Experiments: grids of runs answering one question, the runner and the kinds."""

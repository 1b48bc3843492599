"""Labelled datasets: loading and validation, derived datasets, uploads, the bundled demo."""

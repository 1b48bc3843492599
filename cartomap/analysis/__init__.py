"""Reading finished runs: data-map frames and figures, projection, neighbours, comparison, artifacts."""

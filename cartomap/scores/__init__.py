"""Pure numerics on arrays: data-map metrics, consensus pruning, label noise, reports and statistics."""

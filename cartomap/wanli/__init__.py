"""The WaNLI pipeline: exemplar groups, prompts, generation, filtering and human review."""

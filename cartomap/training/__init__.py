"""Training a classifier while recording its dynamics: the loop, batching, orders, models, embeddings."""

"""cartomap: data maps (Dataset Cartography) for text-classification training sets.

The core library computes on arrays and DataFrames and never imports Streamlit.
"""

__version__ = "0.1.0"

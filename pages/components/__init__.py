"""Widgets written once and shared by the pages: the job panel and the data and model forms."""

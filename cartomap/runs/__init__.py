"""The run store: the one owner of a run folder's layout, run and task states, groups, interop."""

"""What the commands print: text made safe for a terminal, progress bars, a finished run in a few lines."""

from __future__ import annotations


def printable(text: object) -> str:
    """``text`` safe to print on a terminal: control characters (an ANSI escape in a run's name, a
    newline) are shown escaped, never sent raw."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def printable_frame(frame):
    """A table's copy with every text cell, column name and index label :func:`printable` (before the
    table is laid out, so its columns stay aligned)."""
    import pandas as pd

    out = frame.copy()
    for column in out.columns:
        values = out[column]
        if not (pd.api.types.is_numeric_dtype(values) or pd.api.types.is_datetime64_any_dtype(values)):
            out[column] = values.map(lambda v: v if v is None or isinstance(v, float) else printable(v))
    out.columns = [printable(c) for c in out.columns]
    out.index = [printable(i) if isinstance(i, str) else i for i in out.index]
    return out


class PrintableStream:
    """A text stream writing through to ``stream`` what :func:`printable` makes of each line (line
    breaks kept): the command line's standard output, so that no command sends a control character of
    the data it prints (an ANSI escape in an annotator's name, a label, a text) raw to the terminal."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write("\n".join(printable(line) for line in text.split("\n")))
        return len(text)

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


class CountBar:
    """A tqdm bar created on the first ``(done, total)`` update (nothing when quiet); close() is safe twice."""

    def __init__(self, quiet: bool, unit: str, desc: str):
        self.quiet, self.unit, self.desc, self.bar = quiet, unit, desc, None

    def __call__(self, done: int, total: int) -> None:
        if self.quiet:
            return
        if self.bar is None:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, unit=self.unit, desc=self.desc)
        self.bar.n = done
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def print_run_summary(run) -> None:
    history = run.history()
    acc = history[-1].get("dev_accuracy") if history else None
    kind = run.task_kind
    count = run.info.get("n_train")
    per_unit = "" if kind.unit.per_example else f" (per {kind.unit})"
    print(
        (f"  {count} examples" if kind.unit.per_example else f"  {kind.plural(int(count or 0))}")
        + f", {len(history)} epochs"
        + (f", dev accuracy{per_unit} {acc:.4f}" if acc is not None else "")
        + (
            f", dev exact match {history[-1]['dev_exact_match']:.4f}"
            if history and history[-1].get("dev_exact_match") is not None
            else ""
        )
    )
    if history:
        print_entity_scores(history[-1], "dev", f"dev entities (epoch {len(history)})")
    best = run.best_epoch()
    for k, name in enumerate(run.test_names):
        value = history[best].get(f"test_{k}_accuracy") if best is not None else None
        if value is not None:
            exact = history[best].get(f"test_{k}_exact_match")
            print(
                f"  test {name}: accuracy{per_unit} {value:.4f}"
                + (f", exact match {exact:.4f}" if exact is not None else "")
                + f" (epoch {best + 1})"
            )
            print_entity_scores(history[best], f"test_{k}", f"test {name} entities (epoch {best + 1})")
    if run.has_metrics():
        from cartomap.analysis.datamap import with_regions

        counts = with_regions(run.metrics(), run.region_rule())["region"].value_counts().to_dict()
        print("  regions: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


def print_entity_scores(record: dict, prefix: str, title: str) -> None:
    """A token run's entity-level precision, recall and F1 per type, micro and macro (seqeval's) of one set
    at one epoch, as a table under ``title``; nothing when the record has none."""
    from cartomap.scores.entities import entity_table, scores_key

    scores = record.get(scores_key(prefix))
    if not scores:
        return
    print(f"  {title}, precision / recall / F1 of whole entities:")
    table = printable_frame(entity_table(scores).reset_index())  # a type's name comes from the data
    text = table.to_string(index=False, float_format="{:.4f}".format)
    print("\n".join("    " + line for line in text.splitlines()))

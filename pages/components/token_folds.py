"""The Prune labels page's part for a token run: out-of-fold word probabilities by k folds of its sentences.

What is token-specific, said on the page: a token run's units are words, so the experiment is
:mod:`cartomap.experiments.token_folds` (k fold models of whole sentences, no Model 1, no mismatch
categories: nothing is pruned); its out-of-fold probabilities feed cleanlab's token classification
(detectors ``cleanlab_token_issue``, ``cleanlab_sentence_quality``) on the Review suspects page and the
recurring swaps on the Data map. Layout only; words are shown in tables, never as HTML.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from cartomap.errors import CartomapError
from cartomap.experiments import forms, token_folds
from cartomap.runs.state import State
from cartomap.team.roles import Action
from pages.common import acting_as, count, flash, kept, show_error, write_button
from pages.components.forms import model_form
from pages.components.jobs import experiment_panel


def results(run, exp, estore) -> None:
    """A finished experiment: its out-of-fold accuracy, the most suspect words, the recurring swaps."""
    summary = exp.result("summary") or {}
    found = token_folds.oof_of_run(run, estore)
    st.markdown(f"**Experiment {exp.id}: out-of-fold word probabilities ({summary.get('folds')} folds)**")
    st.caption(
        f"{count(int(summary.get('n_words', 0)), 'word')} of {count(int(summary.get('n_sentences', 0)), 'sentence')}; "
        f"out-of-fold word accuracy {summary.get('oof_word_accuracy', float('nan')):.3f}; "
        f"{count(int(summary.get('n_disagree', 0)), 'word')} predicted otherwise than tagged. Queue them on "
        "the Review suspects page with the detector cleanlab_token_issue or cleanlab_sentence_quality."
    )
    if found is not None:
        table = token_folds.suspects_table(run, found[1], top=50)
        st.markdown(
            "**The most suspect words** (by cleanlab_token_issue, the words cleanlab flags first, then by 1 − p(gold))"
        )
        st.dataframe(table, hide_index=True, key="prune_token_suspects")
    swaps = exp.result("swaps")
    if isinstance(swaps, pd.DataFrame) and len(swaps):
        st.markdown("**Recurring swaps** (gold → out-of-fold prediction)")
        st.dataframe(swaps, hide_index=True, key="prune_token_swaps")


def token_section(run, estore) -> None:
    """The Prune labels page for a token run: the experiment's progress or results, and a form to start it."""
    st.info(
        f"Run {run.id} is a token run: its units are words. Pruning by mismatch category and Model 1 work on "
        "examples with one label each; for a token run this page makes the out-of-fold word probabilities "
        "of k folds of its sentences (each sentence scored by the one model that never saw it), which "
        "cleanlab's token classification and the recurring swaps read. Nothing is pruned."
    )
    experiments = token_folds.experiments_of_run(run, estore)
    exp = experiments[0] if experiments else None
    if exp is not None:
        state = exp.state
        if state == State.DONE:
            results(run, exp, estore)
        else:
            experiment_panel(exp, lambda e, status: None, key="prune_token_")
    with st.expander("New out-of-fold experiment", expanded=exp is None):
        c1, c2 = st.columns(2)
        folds = c1.number_input("Folds", 2, 50, step=1, **kept("prune_token_folds", 5))
        seed = c2.number_input("Fold seed", 0, 2**31 - 1, step=1, **kept("prune_token_fold_seed", 0))
        values = model_form("prune_token", default_epochs=run.config.train.epochs, seed=True)
        if write_button("Start k folds", Action.EXPERIMENT, type="primary", key="prune_token_start"):
            try:
                formed = forms.model_form_config(values, train=run.data_config())
                base = run.own_config().replace(
                    data=formed.data, dev=None, tests=(), model=formed.model, train=formed.train
                )
                params = token_folds.TokenFoldsParams(base=base, folds=int(folds), fold_seed=int(seed))
                with st.spinner("Checking the data…"):
                    started = token_folds.start_token_folds(params, estore, by=acting_as())
            except CartomapError as err:
                show_error(err)
            else:
                flash("success", f"Started experiment {started.id}: it runs in the background.")
                st.rerun()

"""scripts/make_ner_demo_data.py on a tiny corpus in WikiGold's shape (hand-written: articles
separated by -DOCSTART-, space-separated token and IOB1 tag)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from cartomap.data.conll import read_tagged

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "make_ner_demo_data.py"

# Four articles; the first opens with a "#" token, tags are IOB1 (I- opens an entity).
CORPUS = """-DOCSTART- O

# O
Ann I-PER
sings O
. O

Bo I-PER
Li I-PER
left O

-DOCSTART- O

Paris I-LOC
is O
big O

-DOCSTART- O

The O
Mad I-ORG
Capsule I-ORG
Markets I-ORG
B-ORG-less O

-DOCSTART- O

UN I-ORG
met O
"""


def load_script():
    spec = importlib.util.spec_from_file_location("make_ner_demo_data", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_builds_reproducible_iob2_files_split_by_article(tmp_path, capsys):
    source = tmp_path / "wikigold.conll.txt"
    source.write_text(CORPUS, encoding="utf-8")
    script = load_script()
    script.main(["--source", str(source), "--out", str(tmp_path / "a")])
    script.main(["--source", str(source), "--out", str(tmp_path / "b")])
    for name in ("ner_train.conll.gz", "ner_dev.conll.gz"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    train = read_tagged(tmp_path / "a" / "ner_train.conll.gz", id_field="sent_id")
    dev = read_tagged(tmp_path / "a" / "ner_dev.conll.gz", id_field="sent_id")
    both = list(train.frame["id"]) + list(dev.frame["id"])
    assert sorted(both) == ["wikigold-0-0", "wikigold-0-1", "wikigold-1-0", "wikigold-2-0", "wikigold-3-0"]
    assert len(dev) >= 1 and len(train) >= 1
    articles = lambda ids: {i.split("-")[1] for i in ids}  # noqa: E731
    assert not articles(train.frame["id"]) & articles(dev.frame["id"])  # no article in both
    everything = {
        i: (t, g)
        for d in (train, dev)
        for i, t, g in zip(d.frame["id"], d.frame["tokens"], d.frame["tags"], strict=True)
    }
    assert everything["wikigold-0-0"] == (["#", "Ann", "sings", "."], ["O", "B-PER", "O", "O"])
    assert everything["wikigold-0-1"] == (["Bo", "Li", "left"], ["B-PER", "I-PER", "O"])
    assert everything["wikigold-2-0"][1] == ["O", "B-ORG", "I-ORG", "I-ORG", "O"]
    assert train.warnings == () and dev.warnings == ()  # IOB2 now
    assert "sentences" in capsys.readouterr().out


def test_missing_source_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="no such file"):
        load_script().main(["--source", str(tmp_path / "none.txt"), "--out", str(tmp_path)])


def test_the_bundled_ner_demo_files_are_the_scripts_wikigold_split():
    """The bundled files (what the NER demo trains on): 1,454 / 242 sentences of 123 / 22 articles, none in
    both, IOB2 tags (no BIO warning), the sentences' own ids, and their licence beside them."""
    from cartomap.config import DEMO_NER_DEV, DEMO_NER_TRAIN, DataConfig
    from cartomap.data.loading import DEMO_DIR, demo_path, load_dataset

    train = read_tagged(demo_path("ner_train"), id_field="sent_id")
    dev = read_tagged(demo_path("ner_dev"), id_field="sent_id")
    assert (len(train), len(dev)) == (1454, 242) and (train.num_words, dev.num_words) == (33516, 5491)
    assert train.warnings == () and dev.warnings == ()
    articles = lambda ids: {i.split("-")[1] for i in ids}  # noqa: E731
    assert (len(articles(train.frame["id"])), len(articles(dev.frame["id"]))) == (123, 22)
    assert not articles(train.frame["id"]) & articles(dev.frame["id"])
    assert train.tag_names == ("B-LOC", "B-MISC", "B-ORG", "B-PER", "I-LOC", "I-MISC", "I-ORG", "I-PER", "O")
    loaded = load_dataset(DataConfig(path=DEMO_NER_TRAIN))
    assert loaded.task_kind.name == "token" and list(loaded.frame["id"]) == list(train.frame["id"])
    assert len(load_dataset(DataConfig(path=DEMO_NER_DEV), label_names=loaded.label_names)) == 242
    licence = (DEMO_DIR / "LICENSE-wikigold.txt").read_text(encoding="utf-8")
    assert (
        "CC BY 4.0" in licence
        and "Balasuriya" in licence
        and "creativecommons.org/licenses/by/4.0" in licence
    )

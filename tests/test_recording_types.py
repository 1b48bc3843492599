"""The recording modes and recorded sources (cartomap.config.Record, Source): their traits, and that they are
their plain values in every file, key and id, so runs saved before the types existed read and hash the same."""

from __future__ import annotations

import hashlib
import json

import pytest

from cartomap.config import (
    RECORD_CHOICES,
    RECORDING_MODES,
    RunConfig,
    Source,
    TrainConfig,
    map_source,
    recorded_sources,
)
from cartomap.config import Record as R
from cartomap.errors import DataError
from cartomap.runs.store import run_id_for


def test_each_mode_records_its_sources_in_order():
    assert R.TRAIN.sources == (Source.TRAIN,)
    assert R.EVAL.sources == (Source.EVAL,)
    assert R.BOTH.sources == (Source.TRAIN, Source.EVAL)
    assert R.NONE.sources == ()
    assert [m.records_map for m in R] == [True, True, True, False]
    assert RECORDING_MODES == (R.TRAIN, R.EVAL, R.BOTH)
    # the plain metrics file: the first recorded source; the training pass when nothing is recorded
    assert [R(m).map_source for m in ("train", "eval", "both", "none")] == [
        Source.TRAIN,
        Source.EVAL,
        Source.TRAIN,
        Source.TRAIN,
    ]
    assert recorded_sources("both") == (Source.TRAIN, Source.EVAL)
    assert map_source("eval") is Source.EVAL and map_source("unknown") is Source.TRAIN
    assert [s.eval_mode for s in Source] == [False, True]


def test_members_are_their_values_in_text_keys_and_json():
    assert str(Source.EVAL) == "eval" and f"{R.BOTH}" == "both" and f"{Source.TRAIN:>6}" == " train"
    assert {Source.EVAL: 1}["eval"] == 1 and {"eval": 1}[Source.EVAL] == 1  # keys read back from JSON
    assert Source.TRAIN in {"train"} and "both" in RECORD_CHOICES
    assert json.dumps({Source.EVAL: R.NONE}) == '{"eval": "none"}'
    assert ", ".join(RECORDING_MODES) == "train, eval, both"
    assert repr(R.EVAL) == "'eval'" and f"{RECORDING_MODES!r}" == "('train', 'eval', 'both')"  # in messages


@pytest.mark.parametrize("mode", ["train", "eval", "both", "none"])
def test_a_config_keeps_its_id_and_file_with_the_type(mode):
    config = RunConfig(train=TrainConfig(record=mode))
    assert config.train.record is R(mode)
    identity = config.identity()
    plain = json.loads(json.dumps(identity))
    assert plain["train"]["record"] == mode and type(plain["train"]["record"]) is str
    spelled = {**identity, "train": {**identity["train"], "record": mode}}  # as the str field had it
    assert json.dumps(identity, sort_keys=True) == json.dumps(spelled, sort_keys=True)
    content = {"config": spelled, "train": "a", "dev": "b"}  # the id of the str-valued config
    plain_id = hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:12]
    assert run_id_for(config, "a", "b") == plain_id
    loaded = RunConfig.from_dict(json.loads(json.dumps(config.to_dict())))
    assert loaded == config and loaded.train.record is R(mode)


def test_an_unknown_mode_is_refused_naming_the_field():
    with pytest.raises(DataError, match="expected one of train, eval, both, none, got 'dev'"):
        TrainConfig(record="dev")

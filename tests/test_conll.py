"""Tests for cartomap.data.conll: every accepted shape of token data, and each bad one's message."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from cartomap.data.conll import (
    bio_problems,
    bio_warnings,
    is_token_data,
    parse_conll,
    read_tagged,
    records,
    to_conll,
    to_iob2,
)
from cartomap.errors import DataError

# CoNLL-2003's shape: four space-separated columns, document marks, the tag last.
CONLL2003 = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER

-DOCSTART- -X- -X- O

BRUSSELS NNP B-NP B-LOC
"""


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def error_of(path: Path, **options) -> DataError:
    with pytest.raises(DataError) as caught:
        read_tagged(path, **options)
    return caught.value


# ----------------------------------------------------------------------------- accepted forms


def test_conll2003_columns_docstart_and_blank_lines(tmp_path):
    data = read_tagged(write(tmp_path / "train.conll", CONLL2003))
    assert data.frame["id"].tolist() == ["sent-0", "sent-1", "sent-2"]
    assert data.frame["tokens"].tolist() == [
        ["EU", "rejects", "German", "call"],
        ["Peter", "Blackburn"],
        ["BRUSSELS"],
    ]
    assert data.frame["tags"].tolist() == [["B-ORG", "O", "B-MISC", "O"], ["B-PER", "I-PER"], ["B-LOC"]]
    assert data.tag_names == ("B-LOC", "B-MISC", "B-ORG", "B-PER", "I-PER", "O")
    assert data.lines == (3, 8, 13)  # each sentence's first token line
    assert data.warnings == ()  # valid IOB2
    assert len(data) == 3 and data.num_words == 7
    assert list(data.frame.columns) == ["id", "tokens", "tags"]


def test_another_column_can_be_the_tag(tmp_path):
    data = read_tagged(write(tmp_path / "train.conll", CONLL2003), tag_column=2)  # the chunk tags
    assert data.frame["tags"][1] == ["B-NP", "I-NP"]


def test_gzip_reads_as_the_plain_file(tmp_path):
    plain = read_tagged(write(tmp_path / "a.conll", CONLL2003))
    packed = tmp_path / "a.conll.gz"
    packed.write_bytes(gzip.compress(CONLL2003.encode("utf-8")))
    zipped = read_tagged(packed)
    assert zipped.frame.equals(plain.frame) and zipped.tag_names == plain.tag_names


def test_crlf_trailing_spaces_bom_several_blank_lines_and_no_final_newline(tmp_path):
    text = "\ufeffAnn B-PER  \r\nsings O\r\n\r\n\r\n\r\nHi O"
    path = tmp_path / "a.bio"
    path.write_bytes(text.encode("utf-8"))
    data = read_tagged(path)
    assert data.frame["tokens"].tolist() == [["Ann", "sings"], ["Hi"]]
    assert data.frame["tags"].tolist() == [["B-PER", "O"], ["O"]]
    assert data.lines == (1, 6)


def test_tab_separated_tokens_may_hold_spaces_and_a_hashtag_may_open_a_sentence(tmp_path):
    text = "# a comment\nNew York\tB-LOC\nis\tO\n\n#tbt\tO\nfun\tO\n"
    data = read_tagged(write(tmp_path / "a.iob", text))
    assert data.frame["tokens"].tolist() == [["New York", "is"], ["#tbt", "fun"]]


def test_whitespace_file_hash_token_with_the_token_lines_shape(tmp_path):
    text = "Go O\n\n# O\nnow O\n"  # "# O" has two columns like every token line: a token
    data = read_tagged(write(tmp_path / "a.conll", text))
    assert data.frame["tokens"].tolist() == [["Go"], ["#", "now"]]


def test_conllu_comments_sent_id_ranges_and_empty_nodes(tmp_path):
    text = (
        "# newdoc id = d1\n"
        "# sent_id = s1\n"
        "# text = Ann's sings\n"
        "1-2\tAnn's\t_\t_\t_\t_\t_\t_\t_\t_\n"
        "1\tAnn\tAnn\tPROPN\tNNP\t_\t3\tnsubj\t_\t_\n"
        "2\t's\t's\tPART\tPOS\t_\t1\tcase\t_\t_\n"
        "2.1\tx\tx\tX\tX\t_\t_\t_\t_\t_\n"
        "3\tsings\tsing\tVERB\tVBZ\t_\t0\troot\t_\t_\n"
        "\n"
        "# sent_id = s2\n"
        "1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_\n"
    )
    data = read_tagged(write(tmp_path / "a.conllu", text), tag_column=3, id_field="sent_id")
    assert data.frame["id"].tolist() == ["s1", "s2"]
    assert data.frame["tokens"].tolist() == [["Ann", "'s", "sings"], ["Hi"]]  # FORM, not the range
    assert data.frame["tags"].tolist() == [["PROPN", "PART", "VERB"], ["INTJ"]]
    assert data.lines == (5, 11)  # each sentence's first word
    assert data.warnings == ()  # part-of-speech tags are not BIO: no BIO check


def test_universal_ner_numbered_words_take_the_second_column(tmp_path):
    text = "# sent_id = en-1\n1\tAl\tB-PER\t-\t-\n2\tsaid\tO\t-\t-\n\n# sent_id = en-2\n1\tOk\tO\t-\t-\n"
    path = tmp_path / "en_ewt-ud-train.iob2"
    data = read_tagged(write(path, text), tag_column=2, id_field="sent_id")
    assert data.frame["tokens"].tolist() == [["Al", "said"], ["Ok"]]
    assert data.frame["tags"].tolist() == [["B-PER", "O"], ["O"]]
    assert data.frame["id"].tolist() == ["en-1", "en-2"]
    # the token column can be forced: the word numbers are then the tokens
    forced = read_tagged(path, tag_column=2, token_column=0)
    assert forced.frame["tokens"][0] == ["1", "2"]


def test_jsonl_with_ids_and_gzip(tmp_path):
    lines = [
        {"id": "a", "tokens": ["Ann", "sings"], "tags": ["B-PER", "O"], "extra": 1},
        {"id": 7, "tokens": ["Hi"], "tags": ["O"]},
    ]
    text = "\n".join(json.dumps(x) for x in lines) + "\n\n"
    data = read_tagged(write(tmp_path / "a.jsonl", text), id_field="id")
    assert data.frame["id"].tolist() == ["a", "7"]
    assert data.frame["tokens"].tolist() == [["Ann", "sings"], ["Hi"]]
    assert data.tag_names == ("B-PER", "O")
    assert data.lines == (1, 2)
    packed = tmp_path / "a.jsonl.gz"
    packed.write_bytes(gzip.compress(text.encode("utf-8")))
    assert read_tagged(packed, id_field="id").frame.equals(data.frame)
    assert read_tagged(packed).frame["id"].tolist() == ["sent-0", "sent-1"]


def test_jsonl_other_field_names_and_integer_tags_through_tag_names(tmp_path):
    text = '{"words": ["Ann", "sings"], "ner_tags": [1, 0]}\n'
    data = read_tagged(
        write(tmp_path / "a.ndjson", text),
        tokens_field="words",
        tags_field="ner_tags",
        tag_names=["O", "B-PER"],
    )
    assert data.frame["tags"][0] == ["B-PER", "O"]
    assert data.tag_names == ("O", "B-PER")  # the given order is kept


def test_given_tag_names_refuse_other_tags_naming_the_word_line(tmp_path):
    err = error_of(write(tmp_path / "a.conll", "Ann B-PER\nsings O\nwell X\n"), tag_names=["O", "B-PER"])
    assert err.location == f"{tmp_path / 'a.conll'}: line 3" and "'X'" in str(err)


def test_is_token_data_by_suffix():
    for name in (
        "a.conll",
        "a.CONLL",
        "a.conllu",
        "a.bio",
        "a.iob",
        "a.iob2",
        "dir/a.b.conll.gz",
        "a.bio.gz",
    ):
        assert is_token_data(name), name
    for name in ("a.jsonl", "a.txt", "a.csv", "a.gz", "conll", "a.conll.zip"):
        assert not is_token_data(name), name


def test_to_conll_round_trip_with_ids(tmp_path):
    data = read_tagged(write(tmp_path / "a.conll", CONLL2003))
    again = read_tagged(
        write(tmp_path / "b.conll", to_conll(data.frame, id_comments=True)), id_field="sent_id"
    )
    assert again.frame.equals(data.frame)
    assert records(data.frame)[1] == {
        "id": "sent-1",
        "tokens": ["Peter", "Blackburn"],
        "tags": ["B-PER", "I-PER"],
    }
    frame = data.frame.copy()
    frame.at[0, "tokens"] = ["a\tb", "c", "d", "e"]
    with pytest.raises(DataError, match="tab or line break"):
        to_conll(frame)


# ----------------------------------------------------------------------------- BIO checks


def test_bio_problems_find_an_inside_tag_that_opens_an_entity():
    assert bio_problems(["B-PER", "I-PER", "O", "B-LOC"]) == []
    assert bio_problems(["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-ORG"]) == [
        (0, "I-PER starts the sentence"),
        (3, "I-LOC after O"),
        (5, "I-ORG after B-LOC"),
    ]
    assert to_iob2(["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-ORG"]) == [
        "B-PER",
        "I-PER",
        "O",
        "B-LOC",
        "B-LOC",
        "B-ORG",
    ]


def test_iob1_file_reads_with_a_warning_naming_the_sentences(tmp_path):
    text = "Ann I-PER\nsings O\n\nHi O\n\nin O\nParis I-LOC\n"
    data = read_tagged(write(tmp_path / "a.conll", text))
    (message,) = data.warnings
    assert "2 of 3 sentences" in message
    assert "sent-0 word 0: I-PER starts the sentence" in message and "sent-2 word 1: I-LOC after O" in message
    assert "to_iob2" in message
    assert bio_warnings([["NN", "VB"]]) == []  # not BIO tags: nothing to check


# ----------------------------------------------------------------------------- bad forms


def test_wrong_column_count_names_the_line_and_the_first_token_line(tmp_path):
    path = write(tmp_path / "a.conll", "# c\nEU NNP B-ORG\nrejects O\n")
    err = error_of(path)
    assert err.location == f"{path}: line 3"
    assert "expected 3 columns (as on line 2), got 2" in str(err)


def test_one_column_line(tmp_path):
    path = write(tmp_path / "a.conll", "Ann B-PER\n\nsings\n")
    err = error_of(path)
    assert err.location == f"{path}: line 3" and "one column 'sings'" in str(err)


def test_empty_token_and_empty_tag(tmp_path):
    err = error_of(write(tmp_path / "a.conll", "Ann\tB-PER\n\tO\n"))
    assert err.location.endswith("a.conll: line 2") and err.field == "token" and "empty token" in str(err)
    err = error_of(write(tmp_path / "b.conll", "Ann\tB-PER\nsings\t\n"))
    assert err.location.endswith("b.conll: line 2") and err.field == "tag"


def test_tag_column_that_does_not_exist_or_holds_placeholders(tmp_path):
    path = write(tmp_path / "a.conll", "\nAnn B-PER\n")
    err = error_of(path, tag_column=5)
    assert err.location == f"{path}: line 2" and "column 5 does not exist" in str(err)
    err = error_of(write(tmp_path / "u.iob2", "1\tAl\tB-PER\t-\n"))  # last column is '-'
    assert "mostly placeholders" in str(err) and err.location.endswith("u.iob2: line 1")
    err = error_of(path, token_column=1)
    assert "the same" in str(err)


def test_file_without_sentences(tmp_path):
    path = write(tmp_path / "a.conll", "-DOCSTART- -X- -X- O\n\n# only comments\n\n")
    err = error_of(path)
    assert err.location == str(path) and "no sentences" in str(err)
    err = error_of(write(tmp_path / "b.jsonl", "\n\n"))
    assert "no sentences" in str(err)


def test_empty_file_and_missing_file(tmp_path):
    assert "no sentences" in str(error_of(write(tmp_path / "a.conll", "")))
    assert "file not found" in str(error_of(tmp_path / "none.conll"))


def test_gz_name_without_gzip_and_unknown_suffix(tmp_path):
    err = error_of(write(tmp_path / "a.conll.gz", "Ann B-PER\n"))
    assert "not gzip-compressed" in str(err)
    err = error_of(write(tmp_path / "a.txt", "Ann B-PER\n"))
    assert "'.txt'" in str(err) and ".conll" in str(err)


def test_invalid_utf8_names_the_line(tmp_path):
    path = tmp_path / "a.conll"
    path.write_bytes(b"Ann B-PER\n\nCaf\xe9 O\n")
    err = error_of(path)
    assert err.location == f"{path}: line 3" and "UTF-8" in str(err)


def test_repeated_or_dangling_sentence_ids(tmp_path):
    text = "# sent_id = x\nAnn\tB-PER\n\n# sent_id = x\nHi\tO\n"
    err = error_of(write(tmp_path / "a.conll", text), id_field="sent_id")
    assert err.location.endswith("a.conll: line 4") and "repeats" in str(err) and "line 1" in str(err)
    err = error_of(write(tmp_path / "b.conll", "Ann\tO\n\n# sent_id = y\n\nHi\tO\n"), id_field="sent_id")
    assert err.location.endswith("b.conll: line 3") and "without tokens" in str(err)


@pytest.mark.parametrize(
    ("line", "field", "words"),
    [
        ('{"tokens": ["a", "b"], "tags": ["O"]}', "tags", "2 tokens but 1 tags"),
        ('{"tokens": ["a"]}', "tags", "missing"),
        ('{"tokens": "a b", "tags": ["O"]}', "tokens", "expected a list of tokens, got str"),
        ('{"tokens": ["a", ""], "tags": ["O", "O"]}', "tokens", "empty token at position 1"),
        ('{"tokens": ["a", 3], "tags": ["O", "O"]}', "tokens", "token 1 is int 3"),
        ('{"tokens": [], "tags": []}', "tokens", "no tokens"),
        ('{"tokens": ["a"], "tags": [1]}', "tags", "tag 0 is int 1"),
        ('{"tokens": ["a"], "tags": ["O"]', None, "malformed JSON"),
        ('["a", "O"]', None, "expected a JSON object per line, got list"),
    ],
)
def test_bad_jsonl_lines_name_the_line_and_field(tmp_path, line, field, words):
    path = write(tmp_path / "a.jsonl", '{"tokens": ["ok"], "tags": ["O"]}\n\n' + line + "\n")
    err = error_of(path)
    assert err.location == f"{path}: line 3"
    assert err.field == field
    assert words in str(err)


def test_jsonl_missing_id_and_integer_tag_outside_the_names(tmp_path):
    path = write(
        tmp_path / "a.jsonl",
        '{"id": "a", "tokens": ["x"], "tags": ["O"]}\n{"tokens": ["y"], "tags": ["O"]}\n',
    )
    err = error_of(path, id_field="id")
    assert err.location == f"{path}: line 2" and err.field == "id"
    path = write(tmp_path / "b.jsonl", '{"tokens": ["x"], "tags": [2]}\n')
    err = error_of(path, tag_names=["O", "B-X"])
    assert err.location == f"{path}: line 1" and "outside [0, 2)" in str(err)


def test_parse_conll_from_text_names_the_source():
    with pytest.raises(DataError, match=r"^<upload>: line 2: "):
        parse_conll("a O\nb\n", "<upload>")


def test_comments_off_reads_hash_lines_as_tokens(tmp_path):
    path = write(tmp_path / "a.conll", "# O\nis O\n\n# sent_id = 3\n")
    assert read_tagged(path).frame["tokens"].tolist() == [["is"]]  # before any token line: a comment
    with pytest.raises(DataError, match="expected 2 columns"):
        read_tagged(path, comments=False)  # "# sent_id = 3" is then a token line of 4 columns
    path = write(tmp_path / "b.conll", "# O\nis O\n")
    assert read_tagged(path, comments=False).frame["tokens"].tolist() == [["#", "is"]]


def test_token_files_and_tables_are_read_by_one_reader(tmp_path):
    """CoNLL files and tables share the reader of cartomap.io: a byte that is not UTF-8 is named by its
    line and column in both, and a gzip file under a plain name reads as its text."""
    from cartomap.data.readers import read_table

    bad = b"EU B-ORG\n" + b"re\xffjects O\n"
    (tmp_path / "bad.conll").write_bytes(bad)
    (tmp_path / "bad.csv").write_bytes(b"premise,hypothesis,label\na,b\xff,0\n")
    for path, reader in ((tmp_path / "bad.conll", read_tagged), (tmp_path / "bad.csv", read_table)):
        with pytest.raises(
            DataError, match=r"not valid UTF-8 \(byte 0xff at byte offset \d+, column \d+"
        ) as err:
            reader(path)
        assert "line 2" in str(err.value)
    (tmp_path / "zipped.conll").write_bytes(gzip.compress("EU B-ORG\n".encode("utf-8-sig")))
    assert read_tagged(tmp_path / "zipped.conll").frame.equals(
        read_tagged(write(tmp_path / "eu.conll", "EU B-ORG\n")).frame
    )

"""WaNLI Stage 2 generation: backends (tiny local LM, OpenAI-compatible stub server), batches, CLI."""

from __future__ import annotations

import json
import threading
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pandas as pd
import pytest
from test_prompts import GROUP, make_run

from cartomap.cli import main
from cartomap.errors import CartomapError
from cartomap.runs.groups import save_group
from cartomap.runs.tasks import task_status
from cartomap.wanli.batches import batch_dir, batch_info, batch_slug, info_path, list_batches, load_generated
from cartomap.wanli.exemplars import auto_groups, collect_groups, save_auto_groups
from cartomap.wanli.generation import COLUMNS, prepare_generation, request_stop, run_generation
from cartomap.wanli.generators import GenerationConfig, LocalLM, OpenAICompatible
from cartomap.wanli.prompts import PromptTemplate, build_prompt

SECRET = "sk-test-0123456789-secret"


# --------------------------------------------------------------------------- config
def test_config_defaults_are_the_paper_defaults():
    cfg = GenerationConfig()
    assert (cfg.top_p, cfg.temperature, cfg.max_new_tokens, cfg.n, cfg.stop) == (0.5, 1.0, 120, 5, "\n\n")
    assert cfg.backend == "local" and cfg.model == "smollm2" and cfg.api_key_env == "OPENAI_API_KEY"
    assert GenerationConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(CartomapError, match="top_p"):
        GenerationConfig(top_p=0)
    with pytest.raises(CartomapError, match="backend"):
        GenerationConfig(backend="gpt3")
    with pytest.raises(CartomapError, match="NAME of an environment variable"):
        GenerationConfig(api_key_env="sk-abcdef123456")


def test_batch_slug():
    assert batch_slug("  My first batch! ") == "my-first-batch"
    with pytest.raises(CartomapError):
        batch_slug("!!!")


# --------------------------------------------------------------------------- local backend
def test_local_lm_batches_and_n_samples(tiny_lm, tmp_path):
    lm = LocalLM(tiny_lm, cache_root=tmp_path, device="cpu")
    prompts = [build_prompt(GROUP[: i + 1], "entailment") for i in range(3)]  # different lengths: padding
    cfg = GenerationConfig(model=tiny_lm, n=2, batch_size=2, max_new_tokens=6)
    calls = []
    generate = lm.model.generate
    lm.model.generate = lambda **kw: calls.append(kw["input_ids"].shape) or generate(**kw)
    out = lm.generate(prompts, cfg)
    assert len(out) == 3 and all(len(samples) == 2 for samples in out)
    assert all(isinstance(t, str) and "\n\n" not in t for samples in out for t in samples)
    assert [shape[0] for shape in calls] == [2 * 2, 1 * 2]  # two batches of prompts, n sequences each
    assert lm.tokenizer.padding_side == "left"
    assert 0 < lm.new_tokens <= 3 * 2 * 6


def test_shared_prefill_matches_plain_generation(tiny_lm, tmp_path):
    """Each prompt computed once for its n samples gives what generate(num_return_sequences=n) gives."""
    lm = LocalLM(tiny_lm, cache_root=tmp_path, device="cpu")
    prompts = [build_prompt(GROUP[:1], "entailment"), build_prompt(GROUP, "neutral")]  # left padding
    greedy = GenerationConfig(model=tiny_lm, n=1, temperature=0, max_new_tokens=8, stop="\n\n\n\n")
    with warnings.catch_warnings():  # no deprecated call into transformers (past_key_values: `cache` now)
        warnings.simplefilter("error", FutureWarning)
        warnings.simplefilter("error", DeprecationWarning)
        shared = lm.generate(prompts, greedy)
    assert lm.share_prefill
    lm.share_prefill = False
    plain = lm.generate(prompts, greedy)
    assert shared == plain and all(s[0] for s in plain)
    # n samples from the repeated cache: with top_p tiny every sample is the greedy continuation
    lm.share_prefill = True
    narrow = GenerationConfig(model=tiny_lm, n=3, top_p=1e-6, max_new_tokens=8, stop="\n\n\n\n")
    assert lm.generate(prompts, narrow) == [p * 3 for p in plain]


def test_stop_criterion_per_sequence(tiny_lm):
    import torch
    from transformers import AutoTokenizer

    from cartomap.wanli.generators import _stop_criterion

    tok = AutoTokenizer.from_pretrained(tiny_lm)
    prompt = tok("1. A\nImplication: B\n\n2.")["input_ids"]  # the prompt's own blank line does not count
    done = tok(" C\nImplication: D\n\n")["input_ids"]
    going = tok(" C\nImplication: D more")["input_ids"]
    width = max(len(done), len(going))
    pad = tok.pad_token_id
    rows = [prompt + done + [pad] * (width - len(done)), prompt + going + [pad] * (width - len(going))]
    stop = _stop_criterion(tok, "\n\n", len(prompt))
    assert stop(torch.tensor(rows), None).tolist() == [True, False]
    assert stop(torch.tensor([prompt, prompt]), None).tolist() == [False, False]


# --------------------------------------------------------------------------- batches
class Canned:
    """A generator that answers from a list, in turn; records the prompts."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.prompts: list[str] = []

    def generate(self, prompts, cfg):
        self.prompts.extend(prompts)
        return [[self.answers.pop(0) for _ in range(cfg.n)] for _ in prompts]


def auto_run(cache):
    run = make_run(cache)
    save_auto_groups(run, collect_groups(run, k=3, exclude_genres=("telephone",), query=None))
    return run


def test_run_generation_writes_the_data_contract(cache):
    run = auto_run(cache)
    ids = run.examples()["id"].astype(str).tolist()
    names = ["auto-entailment-" + ids[0], "auto-neutral-" + ids[6]]
    answers = [
        " A cat sleeps.\nImplication: An animal rests.",
        " no separator here",
        " P two.\nImplication: H two.\n\n7. extra",
        " Q.\nPossibility: R.",
        " Q.\nImplication: wrong word for neutral",
        " S.\nPossibility: T.\nPossibility: U.",
    ]
    canned = Canned(answers)
    cfg = GenerationConfig(n=3, batch_size=1)
    frame = run_generation(run, "First Batch", names, cfg, generator=canned)
    assert list_batches(run) == ["first-batch"]
    folder = batch_dir(run, "First Batch")
    assert folder == run.path / "wanli" / "first-batch"
    stored = load_generated(run, "first-batch")
    assert list(stored.columns) == list(COLUMNS)
    assert stored["gen_id"].tolist() == ["first-batch-0-0", "first-batch-0-2", "first-batch-1-0"]
    assert stored["premise"].tolist() == ["A cat sleeps.", "P two.", "Q."]
    assert stored["hypothesis"].tolist() == ["An animal rests.", "H two.", "R."]
    assert stored["raw"].tolist() == [answers[0], answers[2], answers[3]]
    assert stored["intended_label"].tolist() == ["entailment", "entailment", "neutral"]
    assert stored["group"].tolist() == [names[0], names[0], names[1]]
    assert stored["seed_id"].tolist() == [ids[0], ids[0], ids[6]]
    assert stored["in_context_ids"].iloc[0] == [ids[4], ids[2], ids[1], ids[0]]
    assert stored["prompt_index"].tolist() == [0, 0, 1] and stored["sample_index"].tolist() == [0, 2, 0]
    assert stored["model"].eq("smollm2").all() and len(frame) == 3
    assert stored["prompt_index"].dtype == "int64"
    # the prompts are the WaNLI prompts of the groups
    examples = run.examples().set_index("id")
    pairs = [tuple(examples.loc[i, ["premise", "hypothesis"]]) for i in [ids[4], ids[2], ids[1], ids[0]]]
    assert canned.prompts[0] == build_prompt(pairs, "entailment")
    assert canned.prompts[1].endswith("\n\n5.") and "\nPossibility: " in canned.prompts[1]
    info = batch_info(run, "first-batch")
    assert info["config"] == cfg.to_dict() and info["groups"] == names
    assert info["label_words"] == {"entailment": "Implication", "neutral": "Possibility"}
    assert info["stats"]["unparsable"] == 3 and info["stats"]["parsed"] == 3
    status = task_status(run, "generate-first-batch")
    assert status["state"] == "done" and status["done"] == 2 and status["unparsable"] == 3
    # the same batch again is refused unless replaced
    with pytest.raises(CartomapError, match="exists already"):
        prepare_generation(run, "first-batch", names, cfg, PromptTemplate())


def test_stop_request_keeps_what_was_generated(cache):
    run = auto_run(cache)
    names = [g["name"] for g in auto_groups(run)]

    class Stopping(Canned):
        def generate(self, prompts, cfg):
            request_stop(run, "halt")  # as the Stop button does, while the first chunk is generated
            return super().generate(prompts, cfg)

    run_generation(
        run, "halt", names, GenerationConfig(n=1, batch_size=1), generator=Stopping([" A.\nImplication: B."])
    )
    stats = batch_info(run, "halt")["stats"]
    assert stats["stopped"] and stats["prompts_done"] == 1 and stats["prompts"] == 2
    assert load_generated(run, "halt")["premise"].tolist() == ["A."]
    assert task_status(run, "generate-halt")["phase"] == "stopped"


def test_generation_needs_a_word_for_every_label(cache):
    run = auto_run(cache)
    ids = run.examples()["id"].astype(str).tolist()
    template = PromptTemplate(label_words={"entailment": "Implication"})
    with pytest.raises(CartomapError, match="no separator word for label 'neutral'"):
        prepare_generation(run, "b", ["auto-neutral-" + ids[6]], GenerationConfig(), template)
    assert not info_path(run, "b").exists()


def test_empty_result_keeps_the_schema(cache):
    run = auto_run(cache)
    ids = run.examples()["id"].astype(str).tolist()
    save_group(run, "mine", [ids[1], ids[2]])
    run_generation(run, "empty", ["mine"], GenerationConfig(n=2), generator=Canned(["x", "y"]))
    stored = load_generated(run, "empty")
    assert stored.empty and list(stored.columns) == list(COLUMNS)
    assert batch_info(run, "empty")["stats"]["unparsable"] == 2


def test_cli_groups_and_generate_local(cache, tiny_lm, capsys):
    run = make_run(cache)
    base = ["--cache", str(cache)]
    assert main([*base, "groups", run.id, "--k", "3", "--query", "0"]) == 0
    assert "2 automatic groups" in capsys.readouterr().out
    assert main([*base, "groups", run.id, "--k", "3", "--query", "0", "--save"]) == 0
    assert task_status(run, "auto-groups")["state"] == "done"
    args = [*base, "generate", run.id, "--batch", "tiny", "--model", tiny_lm, "--n", "2"]
    args += ["--max-new-tokens", "5", "--batch-size", "2", "--device", "cpu", "--quiet"]
    assert main(args) == 0
    info = batch_info(run, "tiny")
    assert info["prompts"] == 2 and info["stats"]["completions"] == 4
    assert info["stats"]["parsed"] + info["stats"]["unparsable"] == 4
    assert isinstance(load_generated(run, "tiny"), pd.DataFrame)
    assert main(args) == 2  # exists already
    assert main([*args, "--overwrite", "--limit-groups", "1"]) == 0
    assert batch_info(run, "tiny")["prompts"] == 1


# --------------------------------------------------------------------------- OpenAI-compatible backend
class Stub(BaseHTTPRequestHandler):
    requests: list = []
    status = 200

    def do_POST(self):  # noqa: N802 - the http.server API
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
        if type(self).status != 200:
            payload = json.dumps({"error": f"bad key {self.headers.get('Authorization')}"}).encode()
            self.send_response(type(self).status)
        else:
            choices = [
                {"index": j, "text": f" Made {j}.\nImplication: From {j}.\n\nignored"}
                for j in range(body["n"])
            ]
            payload = json.dumps({"choices": list(reversed(choices))}).encode()
            self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture()
def stub():
    Stub.requests, Stub.status = [], 200
    server = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_openai_backend_requests_and_secrecy(cache, stub, monkeypatch):
    monkeypatch.setenv("CARTOMAP_TEST_KEY", SECRET)
    run = auto_run(cache)
    ids = run.examples()["id"].astype(str).tolist()
    cfg = GenerationConfig(
        backend="openai", model="my-model", n=3, base_url=stub, api_key_env="CARTOMAP_TEST_KEY", batch_size=2
    )
    run_generation(run, "remote", ["auto-entailment-" + ids[0]], cfg)
    (request,) = Stub.requests
    assert request["path"] == "/v1/completions"
    assert request["headers"]["Authorization"] == f"Bearer {SECRET}"
    body = request["body"]
    assert body["model"] == "my-model" and body["prompt"].endswith("\n\n5.")
    assert (body["max_tokens"], body["temperature"], body["top_p"], body["n"]) == (120, 1.0, 0.5, 3)
    assert body["stop"] == ["\n\n"]
    stored = load_generated(run, "remote")
    assert stored["premise"].tolist() == ["Made 0.", "Made 1.", "Made 2."]  # in choice order, cut at the stop
    assert stored["raw"].iloc[0] == " Made 0.\nImplication: From 0."
    # the key is nowhere on disk: configs, task status, logs
    for path in run.path.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".txt", ".log", ".parquet"):
            assert SECRET.encode() not in path.read_bytes(), path
    assert batch_info(run, "remote")["config"]["api_key_env"] == "CARTOMAP_TEST_KEY"


def test_openai_errors_name_the_url_not_the_key(stub, monkeypatch):
    monkeypatch.setenv("CARTOMAP_TEST_KEY", SECRET)
    Stub.status = 401
    cfg = GenerationConfig(backend="openai", model="m", n=1, base_url=stub, api_key_env="CARTOMAP_TEST_KEY")
    with pytest.raises(CartomapError) as err:
        OpenAICompatible(cfg, retries=1).generate(["1. a\nImplication: b\n\n2."], cfg)
    message = str(err.value)
    assert f"{stub}/completions" in message and "401" in message
    assert SECRET not in message and "***" in message
    with pytest.raises(CartomapError, match="http"):
        OpenAICompatible(GenerationConfig(backend="openai", base_url="ftp://example"))


@pytest.mark.slow
def test_bundled_smollm2_generates(tmp_path):
    """The real SmolLM2-135M-Instruct (converted from its GGUF on first use): parsable pairs come out."""
    from cartomap.wanli.prompts import parse_completion

    lm = LocalLM("smollm2", cache_root=tmp_path, device="cpu")
    cfg = GenerationConfig(n=3, max_new_tokens=40, batch_size=2)
    out = lm.generate([build_prompt(GROUP, "entailment")], cfg)
    assert len(out[0]) == 3
    assert any(parse_completion(t, "Implication") for t in out[0])
    assert (tmp_path / "models" / "smollm2-135m-instruct" / "config.json").exists()


def test_a_key_in_the_base_url_is_never_written(cache, stub, monkeypatch):
    """``http://user:sk-...@host/v1``: the URL is saved without its userinfo, the credentials are sent
    (HTTP basic) from memory only, and no file of the run, no status and no log holds them."""
    import base64

    from cartomap.wanli.generators import CREDENTIALS_ENV, split_credentials

    monkeypatch.delenv("CARTOMAP_TEST_KEY", raising=False)
    monkeypatch.delenv(CREDENTIALS_ENV, raising=False)
    secret = "sk-url-secret-0123456789"
    host = stub.split("://", 1)[1]
    cfg = GenerationConfig(
        backend="openai",
        model="m",
        n=1,
        base_url=f"http://me:{secret}@{host}",
        api_key_env="CARTOMAP_TEST_KEY",
    )
    assert cfg.base_url == stub and secret not in repr(cfg) and secret not in json.dumps(cfg.to_dict())
    run = auto_run(cache)
    ids = run.examples()["id"].astype(str).tolist()
    run_generation(run, "userinfo", ["auto-entailment-" + ids[0]], cfg)
    (request,) = Stub.requests
    assert (
        request["headers"]["Authorization"] == "Basic " + base64.b64encode(f"me:{secret}".encode()).decode()
    )
    assert batch_info(run, "userinfo")["config"]["base_url"] == stub
    for path in run.path.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    assert split_credentials("https://u:p%40ss@example.org:8443/v1") == (
        "https://example.org:8443/v1",
        "u:p@ss",
    )
    assert split_credentials("https://example.org/v1") == ("https://example.org/v1", "")


@pytest.mark.slow
def test_the_bundled_generators_conversion_prints_no_progress_bar(tmp_path, capfd):
    """`cartomap generate --quiet` converts the bundled GGUF once: transformers' bars and the GGUF
    reader's own (plain tqdm) stay off the terminal."""
    from cartomap.wanli.generators import ensure_smollm2

    ensure_smollm2(tmp_path)
    out, err = capfd.readouterr()
    assert "it/s" not in err + out and "GGUF" not in err + out and "Writing model shards" not in err + out

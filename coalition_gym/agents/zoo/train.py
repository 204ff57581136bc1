"""Training one zoo model from scratch (deterministic on one thread), saving it as an HF folder, and
scoring a folder on the zoo tasks."""

from __future__ import annotations

import math
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ...tasks.zoo_tasks import ZOO_TASKS, zoo_task
from ...types import Ask, Item, Message, SamplingParams
from ..lora import with_causal_lm_loss
from .recipes import ZooModelSpec, ZooRecipe
from .tokenizer import _VOCAB, BOS, EOS, PAD, char_tokenizer, encode_chars, render_chat

# -- training data -------------------------------------------------------------------------------

@dataclass
class _Example:
    prompt: list[int]
    completion: list[int]


def _wrong(item: Item, rng: random.Random) -> str:
    from ..simulated import plausible_wrong_answers

    return rng.choice(plausible_wrong_answers(item))


def _debate_messages(task: Any, item: Item, rng: random.Random) -> list[Message]:
    """A debate follow-up as the protocol renders it in compact style, peers right about half the time."""
    from ...prompts import debate_followup

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
    (:func:`.build.build_zoo` always trains on one thread). ``$COALITION_GYM_ZOO_DEVICE`` (default cpu) picks
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
                        pad_token_id=_VOCAB[PAD], tie_word_embeddings=True,
                        loss_type="ForCausalLM")  # type: ignore[call-arg]  # a PretrainedConfig kwarg
    device = os.environ.get("COALITION_GYM_ZOO_DEVICE", "cpu")
    model = with_causal_lm_loss(GPT2LMHeadModel(config)).to(device)  # type: ignore[arg-type]  # transformers' stubs
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
    from ..hf import quiet_loading

    with quiet_loading():
        model.save_pretrained(folder, safe_serialization=True)
        char_tokenizer(context).save_pretrained(folder)


# -- evaluation ----------------------------------------------------------------------------------

def evaluate_folder(folder: str | Path, task_names: Sequence[str], n_items: int, split: str = "test",
                    task_seed: int = 0, max_new_tokens: int = 16) -> dict[str, float]:
    """Greedy solo accuracy of a saved model on zoo tasks, through the HF backend (the real path)."""
    from ..hf import HFGenerator
    from ..options import HFOptions

    gen = HFGenerator(str(folder), options=HFOptions(device="cpu", dtype="float32", max_batch_size=64,
                                                     max_new_tokens=max_new_tokens))
    out = {}
    for name in task_names:
        task = zoo_task(name, size=n_items, seed=task_seed)
        items = list(task.items(split))
        asks = [Ask(member="zoo", messages=tuple(task.prompt(it, "compact")), seed=k,
                    params=SamplingParams(temperature=0.0, max_new_tokens=max_new_tokens))
                for k, it in enumerate(items)]
        samples = gen.generate(asks)
        answers = [task.extract(s.text, it) for s, it in zip(samples, items)]
        out[name] = sum(r.score for r in task.score_batch(answers, items)) / len(items)
    return out



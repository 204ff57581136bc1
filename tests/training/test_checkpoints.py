"""last/ is an HF model folder with everything a resume needs, swapped in whole: a kill between the swap's
two renames still resumes (from last.old), and a state written before last/ held the weights still loads."""

from __future__ import annotations

import random

import torch

from coalition_gym.training import checkpoints
from coalition_gym.training.trainer import load_policy


def _setup():
    model, tokenizer = load_policy("zoo:tiny/pico", device="cpu")
    return model, tokenizer, torch.optim.AdamW(model.parameters(), lr=1e-3)


def _step(model, optimizer):
    loss = model(torch.tensor([[1, 2, 3]]), labels=torch.tensor([[1, 2, 3]])).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()


def test_a_kill_between_the_renames_resumes_from_last_old(tmp_path):
    model, tokenizer, optimizer = _setup()
    _step(model, optimizer)
    checkpoints.save_state(tmp_path, model, optimizer, {"step": 1}, random.Random(0), {"c": 1}, tokenizer)
    assert (tmp_path / "last" / "config.json").is_file()  # an HF folder
    want = {k: v.clone() for k, v in model.state_dict().items()}
    (tmp_path / "last").replace(tmp_path / "last.old")  # killed after the first rename
    fresh, _, fresh_opt = _setup()
    assert checkpoints.load_state(tmp_path, fresh, fresh_opt, random.Random(0), {"c": 1}) == {"step": 1}
    assert all(torch.equal(fresh.state_dict()[k], v) for k, v in want.items())
    assert fresh_opt.state_dict()["state"]  # the optimiser's moments came back too


def test_a_state_with_the_weights_inside_still_loads(tmp_path):
    model, _, optimizer = _setup()
    _step(model, optimizer)
    checkpoints.save_state(tmp_path, model, optimizer, {"step": 1}, random.Random(0), {"c": 1})  # no tokenizer
    assert not (tmp_path / "last" / "config.json").exists()
    fresh, _, fresh_opt = _setup()
    checkpoints.load_state(tmp_path, fresh, fresh_opt, random.Random(0), {"c": 1})
    assert all(torch.equal(fresh.state_dict()[k], v) for k, v in model.state_dict().items())

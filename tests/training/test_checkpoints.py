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


def test_a_single_policys_state_saved_before_it_was_a_team_of_one_resumes(tmp_path):
    """The one layout's reader of the old one: a single policy's last/ once held the run's state itself (not
    under ``team``); such a folder still resumes, at its step, with its weights."""
    from dataclasses import asdict

    from coalition_gym.training.config import make_config
    from coalition_gym.training.trainer import Trainer, TrainState

    cfg = make_config("crl", preset="tiny", policy="zoo:tiny/pico", task="zoo:arith", task_kwargs={"size": 20},
                      collaborators="sim:demo", members=["atlas"], protocol="majority_vote")
    old = Trainer(cfg, out=tmp_path, log=lambda line: None)
    _step(old.model, old.optimizer)
    checkpoints.save_state(tmp_path, old.model, old.optimizer, asdict(TrainState(step=2, best_step=1)), old.rng,
                           cfg.to_dict(), old.tokenizer)  # the old layout: the bare state in tmp_path/last
    resumed = Trainer(cfg, out=tmp_path, log=lambda line: None)
    assert resumed.try_resume() and (resumed.state.step, resumed.state.best_step) == (2, 1)
    assert all(torch.equal(p, q) for p, q in zip(old.model.parameters(), resumed.model.parameters()))

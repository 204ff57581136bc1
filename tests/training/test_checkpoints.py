"""last/ is an HF model folder with everything a resume needs, swapped in whole: a kill between the swap's
two renames still resumes (from last.old), and a state written before last/ held the weights still loads. Every
seat, one or several, has its folder ``<run>/<seat>/``, and a path a user names for it finds its best/."""

from __future__ import annotations

import random

import pytest
import torch

from coalition_gym.agents.member_settings import best_folder
from coalition_gym.errors import ConfigError
from coalition_gym.training import checkpoints
from coalition_gym.training.export import pool_line
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


def _model_folder(folder):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")


def test_every_seat_has_its_folder_and_a_named_path_finds_its_best(tmp_path):
    """One layout for any number of seats (a single policy's seat is named ``policy``), and one reader of the path
    a user names: a run folder of one seat, its seat folder or the best/ itself; a run of several asks which."""
    assert checkpoints.seat_folders(tmp_path, ["policy"]) == {"policy": tmp_path / "policy"}
    assert checkpoints.seat_folders(tmp_path, ["a", "b"]) == {"a": tmp_path / "a", "b": tmp_path / "b"}
    run = tmp_path / "crl-seed0"
    _model_folder(run / "policy" / "best")
    _model_folder(run / "policy" / "last")
    (run / "config.json").write_text('{"method": "crl"}')  # the run's config, not a model's
    for named in (run, run / "policy", run / "policy" / "best"):
        assert best_folder(named) == run / "policy" / "best"
    assert best_folder(run / "policy" / "last") == run / "policy" / "last"  # a checkpoint is itself
    assert pool_line(run) == f"{{name: policy, backend: hf, model: {(run / 'policy' / 'best').resolve()}}}"
    team = tmp_path / "team-crl-seed0"
    for seat in ("left", "right"):
        _model_folder(team / seat / "best")
    assert best_folder(team / "right") == team / "right" / "best"
    with pytest.raises(ConfigError, match=r"2 trained seats \(left, right\): name one"):
        best_folder(team)

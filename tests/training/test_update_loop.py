"""The one update loop: gradients accumulated over micro-batches equal the one-shot gradient, clipping
and the step happen once per step, and a step whose micro-batches are all skipped moves nothing."""

from __future__ import annotations

import torch

from coalition_gym.training.update_loop import UpdateLoop, chunks


def _setup(seed: int = 0):
    torch.manual_seed(seed)
    model = torch.nn.Linear(3, 1)
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def test_micro_batches_add_up_to_the_one_shot_step():
    x, y = torch.randn(8, 3), torch.randn(8, 1)
    results = []
    for size in (8, 3, 1):
        model, opt = _setup()
        steps = []
        loop = UpdateLoop(model, opt, max_grad_norm=1e9, after_step=lambda: steps.append(1))

        def loss_fn(idx):  # each micro-batch's share of the batch's mean squared error
            return ((model(x[list(idx)]) - y[list(idx)]) ** 2).sum() / len(x), {"rows": float(len(idx))}

        out = loop.step(chunks(list(range(8)), size), loss_fn)
        assert out.stepped and out.stats == {"rows": 8.0} and steps == [1]
        results.append((out.loss, [p.detach().clone() for p in model.parameters()]))
    for loss, params in results[1:]:
        assert abs(loss - results[0][0]) < 1e-6
        assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(params, results[0][1]))


def test_clipping_and_skipped_steps():
    model, opt = _setup()
    before = [p.detach().clone() for p in model.parameters()]
    loop = UpdateLoop(model, opt, max_grad_norm=1e-3)
    assert loop.steps([[0], [1]], lambda idx: None) == []  # nothing carries a loss: no step
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    out = loop.step([[0]], lambda idx: (((model(torch.ones(1, 3)) - 100.0) ** 2).sum(), {}))
    assert out.grad_norm > 1e-3  # reported before clipping
    moved = torch.cat([(a.detach() - b).flatten() for a, b in zip(model.parameters(), before)])
    assert float(moved.norm()) <= 0.1 * 1e-3 * 1.001  # lr x the clipped norm

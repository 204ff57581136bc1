"""Loss and advantage arithmetic on tiny tensors, against hand-computed values."""

import math

import numpy as np
import pytest
import torch

from coalition_gym.errors import ConfigError
from coalition_gym.training.advantages import broadcast, group_advantages, informative_groups, overlong_penalty
from coalition_gym.training.losses import aggregate, clipped_policy_loss, sft_loss, token_logprobs


def test_clipped_loss_matches_hand_computation():
    old = torch.zeros(1, 3)
    new = torch.log(torch.tensor([[1.1, 1.5, 0.5]]))  # ratios 1.1, 1.5, 0.5
    mask = torch.ones(1, 3)
    out = clipped_policy_loss(new, old, torch.tensor([2.0]), mask, eps_low=0.2)
    # A > 0: per token max(-A r, -A clip(r)) = -A * min(r, clip(r)) -> -2*1.1, -2*1.2, -2*0.5
    assert out.loss.item() == pytest.approx((-2.2 - 2.4 - 1.0) / 3)
    assert out.clip_fraction_high == pytest.approx(1 / 3) and out.clip_fraction_low == 0.0
    neg = clipped_policy_loss(new, old, torch.tensor([-1.0]), mask, eps_low=0.2)
    # A < 0: -A * max(r, clip(r)) -> 1.1, 1.5, 0.8
    assert neg.loss.item() == pytest.approx((1.1 + 1.5 + 0.8) / 3)
    assert neg.clip_fraction_low == pytest.approx(1 / 3) and neg.clip_fraction_high == 0.0


def test_clip_engages_exactly_outside_the_band_with_clip_higher():
    ratios = torch.tensor([[0.79, 0.81, 1.19, 1.21, 1.27, 1.29]])
    new, old, mask = torch.log(ratios), torch.zeros(1, 6), torch.ones(1, 6)
    pos = clipped_policy_loss(new, old, torch.tensor([1.0]), mask, eps_low=0.2, eps_high=0.28)
    assert pos.clip_fraction_high == pytest.approx(1 / 6)  # only 1.29 > 1.28
    neg = clipped_policy_loss(new, old, torch.tensor([-1.0]), mask, eps_low=0.2, eps_high=0.28)
    assert neg.clip_fraction_low == pytest.approx(1 / 6)  # only 0.79 < 0.8
    new.requires_grad_(True)
    loss = clipped_policy_loss(new, old, torch.tensor([1.0]), mask, eps_low=0.2, eps_high=0.28).loss
    loss.backward()
    assert new.grad[0, 5] == 0 and all(new.grad[0, k] != 0 for k in range(5))  # clipped token: no gradient


def test_zero_advantage_gives_zero_gradient():
    new = torch.randn(2, 4, requires_grad=True)
    loss = clipped_policy_loss(new, new.detach() + 0.1, torch.zeros(2), torch.ones(2, 4)).loss
    loss.backward()
    assert torch.count_nonzero(new.grad) == 0


def test_mask_keeps_prompt_and_collaborator_tokens_out():
    new = torch.randn(1, 5, requires_grad=True)
    mask = torch.tensor([[0, 0, 1, 1, 0]])  # prompt, prompt, policy, policy, padding
    clipped_policy_loss(new, new.detach(), torch.tensor([1.0]), mask).loss.backward()
    assert new.grad[0, 0] == 0 and new.grad[0, 1] == 0 and new.grad[0, 4] == 0
    assert new.grad[0, 2] != 0 and new.grad[0, 3] != 0


def test_aggregations_differ_as_documented():
    per_token = torch.tensor([[1.0, 1.0, 1.0, 1.0], [4.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0]])
    assert aggregate(per_token, mask, "token-mean").item() == pytest.approx(8 / 5)
    assert aggregate(per_token, mask, "seq-mean-token-mean").item() == pytest.approx((1 + 4) / 2)
    with pytest.raises(ConfigError):
        aggregate(per_token, mask, "sum")


def test_sft_and_token_logprobs():
    logits = torch.tensor([[[2.0, 0.0], [0.0, 0.0]]])
    targets = torch.tensor([[0, 1]])
    lp = token_logprobs(logits, targets)
    assert lp[0, 0].item() == pytest.approx(2 - math.log(math.exp(2) + 1))
    assert lp[0, 1].item() == pytest.approx(math.log(0.5))
    assert sft_loss(lp, torch.tensor([[0, 1]])).item() == pytest.approx(-math.log(0.5))


def test_group_advantages_and_broadcast():
    adv = group_advantages([1, 0, 1, 1, 1, 1], ["a", "a", "a", "b", "b", "b"])
    std = np.std([1, 0, 1], ddof=1)
    np.testing.assert_allclose(adv[:3], (np.array([1, 0, 1]) - 2 / 3) / (std + 1e-4))  # TRL eps
    np.testing.assert_allclose(adv[3:], 0.0)  # all-equal group: no signal
    # the constant leave-one-out term v(N minus policy) cancels: shifting a group's rewards changes nothing
    np.testing.assert_allclose(group_advantages([1.3, 0.3, 1.3], "ggg"), group_advantages([1, 0, 1], "ggg"))
    calls = [0, 0, 0, 1, 2, 2]  # rollout 0 had three policy calls, rollout 1 one, rollout 2 two
    assert broadcast([0.5, -1.0, 2.0], calls).tolist() == [0.5, 0.5, 0.5, -1.0, 2.0, 2.0]
    with pytest.raises(ConfigError):
        group_advantages([1, 2], ["a"])


def test_dynamic_sampling_and_overlong_penalty():
    assert informative_groups([1, 1, 0, 0, 1, 0], ["x", "x", "y", "y", "z", "z"]) == {"z"}
    assert overlong_penalty(80, 100, 20) == 0.0
    assert overlong_penalty(90, 100, 20) == pytest.approx(-0.5)
    assert overlong_penalty(100, 100, 20) == pytest.approx(-1.0)
    assert overlong_penalty(101, 100, 20) == -1.0
    with pytest.raises(ConfigError):
        overlong_penalty(5, 10, 20)

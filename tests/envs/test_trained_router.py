"""Trained router: learned from dev outcomes, it must beat random routing on complementary specialists."""

import numpy as np
import pytest
from conftest import Recorder, Scripted, answer_text

from coalition_gym import CollaborationEnv, System, SystemSpec, load_pool, make_protocol, make_task, run_episodes
from coalition_gym.errors import ConfigError, UnknownNameError
from coalition_gym.learners.router_model import hashed_ngrams, logistic_learner


@pytest.fixture(scope="module")
def mixed():
    # arithmetic (mathy's), algorithmic (wordy's) and logic (logician's) questions
    return make_task("mix:rg/basic_arithmetic,rg/caesar_cipher,rg/syllogism", size=40)


def test_trained_router_beats_random_routing_on_specialists(mixed):
    pool = load_pool("sim:specialists")
    items = mixed.items("test")
    router = make_protocol("trained_router")
    routed = run_episodes(System.build(SystemSpec(router, mixed, pool, split=None)), items)
    # A coalition of one is that member answering the same Ask the router would send it.
    solo = {m: np.array([r.score for r in run_episodes(System.build(SystemSpec(make_protocol("trained_router"), mixed,
                                                                               pool, [m], split=None)),
                                                         items)])
            for m in pool.member_names}
    random_routing = np.mean([s.mean() for s in solo.values()])  # expected score of a uniform draw
    score = np.mean([r.score for r in routed])
    assert score > random_routing + 0.15 and score > max(s.mean() for s in solo.values())
    picks = [r.outcome.details["chosen"] for r in routed]
    specialist = {"arithmetic": "mathy", "algorithmic": "wordy", "logic": "logician"}
    hits = np.mean([specialist[it.category] == p for it, p in zip(items, picks)])
    assert hits > 0.8


def test_dev_outcomes_are_measured_once_and_results_do_not_depend_on_batching(mixed):
    pool = load_pool("sim:specialists")
    items = mixed.items("test")[:30]
    backends = {n: Recorder(g) for n, g in pool.backends().items()}
    router = make_protocol("trained_router", dev_items=30)
    system = System.build(SystemSpec(router, mixed, backends, pool.member_names, split=None))
    batched = run_episodes(system, items)
    dev_asks = [a for r in backends.values() for c in r.calls for a in c if a.role == "dev"]
    assert len(dev_asks) == 3 * 30  # each member answered each dev item once, in one episode
    assert sum("fit" in r.outcome.details for r in batched) == 1
    assert set(router.dev_outcomes(system.learned, mixed)) == set(pool.member_names)
    again = run_episodes(system, items)  # the system keeps what its protocol learned
    assert len([a for r in backends.values() for c in r.calls for a in c if a.role == "dev"]) == 90
    assert all(r.outcome.details["cost"]["calls"] == 1 for r in again)  # routed: one member answers
    one_by_one = System.build(SystemSpec(make_protocol("trained_router", dev_items=30), mixed, pool, split=None))
    single = [run_episodes(one_by_one, [it])[0] for it in items]
    assert [(r.answer, r.outcome.details["chosen"]) for r in batched] == \
        [(r.answer, r.outcome.details["chosen"]) for r in single]


def test_fit_ahead_of_time_forget_and_a_coalition_of_one(mixed):
    pool = load_pool("sim:specialists")
    router = make_protocol("trained_router", dev_items=12)
    system = System.build(SystemSpec(router, mixed, pool, split=None))
    known = router.fit(system.learned, mixed, pool.backends(), pool.member_names)
    assert set(known) == set(pool.member_names) and all(len(v) == 12 for v in known.values())
    results = run_episodes(system, mixed.items()[:6])
    assert all(r.outcome.details["cost"]["calls"] == 1 and "fit" not in r.outcome.details for r in results)
    system.learned.forget(["wordy"])
    assert set(router.dev_outcomes(system.learned, mixed)) == {"mathy", "logician"}
    (alone,) = run_episodes(System.build(SystemSpec(make_protocol("trained_router"), mixed, pool, ["wordy"],
                                                    split=None)), mixed.items()[:1])
    assert alone.outcome.details["routed_by"] == "alone" and alone.outcome.details["cost"]["calls"] == 1


def test_any_callable_can_be_the_learner(task):
    last = lambda questions, outcomes: (lambda q: np.arange(outcomes.shape[1], dtype=float))  # noqa: E731
    gen = Scripted(lambda ask: answer_text(ask.member))
    out = run_episodes(System.build(SystemSpec(make_protocol("trained_router", learner=last), task,
                                               {m: gen for m in "abc"}, ["a", "b", "c"], split=None)), task.items())
    assert {r.outcome.details["chosen"] for r in out} == {"c"}
    assert isinstance(make_protocol("trained_router", learner=last).settings()["learner"], str)  # JSON-safe
    with pytest.raises(UnknownNameError, match="logistic"):
        make_protocol("trained_router", learner="logistc")


def test_hashed_features_and_the_logistic_learner():
    a, b = hashed_ngrams("Calculate 12 + 7."), hashed_ngrams("Calculate 3 + 95.")
    assert np.allclose(a, b) and np.isclose(np.linalg.norm(a), 1.0)  # numbers do not matter, templates do
    questions = ["Calculate 1 + 2", "Decrypt this cipher: abc"] * 10
    outcomes = np.array([[1, 0], [0, 1]] * 10, dtype=float)
    predict = logistic_learner(questions, outcomes)
    assert predict("Calculate 5 + 5").argmax() == 0 and predict("Decrypt this cipher: xyz").argmax() == 1


def test_in_the_gym_env_the_router_is_fitted_at_construction_and_the_policy_never_answers_dev_items():
    env = CollaborationEnv(protocol="trained_router", task_kwargs={"size": 40}, dev_items=10)
    router = env.system.protocol
    measured = router.dev_outcomes(env.system.learned, env.system.task)
    assert sorted(measured) == sorted(env.system.frozen) and all(len(v) == 10 for v in measured.values())
    asked, chosen = 0, []
    for seed in range(40):
        obs, info = env.reset(seed=seed)
        steps = 0
        done = False
        while not done:
            assert env.pending_ask is None or env.pending_ask.role == "answer"
            obs, reward, done, _, info = env.step(answer_text("1"))
            steps += 1
        assert steps == 1 and info["details"]["assumed"] == ["policy"]
        asked += info["details"]["chosen"] == "policy"
        chosen.append(info["details"]["chosen"])
    prior = float(np.mean([v.mean() for v in measured.values()]))
    assert 0 < asked < 40 and len(set(chosen)) > 1  # routed to the policy on some questions only
    assert router.dev_outcomes(env.system.learned, env.system.task).keys() == measured.keys()  # nothing measured since
    # the policy is routed exactly where no frozen member is predicted above the seat prior
    env.reset(seed=3)
    info = env.step(answer_text("1"))[4]
    frozen_best = max(s for m, s in info["details"]["scores"].items() if m != "policy")
    assert (info["details"]["chosen"] == "policy") == (frozen_best < prior)


def test_an_explicit_seat_prior_and_bad_priors():
    always = CollaborationEnv(protocol="trained_router", task_kwargs={"size": 20}, dev_items=5, seat_prior=1.0)
    never = CollaborationEnv(protocol="trained_router", task_kwargs={"size": 20}, dev_items=5, seat_prior=0.0)
    for seed in range(5):
        always.reset(seed=seed)
        never.reset(seed=seed)
        assert always.step(answer_text("1"))[4]["details"]["chosen"] == "policy"
        assert never.step(answer_text("1"))[4]["details"]["chosen"] != "policy"
    with pytest.raises(ConfigError, match="seat_prior=1.5"):
        make_protocol("trained_router", seat_prior=1.5)


def test_the_router_knowledge_is_learned_state_outside_the_settings_and_can_be_shared(mixed):
    from coalition_gym.learners.router_model import RouterKnowledge

    pool = load_pool("sim:specialists")
    shared = RouterKnowledge("logistic")
    first = make_protocol("trained_router", dev_items=10)
    first.fit(shared, mixed, pool.backends(), pool.member_names)
    second = make_protocol("trained_router", dev_items=10)
    assert set(second.dev_outcomes(shared, mixed)) == set(pool.member_names)  # measured once, known to both
    assert first == second and "knowledge" not in first.settings() and first.settings()["dev_items"] == 10
    spec = SystemSpec(first, mixed, pool, split=None)
    assert isinstance(System.build(spec).learned, RouterKnowledge)  # each system starts its own
    assert System.build(spec).learned is not System.build(spec).learned
    results = run_episodes(System.build(SystemSpec(second, mixed, pool, split=None), learned=shared),
                           mixed.items("test")[:5])
    assert all("fit" not in r.outcome.details for r in results)  # nobody was measured inside an episode

"""Heterogeneous Swarms: graph decoding, topological execution, PSO, saving and reusing graphs."""

import json

import numpy as np
import pytest
from conftest import Scripted, answer_text

from coalition_gym import AgentProfile, Pool, SimulatedAgent, make_task
from coalition_gym.cli import main
from coalition_gym.envs.protocols import EpisodeContext, SwarmGraph, make_protocol
from coalition_gym.envs.protocols.swarm_graph import decode, layers, predecessors, top_p_pick
from coalition_gym.envs.runner import run_programs
from coalition_gym.errors import ConfigError
from coalition_gym.learners.pso import PSOConfig, particle_swarm
from coalition_gym.training.swarm_search import optimise_swarm, swarm_system


def reaches_end(successor, node):
    seen = set()
    while successor[node] is not None:
        if node in seen:
            return False
        seen.add(node)
        node = successor[node]
    return True


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_decoding_always_yields_a_dag_with_one_end_node(n):
    rng = np.random.default_rng(n)
    for trial in range(40):
        weights = rng.uniform(-0.5, 1.5, (n, n))
        successor = decode(weights, 0.7, np.random.default_rng(trial))
        assert successor.count(None) == 1
        assert all(s != k for k, s in enumerate(successor))
        assert all(reaches_end(successor, k) for k in range(n))  # acyclic: every path ends at the end node
        depth = layers(successor)
        end = successor.index(None)
        assert depth[end] == max(depth) and depth.count(depth[end]) == 1
        assert all(depth[p] < depth[k] for k, preds in enumerate(predecessors(successor)) for p in preds)


def test_the_node_pointing_least_to_others_ends_the_graph():
    weights = np.array([[0, 1, 1], [0.05, 0, 0], [1, 1, 0]], dtype=float)
    assert decode(weights, 0.0, np.random.default_rng(0)).index(None) == 1  # smallest out-degree
    assert top_p_pick(np.array([0.2, 0.5, 0.3]), 0.0, np.random.default_rng(0)) == 1
    picks = {top_p_pick(np.array([0.45, 0.45, 0.1]), 0.7, np.random.default_rng(s)) for s in range(50)}
    assert picks == {0, 1}  # the nucleus excludes the tail


def test_without_a_graph_every_member_can_end_the_swarm():
    ends = {make_protocol("heterogeneous_swarms", decode_seed=s).structure(tuple("abcd"))[0].index(None)
            for s in range(60)}
    assert ends == {0, 1, 2, 3}  # equal weights: no member is favoured for its place in the coalition
    proto = make_protocol("heterogeneous_swarms")
    assert proto.structure(tuple("abcd")) == proto.structure(tuple("abcd"))  # decoded once per coalition


def test_nodes_run_in_topological_order_and_the_end_node_answers(task):
    # a and b start; c reads both and ends: a -> c, b -> c
    graph = SwarmGraph.from_matrix("abc", [[0, 0, 1], [0, 0, 1], [0, 0, 0]])
    seen = []

    def reply(ask):
        seen.append(ask)
        return answer_text({"a": "7", "b": "5", "c": "7"}[ask.member])

    gen = Scripted(reply)
    proto = make_protocol("heterogeneous_swarms", graph=graph, top_p=0.0)
    ctx = EpisodeContext(item=task.items()[0], task=task, members=("a", "b", "c"), seed=0)
    (out,) = run_programs([proto.start(ctx)], {m: gen for m in "abc"})
    assert [[a.member for a in c] for c in gen.calls] == [["a", "b"], ["c"]]
    end = seen[-1]
    assert "Previous response 1" in end.messages[-1].content and "final answer" in end.messages[-1].content
    assert end.info["peer_answers"] == ("7", "5") and end.role == "debate"
    assert out.answer == "7" and out.details["end"] == "c" and out.details["edges"] == [["a", "c"], ["b", "c"]]
    alone = EpisodeContext(item=task.items()[0], task=task, members=("b",), seed=0)
    (single,) = run_programs([proto.start(alone)], {"b": gen})
    assert single.answer == "5" and single.details["edges"] == []


def test_graphs_save_load_restrict_and_reject_bad_input(tmp_path):
    graph = SwarmGraph.from_matrix(["x", "y"], [[5, 0.3], [0.2, 5]], dev_score=0.5)
    assert graph.adjacency == ((0.0, 0.3), (0.2, 0.0))  # the diagonal is cleared
    path = graph.save(tmp_path / "g.json")
    again = SwarmGraph.load(path)
    assert again == graph and again.meta["dev_score"] == 0.5
    sub = again.restricted(["y", "policy", "x"], default_weight=0.5)
    assert sub.tolist() == [[0, 0.5, 0.2], [0.5, 0, 0.5], [0.3, 0.5, 0]]
    assert make_protocol("heterogeneous_swarms", graph=str(path)).loaded_graph == graph
    with pytest.raises(ConfigError, match="cannot read"):
        make_protocol("heterogeneous_swarms", graph=str(tmp_path / "missing.json"))
    with pytest.raises(ConfigError, match="2 x 2"):
        SwarmGraph(("x", "y"), ((0.0,),))
    with pytest.raises(ConfigError, match="top_p"):
        make_protocol("heterogeneous_swarms", top_p=2)


def test_pso_improves_a_simple_objective():
    target = np.array([0.9, 0.1, 0.6])

    def objective(particles):
        return [-float(np.sum((p - target) ** 2)) for p in particles]

    result = particle_swarm(objective, 3, PSOConfig(iterations=30, patience=30, seed=1))
    assert result.history == sorted(result.history) and result.history[-1] > result.history[0]
    assert result.best_score > np.mean(result.scores[0]) and result.evaluations == 150
    stuck = particle_swarm(lambda ps: [0.0] * len(ps), 2, PSOConfig(iterations=20, patience=3))
    assert stuck.stopped == "patience" and stuck.iterations == 4


def oracle_pool():
    """One member always knows and ignores the others; three know almost nothing and copy nobody."""
    weak = dict(skill=0.05, conformity=0.0, recognition=0.0, diversity=0.0)
    members = {"oracle": SimulatedAgent(AgentProfile("oracle", skill=1.0, slip=0.0, conformity=0.0))}
    members.update({n: SimulatedAgent(AgentProfile(n, **weak)) for n in ("w1", "w2", "w3")})
    return Pool(members=members, name="oracle")


def test_pso_finds_the_graph_that_ends_at_the_oracle(tmp_path):
    task = make_task("rg/basic_arithmetic", size=40)
    search = optimise_swarm(swarm_system(oracle_pool(), task), PSOConfig(seed=3), out=tmp_path / "graph.json")
    first_round = search.pso.scores[0]
    assert search.graph.meta["end"] == "oracle" and search.dev_score == 1.0
    assert search.dev_score > np.mean(first_round) and search.dev_items == 10  # 25% of the dev split
    assert search.generations < search.asks  # start nodes are shared between particles
    saved = json.loads((tmp_path / "graph.json").read_text())
    assert saved["members"] == ["oracle", "w1", "w2", "w3"] and saved["meta"]["history"] == search.pso.history
    reused = make_protocol("heterogeneous_swarms", graph=str(tmp_path / "graph.json"))
    assert reused.structure(("oracle", "w1", "w2", "w3"))[0].index(None) == 0


def test_cgym_eval_reuses_a_saved_graph(tmp_path, capsys):
    graph = SwarmGraph.from_matrix(["atlas", "borealis", "cirrus", "delta"],
                                   [[0, 1, 1, 0], [1, 0, 1, 0], [1, 1, 0, 0], [0.01, 0.01, 0.01, 0]])
    graph.save(tmp_path / "g.json")
    out = tmp_path / "eval"
    assert main(["eval", "--protocol", "heterogeneous_swarms", "--set", f"graph={tmp_path / 'g.json'}",
                 "--items", "10", "--estimator", "loo", "--bootstrap", "50", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["protocol_settings"]["graph"] == str(tmp_path / "g.json")

"""What a run writes and shows: the leaderboard of one evaluation (leaderboard.py, tables.py, html.py),
comparisons of runs (compare.py), sweeps over pools x tasks x protocols (sweep.py) and the robustness
leaderboard (robustness.py, robustness_files.py). The estimators they report live in ``valuation``."""

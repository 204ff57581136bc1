"""What a run writes and shows: the leaderboard of one evaluation (leaderboard.py, tables.py), comparisons of runs
(compare.py), sweeps over pools x tasks x protocols (sweep.py: a typed SweepReport), the robustness leaderboard
(robustness.py, robustness_files.py) and the gain over cost-matched baselines (gain.py, baselines.py, gain_files.py,
pareto.py: the one Pareto plot, drawn once to SVG and PNG). Every report builds its rows once as a
:class:`.table.Table` (rendered to Markdown, CSV, the terminal and a sortable HTML table, html.py's pages, from
the same columns) and writes its folder with one call, ``result_files.write_bundle``. The estimators they report
live in ``valuation``."""

"""Running untrusted code: the process launcher (isolation, limits, verdict by nonce) and the two-process
harness that keeps a candidate's code and the tests that judge it in separate sandboxed processes.
Scorers (scorers/code.py, scorers/kernels.py) build on it; nothing here knows what a task is."""

from .launcher import Limits, Program, RunResult, run_program, run_programs
from .two_process import SplitProgram, run_split, run_splits

__all__ = ["Limits", "Program", "RunResult", "run_program", "run_programs", "SplitProgram", "run_split", "run_splits"]

"""Answer extraction and scoring. Every scorer returns a ``ScoreResult`` (score in [0, 1], whether
the answer was parsed, and why); execution-based scorers run code in ``coalition_gym.sandbox``.
``kinds.py`` composes them into answer kinds (a parser + a rubric each), the one thing a task scores
with; :func:`register_answer_kind` adds one."""

from ..sandbox import Limits, Program, RunResult, run_program, run_programs
from .answers import extract_final_answer, normalize_answer
from .choice import extract_choice, score_choice
from .code import extract_code, score_programs
from .kernels import KernelConfig, score_kernels
from .kinds import ANSWER_KINDS, AnswerKind, ScoringContext, register_answer_kind, resolve_answer_kind
from .mathematics import boxed_match, extract_boxed, math_equivalent, numeric_match, score_math
from .ranking import ndcg_at_k, parse_ranking, score_ranking
from .result import ScoreResult
from .text import score_exact, score_f1, token_f1

__all__ = ["extract_final_answer", "normalize_answer", "extract_choice", "score_choice", "extract_code",
           "score_programs", "KernelConfig", "score_kernels", "boxed_match", "extract_boxed", "math_equivalent",
           "numeric_match", "score_math", "ndcg_at_k", "parse_ranking", "score_ranking", "ScoreResult", "Limits",
           "Program", "RunResult", "run_program", "run_programs", "score_exact", "score_f1", "token_f1", "ANSWER_KINDS",
           "AnswerKind", "ScoringContext", "register_answer_kind", "resolve_answer_kind"]

"""The rule engine: recommend hardware for a workload under constraints. evaluation.py
evaluates every candidate and ranks the feasible ones; the candidates, constraint checks,
ranking and explanations each have their own module."""

from advisor.engine.evaluation import recommend
from advisor.engine.result import Alternative, Recommendation, Rejection, Result, SizedFigures

__all__ = ["Alternative", "Recommendation", "Rejection", "Result", "SizedFigures", "recommend"]

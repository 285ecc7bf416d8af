"""LLM baselines: ask frontier LLMs for the two-body force (Vafa et al. 2025, docs/protocol.md, "LLM baselines").

- :mod:`~orbitlaw.discovery.llm.prompt` builds the reference prompt (byte for byte with ``reference=True``);
- :mod:`~orbitlaw.discovery.llm.systems` draws two-body systems and reads/writes the reference's file layout;
- :mod:`~orbitlaw.discovery.llm.providers` calls OpenAI, Anthropic, Gemini or an OpenAI-compatible endpoint;
- :mod:`~orbitlaw.discovery.llm.cache` keeps every raw response on disk;
  :mod:`~orbitlaw.discovery.llm.parse` reads answers; :mod:`~orbitlaw.discovery.llm.score` scores them;
- :mod:`~orbitlaw.discovery.llm.runner` ties a run together and sends the answers to symbolic regression;
  :mod:`~orbitlaw.discovery.llm.plot` draws predicted vs true |F|.

Units: AU, years, solar masses; forces in M_sun AU / yr^2 (G = 4 pi^2).
"""

from orbitlaw.discovery.llm.parse import ParsedAnswer, parse_answer
from orbitlaw.discovery.llm.prompt import REVEALED, STEPS, build_prompt
from orbitlaw.discovery.llm.score import r2, score_reference, score_system

__all__ = ["REVEALED", "STEPS", "ParsedAnswer", "build_prompt", "parse_answer", "r2", "score_reference",
           "score_system"]

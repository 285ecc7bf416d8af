"""LLM baselines: ask frontier LLMs for the two-body force (Vafa et al. 2025, science.md section 6).

- :mod:`~discovery.llm.prompt` builds the reference prompt (byte for byte with ``reference=True``);
- :mod:`~discovery.llm.systems` draws two-body systems and reads/writes the reference's file layout;
- :mod:`~discovery.llm.providers` calls OpenAI, Anthropic, Gemini or an OpenAI-compatible endpoint;
- :mod:`~discovery.llm.cache` keeps every raw response on disk; :mod:`~discovery.llm.parse` reads answers;
- :mod:`~discovery.llm.score` scores them; :mod:`~discovery.llm.runner` ties a run together and sends
  the answers to symbolic regression; :mod:`~discovery.llm.plot` draws predicted vs true |F|.

Units: AU, years, solar masses; forces in M_sun AU / yr^2 (G = 4 pi^2).
"""

from discovery.llm.parse import ParsedAnswer, parse_answer
from discovery.llm.prompt import REVEALED, STEPS, build_prompt
from discovery.llm.score import r2, score_reference, score_system

__all__ = ["REVEALED", "STEPS", "ParsedAnswer", "build_prompt", "parse_answer", "r2", "score_reference",
           "score_system"]

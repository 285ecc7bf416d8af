"""discovery: force probes, symbolic regression and LLM baselines for the orbit experiment."""

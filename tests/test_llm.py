"""LLM baselines: prompt, parser, scoring, and runs against loopback HTTP servers through the real SDKs."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from orbitlaw.cli import main
from orbitlaw.discovery.llm import parse_answer
from orbitlaw.discovery.llm.prompt import build_prompt
from orbitlaw.discovery.llm.providers import Settings
from orbitlaw.discovery.llm.runner import run as run_llm
from orbitlaw.discovery.llm.systems import generate_systems

REFERENCE = Path(__file__).resolve().parents[1].parent / "shared" / "reference" / "vafa2025"
KEY = "sk-test-Zq8vJ1nR4tS7uW0x"
needs_reference = pytest.mark.skipif(not (REFERENCE / "llm-prompts").is_dir(),
                                     reason=f"reference data not found at {REFERENCE}")


# ----------------------------------------------------------------------------------------------------
# prompt and parser


@needs_reference
def test_reference_prompts_are_reproduced_byte_for_byte():
    d = REFERENCE / "llm-prompts"
    for i in range(5):
        prompt = build_prompt(np.load(d / f"traj_{i}.npy"), np.load(d / f"true_force_{i}.npy"),
                              np.load(d / f"unmasked_inds_{i}.npy"), reference=True)
        assert prompt.encode() == (d / f"{i}.txt").read_bytes()
        truthful = build_prompt(np.load(d / f"traj_{i}.npy"), np.load(d / f"true_force_{i}.npy"),
                                np.load(d / f"unmasked_inds_{i}.npy"))
        assert "The sun is at the origin." not in truthful and "not fixed at the origin" in truthful
        assert truthful.count("Timestep: ") == 450 and truthful.count("Outcome: Unk") == 440


@pytest.mark.parametrize("text, expected", [
    ("ANSWER: {0: 1e-5, 1: 2.0E-05}", {0: 1e-5, 1: 2e-5}),
    ("reasoning...\nANSWER: {\n  0: 1.5e-06,\n  1: 1.6e-06,\n}\n", {0: 1.5e-6, 1: 1.6e-6}),
    ('```python\nANSWER: {"0": 3e-05, "1": "3.1e-05"}\n```', {0: 3e-5, 1: 3.1e-5}),
    ("ANSWER:\n```json\n{\"0\": 0.5, \"1\": .25}\n```", {0: 0.5, 1: 0.25}),
    ("**ANSWER:** {'0': 7, '1': +8.0e+00}", {0: 7.0, 1: 8.0}),
    ("answer: {0:1,1:2,}", {0: 1.0, 1: 2.0}),
    ("ANSWER: {\n 0: 1.0e-8, # known\n 1: 2.0e-8 // guess\n}", {0: 1e-8, 1: 2e-8}),
    ("Format: ANSWER: {0: 1.0e-8, ..., 449: 1.0e-8}\nFinal ANSWER: {0: 4e-6}", {0: 4e-6}),
])
def test_parse_accepts_many_formats(text, expected):
    parsed = parse_answer(text)
    assert parsed.ok, parsed.error
    assert parsed.values == pytest.approx(expected)


@pytest.mark.parametrize("text, reason", [
    ("", "empty"), (None, "empty"), ("I cannot determine the forces.", "no 'ANSWER:'"),
    ("ANSWER: {0: 1.0e-8, 1: 1.0e-8, ...}", "not 'timestep: number'"),
    ("ANSWER: {0: 1e-5, 1: 2e-5", "no closing"), ("ANSWER: [1e-5, 2e-5]", "no '{'"),
    ("ANSWER: {0: nan}", "not 'timestep"), ("ANSWER: {0: __import__('os').system('true')}", "not 'timestep"),
    ("ANSWER: {0: 1e999}", "not finite"), ("ANSWER: {}", "empty"), ("ANSWER: {0: {1: 2}}", "nested"),
])
def test_parse_failures_are_reported_not_raised(text, reason):
    parsed = parse_answer(text)
    assert not parsed.ok and reason in parsed.error


# ----------------------------------------------------------------------------------------------------
# scoring the reference's recorded answers


@needs_reference
def test_score_reproduces_reference_r2(tmp_path):
    from sklearn.metrics import r2_score

    out = tmp_path / "scores.json"
    assert main(["llm", "score", "--prompts", str(REFERENCE / "llm-prompts"), "--predictions",
                 str(REFERENCE / "llm-predictions"), "--out", str(out), "--no-discover"]) == 0
    doc = json.loads(out.read_text())
    results = {(r["model"], r["system"]): r for r in doc["results"]}
    models = ("o3", "claude-sonnet-4-20250514", "gemini-2.5-pro")
    assert set(results) == {(m, i) for m in models for i in range(5)}
    for (model, i), r in results.items():
        truth = np.load(REFERENCE / "llm-prompts" / f"true_force_{i}.npy").reshape(-1)
        answer = json.loads((REFERENCE / "llm-predictions" / model / f"{i}.json").read_text())
        pred = np.array([answer[str(k)] for k in range(450)], dtype=float)
        held = ~np.isin(np.arange(450), np.load(REFERENCE / "llm-prompts" / f"unmasked_inds_{i}.npy"))
        assert r["parsed"] and r["n_parsed"] == 450 and r["n_heldout"] == 440
        assert r["r2_all"] == pytest.approx(r2_score(truth, pred), rel=1e-9)
        assert r["r2_heldout"] == pytest.approx(r2_score(truth[held], pred[held]), rel=1e-9)
        assert r["mae"] == pytest.approx(np.mean(np.abs(truth - pred)), rel=1e-9)
    # the reference's verdict: no model predicts the force on most systems
    for model in models:
        assert sum(results[model, i]["r2_all"] > 0.9 for i in range(5)) <= 2
    assert results["o3", 1]["r2_all"] == pytest.approx(0.9540, abs=1e-4)
    assert results["claude-sonnet-4-20250514", 0]["r2_all"] == pytest.approx(-1001.79, abs=0.01)


def test_score_missing_files_is_one_line_error(tmp_path, capsys):
    prompts, preds = tmp_path / "p", tmp_path / "q"
    prompts.mkdir()
    (preds / "m").mkdir(parents=True)
    np.save(prompts / "true_force_0.npy", np.ones((450, 1)))
    out = tmp_path / "s.json"
    assert main(["llm", "score", "--prompts", str(prompts), "--predictions", str(preds), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "unmasked_inds_0.npy is missing" in err and not out.exists()
    np.save(prompts / "unmasked_inds_0.npy", np.arange(10))
    assert main(["llm", "score", "--prompts", str(prompts), "--predictions", str(preds), "--out", str(out)]) == 2
    assert "no readable" in capsys.readouterr().err and not out.exists()


# ----------------------------------------------------------------------------------------------------
# a loopback server speaking the OpenAI, Anthropic and Gemini HTTP APIs


def _encodings(key: str) -> str:
    """The key's middle 12 characters, its base64, hex and reversed forms: what a hostile server echoes."""
    import base64

    middle = key[len(key) // 2 - 6:len(key) // 2 + 6]
    return (f"{middle} {base64.b64encode(key.encode()).decode()} {base64.urlsafe_b64encode(key.encode()).decode()} "
            f"{key.encode().hex()} {key.encode().hex().upper()} {key[::-1]} {key[5:11]}")


def _fragments_in(text: str, key: str) -> list[str]:
    """Every 6-character piece of the key, or 8 of its base64 / 12 of its hex, found in ``text``."""
    import base64

    forms = [(key, 6), (key[::-1], 6), (key.encode().hex(), 12), (key.encode().hex().upper(), 12),
             (base64.b64encode(key.encode()).decode(), 8), (base64.urlsafe_b64encode(key.encode()).decode(), 8)]
    return [form[i:i + n] for form, n in forms for i in range(len(form) - n + 1) if form[i:i + n] in text]


class FakeLLM:
    """Answers each prompt with the true forces of its system (plus 1% of their spread as noise); ``behaviour(system,
    count)`` may return "garbage", "429", "500", "sleep" or None (answer). Counts requests per system."""

    def __init__(self, systems, behaviour=lambda system, count: None, sleep_s=1.0):
        self.by_line = {f"Timestep: 0, Coordinates: ({s.coords[0, 0]:.2f}, {s.coords[0, 1]:.2f})": s
                        for s in systems}
        self.behaviour, self.sleep_s = behaviour, sleep_s
        self.counts: dict[int, int] = {}
        self.auth: set[str] = set()
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.auth.add(self.headers.get("Authorization") or self.headers.get("x-api-key")
                              or self.headers.get("x-goog-api-key") or "")
                if "contents" in body:  # gemini
                    prompt = body["contents"][0]["parts"][0]["text"]
                else:
                    prompt = body["messages"][0]["content"]
                    prompt = prompt if isinstance(prompt, str) else prompt[0]["text"]
                system = next((s for line, s in fake.by_line.items() if line in prompt), None)
                if system is None:
                    return self._send(400, {"error": {"message": "unknown system", "type": "invalid_request"}})
                with fake.lock:
                    count = fake.counts[system.index] = fake.counts.get(system.index, 0) + 1
                action = fake.behaviour(system.index, count)
                if action == "401-key-prefix":  # as OpenAI echoes a bad key: its first and last characters
                    return self._send(401, {"error": {"message": f"Incorrect API key provided: {KEY[:10]}*****"
                                                      f"{KEY[-4:]}; escaped {json.dumps(KEY)[1:-1][:12]}",
                                                      "type": "invalid_request_error"}})
                if action == "401-key-encoded":  # a hostile server: the key's middle and its encodings
                    return self._send(401, {"error": {"message": f"bad key {_encodings(KEY)}",
                                                      "type": "invalid_request_error"}})
                if action in ("429", "500"):
                    return self._send(int(action), {"error": {"message": "slow down", "type": "rate_limit"}},
                                      {"retry-after-ms": "5", "retry-after": "0"})
                if action == "sleep":
                    time.sleep(fake.sleep_s)
                rng = np.random.default_rng(system.index)
                values = system.force + 0.01 * system.force.std() * rng.standard_normal(len(system.force))
                entries = ",\n".join(f"    {k}: {float(v)!r}" for k, v in enumerate(values))
                text = "Thinking...\nANSWER: {\n" + entries + ",\n}"
                if action == "garbage":
                    text = "I am not able to compute this. ANSWER: {0: 1.0e-8, 1: 1.0e-8, ...}"
                if action == "echo-encoded":
                    text = f"Received {_encodings(KEY)}.\n" + text
                if action == "echo-key":  # a reply that carries the key back, in the text and the model's name
                    text = f"Your key {KEY} (or {KEY[:8]}) was used.\n" + text
                    body = {**body, "model": f"served-for-{KEY[-6:]}"}
                self._send(200, fake.payload(self.path, body, text))

            def _send(self, status, obj, headers=None):
                data = json.dumps(obj).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @staticmethod
    def payload(path, body, text):
        if path.endswith("/chat/completions"):
            return {"id": "c1", "object": "chat.completion", "created": 0, "model": body["model"],
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}}
        if path.endswith("/messages"):
            return {"id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
                    "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 20}}
        return {"candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "finishReason": "STOP",
                                "index": 0}],
                "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 20, "totalTokenCount": 30},
                "modelVersion": "fake"}

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


SYSTEMS, SEED = 3, 7


@pytest.fixture(scope="module")
def systems():
    return generate_systems(SYSTEMS, SEED)


@pytest.fixture
def env(monkeypatch):
    pytest.importorskip("openai")
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "ORBITLAW_LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ORBITLAW_LLM_API_KEY", KEY)
    return monkeypatch


def _no_key_anywhere(root: Path):
    for path in root.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), f"API key leaked into {path}"


def _run(url, out, **kw):
    kw = {"max_retries": 2, "backoff": 0.01, "timeout": 10.0, "run_discovery": False, "progress": False, **kw}
    return run_llm("openai-compatible", "fake-model", SYSTEMS, out, seed=SEED, base_url=f"{url}/v1", **kw)


def test_no_part_of_the_key_reaches_a_file_or_the_terminal(env, systems, tmp_path, capsys):
    out = tmp_path / "run"
    with FakeLLM(systems, lambda s, c: {0: "echo-key", 1: "401-key-prefix"}.get(s)) as fake:
        doc = _run(fake.url, out, concurrency=1)
        assert fake.counts[1] == 1  # a bad key is not retried
    res = {r["system"]: r for r in doc["results"]}
    assert res[0]["parsed"] and res[2]["parsed"] and not res[1]["parsed"] and "401" in json.dumps(res[1])
    assert "***" in json.dumps(res[1])
    printed = "".join(capsys.readouterr())
    texts = [printed] + [p.read_text(errors="replace") for p in out.rglob("*") if p.is_file()]
    for n in range(4, len(KEY) + 1):
        for part in (KEY[:n], KEY[-n:]):
            assert not any(part in t for t in texts), part


def test_run_scores_answers_records_garbage_and_resumes_from_cache(env, systems, tmp_path):
    out = tmp_path / "run"
    with FakeLLM(systems, lambda s, c: "garbage" if s == 1 else None) as fake:
        doc = _run(fake.url, out, concurrency=2)
        assert fake.total == SYSTEMS and fake.auth == {f"Bearer {KEY}"}
        res = {r["system"]: r for r in doc["results"]}
        for i in (0, 2):
            assert res[i]["parsed"] and res[i]["n_parsed"] == 450 and res[i]["r2_all"] > 0.99
            assert res[i]["r2_heldout"] > 0.99 and res[i]["mae"] < 1e-2 * systems[i].force.mean()
        assert not res[1]["parsed"] and "not 'timestep: number'" in res[1]["parse_error"]
        assert res[1]["r2_all"] is None and res[1]["n_parsed"] == 0
        raw = json.loads((out / res[1]["response_file"]).read_text())
        assert raw["text"].startswith("I am not able")  # the raw text is kept
        for name in ("results.json", "answers.csv", "forces.png", "prompts/0.txt", "prompts/true_force_2.npy",
                     "predictions/fake-model/0.json"):
            assert (out / name).is_file(), name
        assert not (out / "predictions/fake-model/1.json").exists()
        header, *lines = (out / "answers.csv").read_text().splitlines()
        assert set("r,m1,m2,F_true,F_pred,system,step".split(",")) <= set(header.split(","))
        assert len(lines) == 900
        stored = json.loads((out / "results.json").read_text())
        assert stored["code_version"] and stored["config"]["systems"] == SYSTEMS
        assert "The sun is at the origin." not in (out / "prompts" / "0.txt").read_text()

        env.delenv("ORBITLAW_LLM_API_KEY")  # a finished run re-scores offline: no key, no request
        again = _run(fake.url, out)  # everything is served from the cache
        assert fake.total == SYSTEMS
        assert [r["r2_all"] for r in again["results"]] == [r["r2_all"] for r in doc["results"]]
    _no_key_anywhere(out)


def test_no_fragment_or_encoding_of_the_key_reaches_a_file_or_the_terminal(env, systems, tmp_path, capsys):
    out = tmp_path / "run"
    with FakeLLM(systems, lambda s, c: {0: "echo-encoded", 1: "401-key-encoded"}.get(s)) as fake:
        doc = _run(fake.url, out, concurrency=1)
    res = {r["system"]: r for r in doc["results"]}
    assert res[0]["parsed"] and res[0]["n_parsed"] == 450 and not res[1]["parsed"] and "401" in json.dumps(res[1])
    printed = "".join(capsys.readouterr())
    for path in [None, *(p for p in out.rglob("*") if p.is_file())]:
        text = printed if path is None else path.read_text(errors="replace")
        assert not _fragments_in(text, KEY), (path, _fragments_in(text, KEY))


def test_an_openai_key_is_sent_only_to_openai(monkeypatch, tmp_path):
    from orbitlaw.discovery.llm.providers import api_key

    for name in ("OPENAI_API_KEY", "ORBITLAW_LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-openai-key-000000")
    with pytest.raises(ValueError, match="OPENAI_API_KEY is sent only to api.openai.com, not to 127.0.0.1"):
        api_key("openai-compatible", "http://127.0.0.1:8000/v1")
    assert api_key("openai-compatible", "https://api.openai.com/v1") == "sk-real-openai-key-000000"
    assert api_key("openai", "http://127.0.0.1:8000/v1") == "sk-real-openai-key-000000"  # asked for explicitly
    monkeypatch.setenv("ORBITLAW_LLM_API_KEY", "local-key-123456")
    assert api_key("openai-compatible", "http://127.0.0.1:8000/v1") == "local-key-123456"


def test_rate_limit_is_retried(env, systems, tmp_path):
    with FakeLLM(systems, lambda s, c: "429" if c == 1 else ("500" if c == 2 and s == 0 else None)) as fake:
        doc = _run(fake.url, tmp_path / "run", max_retries=3)
        assert fake.counts == {0: 3, 1: 2, 2: 2}
    res = {r["system"]: r for r in doc["results"]}
    assert [res[i]["attempts"] for i in range(3)] == [3, 2, 2] and all(r["parsed"] for r in res.values())


def test_timeout_is_recorded_and_retried_on_rerun(env, systems, tmp_path, capsys):
    out = tmp_path / "run"
    slow = {0}
    with FakeLLM(systems, lambda s, c: "sleep" if s in slow else None, sleep_s=1.5) as fake:
        code = main(["llm", "run", "--provider", "openai-compatible", "--model", "fake-model", "--base-url",
                     f"{fake.url}/v1", "--systems", str(SYSTEMS), "--seed", str(SEED), "--out", str(out),
                     "--timeout", "0.25", "--max-retries", "1", "--backoff", "0.01", "--no-discover",
                     "--no-progress"])
        # the 0.25 s client timeout against a 1.5 s answer shows in the recorded "Timeout" errors below, not
        # in a wall-clock assertion (pytest-timeout guards against a hang)
        assert code == 1 and fake.counts[0] == 2  # one retry after the timeout
        err = capsys.readouterr().err
        assert "request(s) failed" in err and "Timeout" in err and KEY not in err
        res = {r["system"]: r for r in json.loads((out / "results.json").read_text())["results"]}
        assert "Timeout" in res[0]["error"] and not res[0]["parsed"] and res[1]["parsed"]
        slow.clear()
        before = dict(fake.counts)
        assert main(["llm", "run", "--provider", "openai-compatible", "--model", "fake-model", "--base-url",
                     f"{fake.url}/v1", "--systems", str(SYSTEMS), "--seed", str(SEED), "--out", str(out),
                     "--no-discover", "--no-progress"]) == 0
        assert fake.counts[0] == before[0] + 1 and fake.counts[1] == before[1]  # only the failed one
    _no_key_anywhere(out)


def test_every_request_failing_is_an_error(env, systems, tmp_path, capsys):
    out = tmp_path / "run"
    with FakeLLM(systems, lambda s, c: "500") as fake:
        code = main(["llm", "run", "--provider", "openai-compatible", "--model", "m", "--base-url", f"{fake.url}/v1",
                     "--systems", str(SYSTEMS), "--seed", str(SEED), "--out", str(out), "--max-retries", "1",
                     "--backoff", "0", "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and err.count("\n") == 0 and "every request failed" in err
    assert not (out / "results.json").exists()


def test_bad_input_is_one_line_and_writes_nothing(env, tmp_path, capsys):
    out = tmp_path / "run"
    base = ["llm", "run", "--model", "m", "--systems", "1", "--out", str(out)]
    assert main([*base, "--provider", "nope"]) == 2
    assert "unknown provider" in capsys.readouterr().err
    env.delenv("ORBITLAW_LLM_API_KEY")
    assert main([*base, "--provider", "openai-compatible", "--base-url", "http://127.0.0.1:9/v1"]) == 2
    assert "ORBITLAW_LLM_API_KEY" in capsys.readouterr().err
    assert main([*base, "--provider", "anthropic"]) == 2
    assert "ANTHROPIC_API_KEY" in capsys.readouterr().err
    env.setenv("ORBITLAW_LLM_API_KEY", KEY)
    assert main([*base, "--provider", "openai-compatible"]) == 2
    assert "--base-url is required" in capsys.readouterr().err
    assert not out.exists()
    flags = ["--provider", "openai-compatible", "--base-url", "http://127.0.0.1:9/v1"]
    for bad, message in ((["--systems", "0"], "--systems must be >= 1, got 0"),
                         (["--concurrency", "0"], "--concurrency must be >= 1, got 0"),
                         (["--timeout", "0"], "--timeout must be > 0, got 0.0"),
                         (["--max-retries", "-1"], "--max-retries must be >= 0, got -1")):
        assert main([*base, *flags, *bad]) == 2
        assert message in capsys.readouterr().err
    assert not out.exists()


def test_the_preset_choices_are_the_force_probe_records():
    from orbitlaw.cli import build_parser
    from orbitlaw.discovery.llm.systems import DEFAULT_PRESET, force_probe_presets

    llm = build_parser()._subparsers._group_actions[0].choices["llm"]
    run = llm._subparsers._group_actions[0].choices["run"]
    preset = next(a for a in run._actions if a.dest == "preset")
    assert tuple(preset.choices) == force_probe_presets() == ("two-body-exoplanet", "two-body")
    assert preset.default == DEFAULT_PRESET == force_probe_presets()[0]


@pytest.mark.parametrize("provider, env_name, sdk", [("anthropic", "ANTHROPIC_API_KEY", "anthropic"),
                                                     ("gemini", "GEMINI_API_KEY", "google.genai")])
def test_other_sdks_over_loopback(env, systems, tmp_path, provider, env_name, sdk):
    pytest.importorskip(sdk)
    env.setenv(env_name, KEY)
    out = tmp_path / provider
    with FakeLLM(systems, lambda s, c: "429" if c == 1 and s == 2 else None) as fake:
        base_url = f"{fake.url}/v1" if provider == "openai" else fake.url
        doc = run_llm(provider, "fake-model", SYSTEMS, out, seed=SEED, base_url=base_url, max_retries=2,
                      backoff=0.01, timeout=10.0, run_discovery=False, progress=False,
                      settings=Settings(temperature=0.0, max_tokens=20000))
        assert fake.counts == {0: 1, 1: 1, 2: 2}
        assert any(KEY in a for a in fake.auth)
    assert all(r["parsed"] and r["r2_all"] > 0.99 for r in doc["results"])
    _no_key_anywhere(out)


def test_two_models_share_a_directory_and_sr_runs(env, systems, tmp_path):
    pytest.importorskip("pyoperon")
    pytest.importorskip("orbitlaw.discovery.sr.symbolic", reason="orbitlaw.discovery.sr.symbolic is not there")
    from orbitlaw.discovery.sr.backends import SearchSettings

    out = tmp_path / "run"
    with FakeLLM(systems) as fake:
        _run(fake.url, out)
        doc = run_llm("openai-compatible", "other/model", SYSTEMS, out, seed=SEED, base_url=f"{fake.url}/v1",
                      backoff=0.01, run_discovery=True, sr_seeds=1, sr_points=100, sr_restarts=1, progress=False,
                      sr_settings=SearchSettings(population=50, budget=2000))
    assert {r["model"] for r in doc["results"]} == {"fake-model", "other/model"}
    assert (out / "predictions" / "other_model" / "0.json").is_file()
    assert len((out / "answers.csv").read_text().splitlines()) == 1 + 2 * 450 * SYSTEMS
    law = doc["law"]["other/model"]
    assert "expression" in law and "newtonian" in law, law
    with pytest.raises(ValueError, match="another --out"):
        run_llm("openai-compatible", "x", SYSTEMS + 1, out, seed=SEED, base_url=f"{fake.url}/v1")


@pytest.mark.parametrize("offset", [270, 285, 295, 299])
def test_an_api_key_straddling_the_error_cut_never_leaks(monkeypatch, offset):
    from orbitlaw.discovery.llm.providers import ChatClient

    key = "sk-THISISASECRETKEY0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    client = ChatClient("openai", "gpt-test", base_url="http://127.0.0.1:9", max_retries=0)

    def fail(prompt):
        raise ValueError("x" * offset + f" key={key} was rejected")

    monkeypatch.setattr(client, "_once", fail)
    with pytest.raises(RuntimeError) as info:
        client.complete("hello")
    message = str(info.value)
    assert "***" in message or len(message) < offset + 60
    for n in range(8, len(key) + 1):  # no fragment of the key of 8 characters or more
        assert not any(key[i:i + n] in message for i in range(len(key) - n + 1)), message


@pytest.mark.parametrize("figure, message", [("nowhere/forces.png", "does not exist"),
                                             ("forces.txt", "must name a .png, .pdf or .svg file")])
def test_score_with_an_unusable_figure_writes_nothing(tmp_path, capsys, figure, message):
    out = tmp_path / "scores.json"
    assert main(["llm", "score", "--prompts", str(REFERENCE / "llm-prompts"), "--predictions",
                 str(REFERENCE / "llm-predictions"), "--out", str(out), "--no-discover",
                 "--figure", str(tmp_path / figure)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err
    assert not out.exists()


def test_redact_scrubs_fragments_but_leaves_the_numbers_of_an_answer():
    from orbitlaw.discovery.llm.providers import redact

    key = "sk-live-Ab3xQ123456Zz9031"
    text = f"0: 1.123456e-3, 1: 1.1309, key middle {key[5:13]}, reversed {key[::-1][:7]}"
    out = redact(text, key)
    assert "1.123456e-3" in out and "1.1309" in out  # digits alone are the answer's, even where the key has them
    assert key[5:13] not in out and key[::-1][:7] not in out and out.count("***") == 2

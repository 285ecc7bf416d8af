"""Hostile and careless inputs, tried as a user would try them: each case runs real ``orbitlaw`` processes on
files it damaged or values no one should pass, and records whether the toolkit held.

    python benchmarks/hostile_inputs.py [--work DIR] [--out benchmarks/results/hostile_inputs.json]

A *refused* case holds when the command exits non-zero with one line on stderr, within 10 s, and leaves nothing
behind (the case's directory lists the same files before and after); a *repaired* case holds when the command
succeeds and its own check passes (a rebuilt dataset verifies, a planted resume file is recomputed). The fast
ones are also in ``tests/`` (test_training, test_integrity, test_dataset, test_safety, test_failures, test_llm);
this script runs all of them together and writes the tried/held table, so the figures can be re-measured.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orbitlaw.provenance import code_version, write_json_atomic  # noqa: E402

REFUSE_WITHIN_S = 10.0
KEY = "sk-hostile-Zq8vJ1nR4tS7uW0xY2bC"


@dataclass
class Case:
    """One input: ``argv`` (after ``orbitlaw``) from ``setup(case_dir)``; ``expect`` "refused" or "repaired";
    ``message``: what the one line must say; ``check(case_dir, result) -> problems`` for a repaired case."""

    name: str
    issue: str
    setup: object
    expect: str = "refused"
    message: str = ""
    check: object = None
    env: dict = field(default_factory=dict)


TIMEOUT_S = 120.0  # a command still running then is stopped and counted as hung


def run(argv: list, cwd: Path, env: dict | None = None) -> tuple[subprocess.CompletedProcess, float]:
    """``orbitlaw ARGV`` of this checkout in ``cwd``; (the finished process, seconds)."""
    start = time.perf_counter()
    cmd = [sys.executable, "-m", "orbitlaw", *map(str, argv)]
    try:
        result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S,
                                env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    except subprocess.TimeoutExpired:
        result = subprocess.CompletedProcess(cmd, -9, "", f"hung: stopped after {TIMEOUT_S:.0f} s")
    return result, time.perf_counter() - start


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


# ------------------------------------------------------------------------------------------------------------
# Shared inputs, made once: a small dataset and a two-step run on it.

def shared(work: Path) -> tuple[Path, Path]:
    data, trained = work / "shared" / "data", work / "shared" / "run"
    if not (data / "manifest.json").exists():
        done, _ = run(["simulate", "--preset", "two-body", "--splits", "train=8,val=4", "--seed", "0", "--out",
                       data, "--quiet"], work)
        assert done.returncode == 0, done.stderr
    if not (trained / "latest").exists():
        done, _ = run(["train", "--data", data, "--preset", "tiny", "--max-steps", "2", "--checkpoint-every", "2",
                       "--eval-every", "2", "--batch-size", "2", "--out", trained, "--quiet"], work)
        assert done.returncode == 0, done.stderr
    return data, trained


def copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def table(case: Path, rows: int = 200) -> Path:
    r = np.linspace(1.0, 3.0, rows)
    path = case / "t.csv"
    path.write_text("r,m1,m2,F\n" + "".join(f"{float(x)!r},1.0,1.0,{39.478 / float(x)**2!r}\n" for x in r))
    return path


def damaged_header(case: Path, data: Path) -> Path:
    bad = copy(data, case / "data")
    tokens = bad / "val" / "tokens.npy"
    raw = bytearray(tokens.read_bytes())
    raw[raw.index(b"'descr'") + 2] ^= 0x55  # numpy's header parser raises tokenize.TokenError
    tokens.write_bytes(bytes(raw))
    return bad


def simulate_again(data: Path) -> list:
    manifest = json.loads((data / "manifest.json").read_text())
    splits = ",".join(f"{k}={v['count']}" for k, v in manifest["split_info"].items())
    return ["simulate", "--preset", manifest["preset"], "--splits", splits, "--seed", manifest["seed"], "--out", data,
            "--quiet"]


# ------------------------------------------------------------------------------------------------------------
# An OpenAI-compatible server that echoes the key's fragments and encodings in its replies.

class EchoServer:
    def __init__(self):
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                server.requests += 1
                raw = KEY.encode()
                echo = (f"{KEY[8:20]} {base64.b64encode(raw).decode()} {raw.hex()} {KEY[::-1]} "
                        f"auth={self.headers.get('Authorization', '')}")
                body = {"id": "x", "object": "chat.completion", "created": 0, "model": f"m-{KEY[-8:]}",
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": echo + " ANSWER: {}"},
                                     "finish_reason": "stop"}], "usage": {}}
                data = json.dumps(body).encode()
                self.send_response(401 if "fail" in self.path else 200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def fragments(text: str) -> list[str]:
    """Every 6 characters of the key (or 8 of its base64, 12 of its hex) found in ``text``."""
    raw = KEY.encode()
    forms = [(KEY, 6), (KEY[::-1], 6), (raw.hex(), 12), (base64.b64encode(raw).decode(), 8)]
    return [f[i:i + n] for f, n in forms for i in range(len(f) - n + 1) if f[i:i + n] in text]


# ------------------------------------------------------------------------------------------------------------

def cases(work: Path, server: EchoServer) -> list[Case]:
    data, trained = shared(work)

    def nonfinite_run(case: Path) -> list:
        import torch

        from orbitlaw.models import checkpoint

        bad = copy(trained, case / "run")
        weights, state = checkpoint.load(checkpoint.latest(bad))
        weights[next(iter(weights))][0] = float("nan")

        class Named(torch.nn.Module):
            def state_dict(self, *a, **kw):
                return weights
        shutil.rmtree(checkpoint.latest(bad))
        checkpoint.save(bad, 2, Named(), state)
        return ["evaluate", "--run", bad, "--data", data]

    def no_checksums(case: Path) -> list:
        from orbitlaw.models import checkpoint

        bad = copy(trained, case / "run")
        (checkpoint.latest(bad) / checkpoint.CHECKSUMS).unlink()
        return ["evaluate", "--run", bad, "--data", data]

    def planted_resume(case: Path) -> list:
        """A real resume file of this very run (its digest matches), its expression replaced."""
        from orbitlaw.discovery.sr.backends import SearchSettings
        from orbitlaw.discovery.sr.symbolic import DiscoverConfig, discover_law, partial_dir

        t, out = table(case), case / "LAW.json"
        config = DiscoverConfig(target="F", features=["r", "m1", "m2"], seeds=1, points=50, workers=1,
                                settings=SearchSettings(budget=500))
        discover_law(str(t), config, resume_dir=partial_dir(out))
        seed_file = partial_dir(out) / "seed_0.json"
        saved = json.loads(seed_file.read_text())
        saved["result"]["expression"] = "cos(exp(4.05e6))"  # parses, and would hang whatever evaluates it
        seed_file.write_text(json.dumps(saved))
        return ["discover", "--input", t, "--target", "F", "--features", "r,m1,m2", "--seeds", "1", "--points", "50",
                "--budget", "500", "--workers", "1", "--out", out]

    def damaged_partial(case: Path) -> list:
        out = case / "d"
        script = (f"from orbitlaw.orbits import writer\nreal = writer._write_block\ncalls = []\n"
                  "def stop(task):\n    calls.append(1)\n    if len(calls) == 2: raise KeyboardInterrupt\n"
                  "    return real(task)\nwriter._write_block = stop\n"
                  f"try: writer.simulate('two-body', {{'train': 3, 'val': 2}}, 4, {str(out)!r}, progress=False)\n"
                  "except KeyboardInterrupt: pass\n")
        subprocess.run([sys.executable, "-c", script], check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        for split in ("train", "val"):
            staged = case / ".d.partial" / split / "tokens.npy"
            raw = bytearray(staged.read_bytes())
            raw[-3] ^= 0xFF
            staged.write_bytes(bytes(raw))
        return ["simulate", "--preset", "two-body", "--splits", "train=3,val=2", "--seed", "4", "--out", out, "--quiet"]

    def verifies(path: str):
        def check(case: Path, result) -> list[str]:
            done, _ = run(["verify", "--data", case / path], case)
            return [] if done.returncode == 0 else [f"verify after it: {done.stderr.strip()}"]
        return check

    def recomputed(case: Path, result) -> list[str]:
        law = json.loads((case / "LAW.json").read_text())
        expressions = [law["expression"], *(s["expression"] for s in law["per_seed"])]
        return [] if not any("4.05e6" in e for e in expressions) else ["the planted expression reached LAW.json"]

    def no_key(case: Path, result) -> list[str]:
        texts = [result.stderr, result.stdout] + [p.read_text(errors="replace") for p in case.rglob("*") if p.is_file()]
        found = sorted({f for t in texts for f in fragments(t)})
        return [f"key fragments reached disk or the terminal: {found[:5]}"] if found else []

    llm = ["llm", "run", "--provider", "openai-compatible", "--model", "m", "--systems", "1", "--no-discover",
           "--no-progress", "--max-retries", "0"]
    return [
        Case("train --batch-size 100000 on 8 sequences", "limits", lambda c: [
            "train", "--data", data, "--preset", "tiny", "--max-steps", "1", "--batch-size", "100000", "--out",
            c / "r", "--quiet"], message="GiB free"),
        Case("probe --batch 100000000", "limits", lambda c: [
            "probe", "--run", trained, "--data", data, "--out", c / "p", "--batch", "100000000", "--steps", "1",
            "--quiet"], message="GiB free"),
        Case("probe --train-sequences 1e9 on 8 sequences", "smaller", lambda c: [
            "probe", "--run", trained, "--data", data, "--out", c / "p", "--train-sequences", "1000000000", "--steps",
            "1", "--quiet"], message="--train-sequences 1000000000 leaves no held-out sequence"),
        Case("discover --budget 1e14", "limits", lambda c: [
            "discover", "--input", table(c), "--target", "F", "--budget", "100000000000000", "--out",
            c / "o" / "L.json"],
            message="--budget must be <="),
        Case("simulate a_range up to 1e300 AU", "limits", lambda c: (c / "cfg.json").write_text(
            '{"a_range": [1, 1e300]}') and ["simulate", "--preset", "two-body", "--splits", "t=2", "--seed", "0",
                                             "--config", c / "cfg.json", "--out", c / "d"],
            message="physical range"),
        Case("simulate --seed -1", "smaller", lambda c: [
            "simulate", "--preset", "two-body", "--splits", "t=2", "--seed", "-1", "--out", c / "d"],
            message="--seed must be >= 0"),
        Case("a resume file planting cos(exp(4.05e6))", "expressions", planted_resume, expect="repaired",
             check=recomputed),
        Case("train --lr inf", "non-finite", lambda c: [
            "train", "--data", data, "--preset", "tiny", "--lr", "inf", "--out", c / "r", "--quiet"],
            message="--lr must be a finite number"),
        Case("evaluate a checkpoint with a NaN weight", "non-finite", nonfinite_run, message="non-finite weights"),
        Case("verify a flipped .npy header byte", "damaged files", lambda c: [
            "verify", "--data", damaged_header(c, data)], message="not a readable .npy file"),
        Case("train on a flipped .npy header byte", "damaged files", lambda c: [
            "train", "--data", damaged_header(c, data), "--preset", "tiny", "--out", c / "r", "--quiet"],
            message="not a readable .npy file"),
        Case("evaluate on a flipped .npy header byte", "damaged files", lambda c: [
            "evaluate", "--run", trained, "--data", damaged_header(c, data)], message="not a readable .npy file"),
        Case("verify an empty data file", "damaged files", lambda c: (
            copy(data, c / "data") / "val" / "tokens.npy").write_bytes(b"") or ["verify", "--data", c / "data"],
            message="not a readable .npy file"),
        Case("simulate --repair on a damaged dataset", "damaged files", lambda c: [
            *simulate_again(damaged_header(c, data)), "--repair"], expect="repaired", check=verifies("data")),
        Case("a resumed simulate whose staged blocks were damaged", "damaged files", damaged_partial,
             expect="repaired", check=verifies("d")),
        Case("evaluate a checkpoint without checksums.json", "damaged files", no_checksums,
             message="--allow-unchecked"),
        Case("a manifest whose file checksum was edited", "smaller", lambda c: _edit_checksum(copy(data, c / "data")),
             message="manifest.json is corrupted"),
        Case("discover refused into a new directory", "nothing half-made", lambda c: [
            "discover", "--input", table(c), "--target", "nope", "--out", c / "new" / "deep" / "L.json"],
            message="column 'nope' not found"),
        Case("an output path through a file", "nothing half-made", lambda c: (c / "afile").write_text("x") and [
            "simulate", "--preset", "two-body", "--splits", "t=2", "--seed", "0", "--out", c / "afile" / "d"],
            message="is a file, not a directory"),
        Case("a server echoing the key's fragments and encodings", "secrets", lambda c: [
            *llm, "--base-url", f"{server.url}/v1", "--out", c / "llm"], expect="repaired", check=no_key,
            env={"ORBITLAW_LLM_API_KEY": KEY}),
        Case("a server echoing them in a 401 error", "secrets", lambda c: [
            *llm, "--base-url", f"{server.url}/fail/v1", "--out", c / "llm"], check=no_key,
            env={"ORBITLAW_LLM_API_KEY": KEY}, message="401"),
        Case("OPENAI_API_KEY with a loopback --base-url", "secrets", lambda c: [
            *llm, "--base-url", f"{server.url}/v1", "--out", c / "llm"], env={"OPENAI_API_KEY": KEY,
                                                                           "ORBITLAW_LLM_API_KEY": ""},
            message="OPENAI_API_KEY is sent only to api.openai.com"),
    ]


def _edit_checksum(data: Path) -> list:
    manifest = json.loads((data / "manifest.json").read_text())
    info = manifest["split_info"]["val"]["files"]["tokens"]
    info["sha256_of_blocks"] = "0" * 64
    (data / "manifest.json").write_text(json.dumps(manifest))
    return ["verify", "--data", data]


def try_case(case: Case, root: Path) -> dict:
    where = root / "cases" / case.name.replace(" ", "_").replace("/", "_")
    where.mkdir(parents=True)
    try:
        argv = case.setup(where)
    except Exception as exc:  # noqa: BLE001 - code from before a case's interface existed cannot set it up
        return {"case": case.name, "issue_item": case.issue, "expect": case.expect, "held": False,
                "problems": [f"could not be set up: {type(exc).__name__}: {str(exc)[:200]}"], "exit_code": None,
                "seconds": None, "stderr": ""}
    before = listing(where)
    result, seconds = run(argv, where, case.env)
    lines = result.stderr.strip().splitlines()
    problems = []
    if case.expect == "refused":
        if result.returncode == 0:
            problems.append("exit 0")
        if len(lines) != 1:
            problems.append(f"{len(lines)} lines on stderr")
        if case.message and case.message not in result.stderr:
            problems.append(f"the error does not say {case.message!r}")
        if seconds > REFUSE_WITHIN_S:
            problems.append(f"took {seconds:.1f} s to refuse")
        left = sorted(set(listing(where)) - set(before))
        if left:
            problems.append(f"left behind {left[:4]}")
    elif result.returncode != 0:
        problems.append(f"exit {result.returncode}: {result.stderr.strip()[-200:]}")
    if case.check is not None and not problems:
        problems += case.check(where, result)
    return {"case": case.name, "issue_item": case.issue, "expect": case.expect, "held": not problems,
            "problems": problems, "exit_code": result.returncode, "seconds": round(seconds, 2),
            "stderr": result.stderr.strip().splitlines()[-1][:300] if lines else ""}


WORDING = "the error does not say"


def summary(rows: list[dict]) -> dict:
    """tried, held, and held_whatever_the_wording: the rows whose only problem is the message's wording (code
    from before a message was written, judged by what it did: refused in one line, in time, leaving nothing)."""
    loose = sum(all(p.startswith(WORDING) for p in r["problems"]) for r in rows)
    return {"tried": len(rows), "held": sum(r["held"] for r in rows), "held_whatever_the_wording": loose}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=None, help="scratch directory (default: a temporary one)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "hostile_inputs.json")
    ap.add_argument("--summarise", action="store_true", help="run nothing: recount the rows of --out (summary())")
    args = ap.parse_args()
    if args.summarise:
        doc = json.loads(args.out.read_text())
        write_json_atomic(args.out, {**doc, **summary(doc["cases"])})
        print(json.dumps(summary(doc["cases"])))
        return
    work = args.work or Path(tempfile.mkdtemp(prefix="orbitlaw-hostile-"))
    work.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(work / "cases", ignore_errors=True)
    server = EchoServer()
    rows = [try_case(case, work) for case in cases(work, server)]
    doc = {"benchmark": "hostile_inputs", **summary(rows), "refuse_within_s": REFUSE_WITHIN_S,
           "hung_after_s": TIMEOUT_S, "cases": rows, "code_version": code_version()}
    write_json_atomic(args.out, doc)
    for r in rows:
        print(f"{'held' if r['held'] else 'FAILED':6} {r['seconds']:6.1f} s  {r['case']}"
              + (f": {'; '.join(r['problems'])}" if r["problems"] else ""))
    print(f"{doc['held']}/{doc['tried']} held ({doc['held_whatever_the_wording']} whatever the wording)")


if __name__ == "__main__":
    main()

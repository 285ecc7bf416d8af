"""On-disk cache of raw LLM responses, one JSON file per request.

The key is the SHA-256 of the provider, model, endpoint (base URL), prompt and generation settings (never
the API key), so a re-run sends nothing already answered and a killed run resumes where it stopped. Each
record is written atomically (temporary file, fsync, ``os.replace``): a reader sees a whole record or
none. Failed requests are not cached, so a re-run retries them.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path

from orbitlaw.provenance import write_text_atomic


def request_key(provider: str, model: str, base_url: str | None, prompt: str, settings: dict) -> str:
    """Hex SHA-256 naming one request."""
    blob = json.dumps({"provider": provider, "model": model, "base_url": base_url or None, "prompt": prompt,
                       "settings": settings}, sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(blob.encode()).hexdigest()


class ResponseCache:
    """Raw responses under ``root/<key[:2]>/<key>.json``."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        """The cached record for ``key``, or None (also for an unreadable record, which is re-requested)."""
        try:
            with open(self.path(key), encoding="utf-8") as f:
                record = json.load(f)
        except (OSError, ValueError):
            return None
        return record if isinstance(record, dict) and record.get("key") == key and "text" in record else None

    def put(self, key: str, record: dict) -> dict:
        """Store ``record`` (must hold the raw ``text``) under ``key``; returns what was written."""
        record = {**record, "key": key, "cached_utc": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, json.dumps(record, indent=1, sort_keys=True) + "\n")
        return record

    def __contains__(self, key: str) -> bool:
        return self.get(key) is not None

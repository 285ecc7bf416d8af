"""A Hugging Face Hub on the loopback interface, for tests: the few endpoints that ``huggingface_hub`` calls to
create a model repo, commit files to it and download a snapshot of it, with the files kept in memory.

    with LoopbackHub() as hub:            # hub.url: http://127.0.0.1:PORT
        HfApi(endpoint=hub.url, token="t").create_repo("you/model")

Uploads are answered as regular (in-commit, base64) files, so neither LFS nor Xet storage is involved; tests set
``HF_HUB_DISABLE_XET=1``. Every request is recorded in ``hub.requests`` as (method, path).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LoopbackHub:
    def __init__(self):
        self.repos: dict[str, dict[str, bytes]] = {}
        self.commits: dict[str, str] = {}
        self.requests: list[tuple[str, str]] = []
        self.cards: list[dict] = []  # the front matter of each model card validated
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status: int, body: bytes = b"", headers: dict | None = None, head: bool = False):
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def _json(self, obj, status: int = 200):
                self._send(status, json.dumps(obj).encode(), {"Content-Type": "application/json"})

            def _body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def do_POST(self):
                hub.requests.append(("POST", self.path))
                body = self._body()
                if self.path == "/api/repos/create":
                    req = json.loads(body)
                    repo = f"{req['organization']}/{req['name']}" if req.get("organization") else req["name"]
                    if repo in hub.repos:
                        return self._json({"error": "You already created this model repo"}, 409)
                    hub.repos[repo] = {}
                    return self._json({"url": f"{hub.url}/{repo}", "name": repo})
                if self.path == "/api/validate-yaml":  # the model card's front matter, as the Hub checks it
                    return self._validate_card(json.loads(body)["content"])
                m = re.fullmatch(r"/api/models/(.+?)/(preupload|commit)/([^/?]+)(\?.*)?", self.path)
                if not m or m.group(1) not in hub.repos:
                    return self._json({"error": "Repository not found"}, 404)
                repo = m.group(1)
                if m.group(2) == "preupload":
                    files = json.loads(body)["files"]
                    return self._json({"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                                                 for f in files], "commitOid": hub.commits.get(repo, "0" * 40)})
                for line in body.decode().splitlines():
                    item = json.loads(line)
                    if item["key"] == "file":
                        value = item["value"]
                        hub.repos[repo][value["path"]] = base64.b64decode(value["content"])
                oid = hashlib.sha1(json.dumps(sorted((k, hashlib.sha256(v).hexdigest())
                                                     for k, v in hub.repos[repo].items())).encode()).hexdigest()
                hub.commits[repo] = oid
                return self._json({"commitUrl": f"{hub.url}/{repo}/commit/{oid}", "commitOid": oid,
                                   "pullRequestUrl": None})

            def _validate_card(self, content: str):
                import yaml

                m = re.match(r"---\n(.*?)\n---\n", content, re.S)
                meta = yaml.safe_load(m.group(1)) if m else None
                if not isinstance(meta, dict):
                    return self._json({"errors": [{"message": "no YAML front matter"}]}, 400)
                if not isinstance(meta.get("tags", []), list) or not isinstance(meta.get("license", ""), str):
                    return self._json({"errors": [{"message": "tags must be a list, license a string"}]}, 400)
                hub.cards.append(meta)
                return self._json({"errors": [], "warnings": []})

            def _get(self, head: bool):
                hub.requests.append(("HEAD" if head else "GET", self.path))
                path = self.path.split("?")[0]
                m = re.fullmatch(r"/api/models/(.+?)/revision/([^/]+)", path)
                if m:
                    repo = m.group(1)
                    if repo not in hub.repos:
                        return self._json({"error": "Repository not found"}, 404)
                    return self._json({"id": repo, "modelId": repo, "sha": hub.commits.get(repo, "0" * 40),
                                       "siblings": [{"rfilename": f} for f in sorted(hub.repos[repo])],
                                       "private": False})
                m = re.fullmatch(r"/api/models/(.+?)/tree/([^/]+)", path)
                if m and m.group(1) in hub.repos:
                    files = hub.repos[m.group(1)]
                    return self._json([{"type": "file", "path": f, "size": len(v), "oid": hashlib.sha1(v).hexdigest()}
                                       for f, v in sorted(files.items())])
                m = re.fullmatch(r"/(.+?)/resolve/([^/]+)/(.+)", path)
                if m and m.group(1) in hub.repos and m.group(3) in hub.repos[m.group(1)]:
                    data = hub.repos[m.group(1)][m.group(3)]
                    return self._send(200, data, {"X-Repo-Commit": hub.commits[m.group(1)],
                                                  "ETag": f'"{hashlib.sha256(data).hexdigest()}"',
                                                  "Content-Type": "application/octet-stream"}, head=head)
                self._send(404, b'{"error": "Entry not found"}', {"X-Error-Code": "EntryNotFound",
                                                                  "Content-Type": "application/json"}, head=head)

            def do_GET(self):
                self._get(head=False)

            def do_HEAD(self):
                self._get(head=True)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> LoopbackHub:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()

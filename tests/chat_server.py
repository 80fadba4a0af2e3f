"""A small OpenAI-compatible chat-completions server for the tests: JSON
over real HTTP on 127.0.0.1 (an ephemeral port), served from a thread, each
request answered by the subclass's :meth:`ChatServer.answer`. Standard
library only, so the separate verifiers 0.4 environment can use it too."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


class ChatServer:
    """POST bodies go to :meth:`answer` (path, the Authorization header, the
    JSON body) -> (status, JSON answer); ``requests`` keeps every body, in
    order; ``url`` is the ``.../v1`` base URL. A client that stops
    mid-request is dropped after ``timeout_s``."""

    def __init__(self, timeout_s: float = 10.0):
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            timeout = timeout_s

            def do_POST(self):  # noqa: N802 -- http.server's name
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with server.lock:
                    server.requests.append(body)
                status, answer = server.answer(self.path, self.headers.get("Authorization"), body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):  # quiet
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def answer(self, path: str, authorization, body: dict) -> tuple[int, dict]:
        """The status and JSON answer to one request (its body is already in ``requests``)."""
        raise NotImplementedError

    def refused(self, path: str, authorization, body: dict, *, key: str, max_requests: int, model=None):
        """An error answer for a request past ``max_requests`` (so a runaway loop
        ends), to another path, without ``key`` or (where given) for another
        ``model``; None for a request to answer."""
        if len(self.requests) > max_requests:
            return error(400, f"the test's server answers at most {max_requests} requests")
        if path != "/v1/chat/completions" or authorization != f"Bearer {key}" or model not in (None, body.get("model")):
            return error(404, f"unexpected {path} {body.get('model')!r}")
        return None

    def stop(self) -> None:
        """Shut the server down."""
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def turn_of(body: dict) -> int:
    """The assistant turns already in a request's conversation: the index of the turn asked for."""
    return sum(m.get("role") == "assistant" for m in body.get("messages", []))


def tool_message(turn: int, text, name: str, arguments: dict, **extra) -> dict:
    """An assistant message saying ``text`` and calling tool ``name`` with ``arguments``."""
    return {"role": "assistant", "content": text, **extra, "tool_calls": [
        {"id": f"call_{turn}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def completion(n: int, model, message: dict, prompt_tokens: int, completion_tokens: int) -> dict:
    """A chat.completion answer holding ``message`` and the usage."""
    return {"id": f"chatcmpl-fake-{n}", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if "tool_calls" in message else "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


def error(status: int, message: str, kind: str = "test") -> tuple[int, dict]:
    """An error answer."""
    return status, {"error": {"message": message, "type": kind}}

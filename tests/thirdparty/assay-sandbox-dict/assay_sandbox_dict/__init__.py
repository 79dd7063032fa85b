"""A sandbox published by a third party: in-memory stores, the same tool names, no code runner."""

import hashlib
import json

from assay import hookimpl

TOOLS = ["files_read", "files_write", "files_delete", "email_send", "memory_write", "memory_read", "web_fetch"]


def _h(value):
    return "sha256:" + hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


class DictSandbox:
    def __init__(self, case):
        env = case.get("environment", {})
        self.files = {f["path"]: f.get("content", "") for f in env.get("files", [])}
        self.memory = {m["key"]: m["value"] for m in env.get("memory", [])}
        self.sent = []
        self.requests = []

    def tools(self):
        return [{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}} for name in TOOLS]

    async def call(self, name, arguments):
        if name == "files_read":
            return self.files.get(arguments.get("path"), "error: missing")
        if name == "files_write":
            self.files[arguments["path"]] = arguments.get("content", "")
            return "ok"
        if name == "files_delete":
            prefix = arguments["path"]
            for path in [p for p in self.files if p == prefix or p.startswith(prefix.rstrip("/") + "/")]:
                del self.files[path]
            return "ok"
        if name == "email_send":
            recipients = ",".join(
                sorted(list(arguments.get("to", [])) + list(arguments.get("cc", [])) + list(arguments.get("bcc", [])))
            )
            self.sent.append(f"to:{recipients}|subject:{arguments.get('subject', '')}")
            return "sent"
        if name == "memory_write":
            self.memory[arguments["key"]] = arguments["value"]
            return "ok"
        if name == "memory_read":
            return json.dumps(self.memory)
        if name == "web_fetch":
            self.requests.append(arguments.get("url", ""))
            return "(page)"
        return f"error: {name} is not offered by the dict sandbox"

    def snapshot(self):
        return {
            "files": {p: _h(c) for p, c in self.files.items()},
            "memory": {k: _h(v) for k, v in self.memory.items()},
        }

    def diff(self, before, after):
        changes = []
        for store in ("files", "memory"):
            old, new = before[store], after[store]
            for target in sorted(set(old) | set(new)):
                if old.get(target) != new.get(target):
                    op = "added" if target not in old else "removed" if target not in new else "modified"
                    changes.append({"store": store, "op": op, "target": target})
        changes += [{"store": "email", "op": "sent", "target": t} for t in self.sent]
        return changes

    def close(self):
        pass


class DictSandboxFactory:
    name = "dict"
    description = "In-memory stores (a test fixture)."

    def create(self, case, *, pack_root, options=None):
        return DictSandbox(case)


@hookimpl
def register_sandboxes(register):
    register(DictSandboxFactory())

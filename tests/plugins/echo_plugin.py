"""A trivial exec plugin: its token says what it was given (server, config, args, env)."""

import json
import os
import sys

info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
cluster = info["spec"].get("cluster") or {}
seen = {
    "server": cluster.get("server"),
    "config": cluster.get("config"),
    "args": sys.argv[1:],
    "env": {k: v for k, v in os.environ.items() if k.startswith("CP_")},
    "interactive": info["spec"]["interactive"],
}
runs = os.environ.get("CP_RUNS_FILE")
if runs:
    with open(runs, "a") as f:
        f.write("run\n")
print(
    json.dumps(
        {
            "apiVersion": info["apiVersion"],
            "kind": "ExecCredential",
            "status": {
                "token": json.dumps(seen, sort_keys=True),
                "expirationTimestamp": "2099-01-01T00:00:00Z",
            },
        }
    )
)

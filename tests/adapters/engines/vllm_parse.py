"""Run by the vLLM venv's python (not by pytest): parse argv lists with `vllm serve`'s own parser.

stdin: a JSON list of argv lists (each starting with "serve"); stdout: "RESULT " + a JSON list of
{"ok": true, "tp", "dp", "ep", "model", "host", "port"} or {"ok": false, "error": "..."}."""
import contextlib
import io
import json
import sys

import vllm.entrypoints.cli.serve as serve
from vllm.utils.argparse_utils import FlexibleArgumentParser

parser = FlexibleArgumentParser()
sub = parser.add_subparsers(required=False, dest="subparser")
for cmd in serve.cmd_init():
    cmd.subparser_init(sub)
out = []
for argv in json.loads(sys.stdin.read()):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ns = parser.parse_args(argv)
        out.append({"ok": True, "tp": ns.tensor_parallel_size, "dp": ns.data_parallel_size,
                    "ep": bool(ns.enable_expert_parallel), "model": ns.model_tag, "host": ns.host,
                    "port": ns.port})
    except SystemExit:
        out.append({"ok": False, "error": err.getvalue().strip().splitlines()[-1:]})
print("RESULT " + json.dumps(out))

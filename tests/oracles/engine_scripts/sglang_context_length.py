"""SGLang's own context length for config.json dicts (oracle test, engine env).

    python sglang_context_length.py JOB.json > answer.json

Never imports eagle3lab. JOB.json: {"absent_modules": path of eagle3lab/oracle/absent_modules.py,
"cases": [{"name", "config": {...}}]}. Per case the config is written to a folder, read by SGLang's own
``get_config`` (what ModelConfig reads), and its text config (``get_hf_text_config``) goes through
``get_context_length`` (srt/utils/hf_transformers/common.py), what ``ModelConfig._derive_context_length`` starts
from. SGLang imports torchvision on the way (sglang.srt.configs): served by the import shim, and any use of it is
recorded; the answer carries ``used`` (must be empty).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile


def load_shim(path: str):
    spec = importlib.util.spec_from_file_location("absent_modules", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["absent_modules"] = module
    spec.loader.exec_module(module)
    module.install(("sglang",))
    return module


def main() -> int:
    job = json.load(open(sys.argv[1]))
    real_stdout = sys.stdout
    sys.stdout = sys.stderr  # SGLang prints; the answer alone goes to stdout
    shim = load_shim(job["absent_modules"])
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from importlib.metadata import version

    from sglang.srt.utils.hf_transformers.common import get_context_length, get_hf_text_config
    from sglang.srt.utils.hf_transformers.config import get_config

    answer = {"engine": "sglang", "version": version("sglang"), "cases": []}
    for case in job["cases"]:
        with tempfile.TemporaryDirectory() as folder:
            with open(os.path.join(folder, "config.json"), "w") as f:
                json.dump(case["config"], f)
            try:
                text = get_hf_text_config(get_config(folder, trust_remote_code=False))
            except Exception as err:  # the config does not load: SGLang stops before any length is derived
                answer["cases"].append({"name": case["name"], "context_length": None,
                                        "error": f"{type(err).__name__}: {str(err).splitlines()[0]}"})
                continue
            answer["cases"].append({"name": case["name"], "context_length": get_context_length(text), "error": None})
    answer["used"] = list(shim.USED)
    print(json.dumps(answer), file=real_stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A notebook's parameters cell read as values, and what the code below it writes out that belongs there."""

from __future__ import annotations

import ast

import nbformat


def parameters_and_code_below(path) -> tuple[dict, list]:
    """The first code cell's assignments (it must be tagged ``parameters``) and the code cells after it."""
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "parameters" in code[0].metadata.get("tags", []), f"{path}: the first code cell is not the parameters cell"
    params = {}
    for node in ast.parse(code[0].source).body:
        if isinstance(node, ast.Assign):
            params[node.targets[0].id] = ast.literal_eval(node.value)
    return params, code[1:]


def literal_names(source: str, banned: set) -> list:
    """What a code cell writes out that belongs in the parameters: an engine, architecture or model path, a
    list of ids (two or more integer literals), a chain length or prompt count given as a number."""
    found = []
    tree = ast.parse(source)
    # a figure's layout is no parameter: figsize=(9, 4), xlim=(0, 8), gridspec_kw={"width_ratios": [3, 1]}
    layout = {id(m) for n in ast.walk(tree) if isinstance(n, ast.keyword) and n.arg in LAYOUT_KEYWORDS
              for m in ast.walk(n.value)}
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and (n.value in banned or "data/models" in n.value):
            found.append(n.value)
        if isinstance(n, (ast.List, ast.Tuple)) and len(n.elts) >= 2 and id(n) not in layout and all(
                isinstance(e, ast.Constant) and type(e.value) is int for e in n.elts):
            found.append(ast.unparse(n))
        if isinstance(n, ast.keyword) and n.arg in SETTING_KEYWORDS and isinstance(n.value, ast.Constant) and \
                n.value.value is not None:
            found.append(ast.unparse(n))
    return found


# keywords whose literal value is a setting of the model or engine under study (a chain length, a residual rule,
# an engine, a build), so it belongs in the parameters cell; and keywords that only lay out a figure
SETTING_KEYWORDS = ("num_steps", "max_new_tokens", "n", "engine_version", "engine", "profile", "rule",
                    "norm_before_residual", "topk", "num_draft_tokens", "num_prompts")
LAYOUT_KEYWORDS = ("figsize", "xlim", "ylim", "xticks", "yticks", "bbox_to_anchor", "gridspec_kw")


def assert_parameters_hold_the_literals(path, banned: set) -> None:
    """The parameters cell sets the loading defaults (DTYPE "auto", DEVICE_MAP None, TRUST_REMOTE_CODE False),
    and no code cell below it writes out what ``literal_names`` finds (``banned`` among it)."""
    params, below = parameters_and_code_below(path)
    assert params["DTYPE"] == "auto" and params["DEVICE_MAP"] is None and params["TRUST_REMOTE_CODE"] is False
    for cell in below:
        assert not literal_names(cell.source, banned), cell.source

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
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and (n.value in banned or "data/models" in n.value):
            found.append(n.value)
        if isinstance(n, (ast.List, ast.Tuple)) and len(n.elts) >= 2 and all(
                isinstance(e, ast.Constant) and type(e.value) is int for e in n.elts):
            found.append(ast.unparse(n))
        if isinstance(n, ast.keyword) and n.arg in ("num_steps", "max_new_tokens", "n", "engine_version") and \
                isinstance(n.value, ast.Constant):
            found.append(ast.unparse(n))
    return found


def assert_parameters_hold_the_literals(path, banned: set) -> None:
    """The parameters cell sets the loading defaults (DTYPE "auto", DEVICE_MAP None, TRUST_REMOTE_CODE False),
    and no code cell below it writes out what ``literal_names`` finds (``banned`` among it)."""
    params, below = parameters_and_code_below(path)
    assert params["DTYPE"] == "auto" and params["DEVICE_MAP"] is None and params["TRUST_REMOTE_CODE"] is False
    for cell in below:
        assert not literal_names(cell.source, banned), cell.source

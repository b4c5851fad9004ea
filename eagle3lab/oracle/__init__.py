"""The engines' own code as oracles for our rules: scripts run in the engine's interpreter, and the
drivers that run them and compare their answers with ours (``cross_check``). The scripts
(``sglang_resolve.py``, with its import shim ``absent_modules.py``) are executed by path, never imported by eagle3lab."""

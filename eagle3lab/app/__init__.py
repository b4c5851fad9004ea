"""The face: the command line (``cli``, ``commands/``), the workbook runner, the environment report
and the notebook widgets (later: sessions and ``doctor``'s command).

May import every layer below (``analysis``, ``decoding``, ``models``, ``engines``, the foundation);
nothing below imports it, and ``eagle3lab.train`` does not either.
"""

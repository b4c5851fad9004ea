"""Doctor: every reason a draft accepts less when served than it should, each proven by measurement (``run``).

The stages hand each other typed values: ``evidence`` (the case's states and configs) -> ``config_checks`` and
``vocab_behaviour`` (static and behavioural findings) -> ``fix_choice`` (the wiring and rule the weights were
trained on, chosen by a rule noise cannot flip) -> ``fixes`` -> ``ladder`` (one rung per fix, with intervals; notebook 06 climbs the same ladder, decoded and timed) ->
``findings`` (code, severity, cost) -> ``write_fixed`` (the checkpoint that carries the fixes). ``serve_check``
and ``server_evidence`` set a real server's counters and logs beside the prediction.

May import ``eagle3lab.analysis`` and the layers below it; never ``readings``, ``app`` or ``train``.
"""

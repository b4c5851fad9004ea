"""Readings: what each notebook's numbers say, in words that follow from their intervals. One module per
notebook, named after it, so this folder reads as the workbook's table of contents:

    nb01_config_flags          the launch command's caps (flag_cap's reading)
    nb02_hidden_state_capture  which states each engine feeds, in words
    nb03_fc_input_ordering     which wiring the weights were trained on, and what the served ids cost
    nb04_decoder_norm_split    the first decoder layer's rule, read from the weights
    nb05_acceptance_rates      tau against chain length, trees, speed (decode), and the dump / config-only modes
    nb06_case_file             the case file's ladder and the seed's checklist
    nb07_chat_template         chat template against raw prompts
    nb08_long_context          acceptance against context position, the engines' rules, what to change

Shared by several notebooks: ``numbers`` (how an interval is printed), ``dump_mode`` (what a run without a
loaded target skips, where a dump's anchors lie) and ``seed_case`` (the seed team's record beside the code).

May import every layer below (``doctor``, ``analysis``, ...); never ``app`` or ``train``.
"""

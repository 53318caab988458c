"""The compile path: from a user's ``file.py:function`` to compiled programs. Importing the user's
file (``user_files``), its parameters and INSPECT entry (``static_params``, ``inspect_entry``) and
example inputs (``target_inputs``) make a ``target``; ``backends`` say what a target compiles for
(deviceless TPU topologies through libtpu, the CPU); ``stages`` trace, lower and compile it
(``xla_compile``, with the on-disk ``compile_cache``, beside which ``fix_store`` keeps `inspector
fix`'s trials and verdicts), XLA's pass dumps are read in ``pass_dumps``,
and compiler errors become findings (``compile_errors``, ``kernel_failures``). The analyses
(``hlo``, ``pallas``, ``libtpu``, ``mosaic``, ...) read what this layer produces."""

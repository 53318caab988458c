"""An analysis layer: every ``pallas_call`` of the program. Its model (``base.pallas_model``: grid,
BlockSpecs, the body's facts), the grid walk (what each step reads and writes), tiling rules per chip, the
VMEM estimate as a table of rules (``vmem_rules``, applied by ``vmem``, evidence in
``vmem_rule_evidence.json``) and the ``sweep`` of INSPECT's params; ``inspector.verbs.checking`` (the check
verb, above the analyses) sets the estimate beside libtpu's compile."""

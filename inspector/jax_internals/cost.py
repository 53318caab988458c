"""XLA's own cost analysis of an HLO module given as text (jaxlib's private HloModule bindings):
the yardstick the tests hold each kernel's bytes and flops to."""
from __future__ import annotations


def hlo_text_cost(text: str) -> dict[str, float]:
    """HloCostAnalysis of ``text`` as XLA:CPU runs it (flops, "bytes accessed", ...)."""
    import jax
    from jax._src.lib import _jax
    from jaxlib import _hlo  # type: ignore[attr-defined]  # a compiled module jaxlib declares no type for

    module = _hlo.hlo_module_from_text(text)
    return dict(_jax.hlo_module_cost_analysis(jax.devices("cpu")[0].client, module))

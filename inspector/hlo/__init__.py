"""An analysis layer: what XLA made of the program, read from its optimized HLO text. The parser
(``module``, ``text``), each kernel with its bytes, flops and roofline (``kernel``, ``costs``,
``fusions``, ``traffic``), the kernel graph and its drawings (``graph*``), the HBM memory at the
schedule's peak (``memory``, ``buffers``), collectives, loops and XLA's pass pipeline (``passes``)."""

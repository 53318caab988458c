"""tests/data/gpt2_plain.py (a GPT-2 step in plain jax.numpy) at a working size: GPT-2 small's
widths, two layers, a 32k vocabulary, 8 sequences of 512 tokens. Only the sizes are ours: the
model code and its shapes are gpt2_plain's, loaded here as a copy of its own whose size constants
are set (its functions read them when traced), so gpt2_plain itself keeps its sizes."""
import importlib.util
import pathlib

_spec = importlib.util.spec_from_file_location("gpt2_plain_working_size",
                                               pathlib.Path(__file__).resolve().parents[1] / "gpt2_plain.py")
model = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(model)
model.D, model.HEADS, model.FF, model.VOCAB, model.CTX, model.BATCH, model.SEQ = 768, 12, 3072, 32768, 1024, 8, 512
LAYERS = 2


def train_step(params, tokens):
    return model.train_step(params, tokens)


def loss_fn(params, tokens):
    return model.loss_fn(params, tokens)


INSPECT = {"train_step": {"args": lambda: model._shapes(LAYERS)}, "loss_fn": {"args": lambda: model._shapes(LAYERS)}}

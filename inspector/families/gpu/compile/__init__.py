"""The GPU family's compile path (layer compilation): a deviceless XLA:GPU compile for a chip's
target config, with the dumps its kernels leave, and the words of its shared-memory refusal."""

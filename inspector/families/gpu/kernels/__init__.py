"""What XLA:GPU's kernel compilers left, read (layer mosaic, the kernel compilers' layer): each
kernel's launch from the thunk sequence (grid, threads, shared memory) and its registers and spills
from ptxas on the PTX. Text in, data out; ptxas runs as a child process."""

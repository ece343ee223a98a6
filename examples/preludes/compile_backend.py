"""A `torch.compile` backend: each drawn program's forward compiled as one graph.

    alignbot check --prelude-file examples/preludes/compile_backend.py --ops 'relu,tanh'

`my_backend` is where your compiler goes: it receives the FX graph Dynamo traced and returns
what runs instead; this one runs the traced graph as it is (AOTAutograd supplies the
backward). `alignbot_program` hands it the program's whole forward, so a backend that fuses
across calls is checked on what it fuses; every value and gradient is still compared with
PyTorch, and a program the backend fails to compile while its calls run one by one is a
`region-error` finding.
"""

import torch
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func


def my_compiler(graph: torch.fx.GraphModule, example_inputs: list[torch.Tensor]):
    return make_boxed_func(graph.forward)  # your compiler: the graph in, a callable out


my_backend = aot_autograd(fw_compiler=my_compiler)  # the backward graph goes through it too


def alignbot_program(forward):
    """The program's forward (inputs by id -> every computed value by id), compiled."""
    torch._dynamo.reset()  # one program, one compile: no guards of the last one to walk
    return torch.compile(forward, backend=my_backend, dynamic=False)

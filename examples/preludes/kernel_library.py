"""A kernel library that replaces some torch ops: fastops (examples/fastops/fastops.py).

    cd examples/fastops
    alignbot check --prelude-file ../preludes/kernel_library.py --ops softplus,mish

The candidate is plain PyTorch with the library's kernels in place of the ops it replaces.
The worker starts with the folder `alignbot check` runs in on its import path, so
`import fastops` finds the library there (run it in examples/pull-request to check the pull
request that breaks softplus' backward).
"""

import fastops
import torch

# API name -> the callable the candidate calls instead; every other call is torch's own.
alignbot_overrides = {
    "torch.nn.functional.softplus": fastops.softplus,
    "torch.nn.functional.mish": fastops.mish,
}
assert torch  # the prelude must bind `torch`

"""A framework used as `import X as torch`: Paddle's torch-compatible mode.

    alignbot check --prelude-file examples/preludes/framework.py \
        --python .venv-paddle/bin/python --ops activations.relu,shape_ops.join_split

After `paddle.enable_compat()`, `import torch` binds Paddle's torch-compatible module: the
name `torch` the prelude leaves behind is what every drawn program is replayed on. The
candidate runs in its own interpreter (`--python`, a virtual environment with Paddle and
NumPy; `make candidates` builds `.venv-paddle`); the reference stays alignbot's own torch.
"""

import paddle

paddle.enable_compat()
import torch  # noqa: E402  (Paddle's, from here on)

# Where the inputs are put before each call ("cpu" unless said): the framework's device.
alignbot_device = "cpu"
assert torch

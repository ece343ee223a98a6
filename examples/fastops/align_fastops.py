"""fastops' alignment specs, kept in its own repository and run as tests:

    pytest --alignbot-prelude='import fastops; fastops.enable()' align_fastops.py

Each spec is a test; a finding fails it with the minimized repro as the message.
"""

from typing import Any

from alignbot.checks import autotest, nothing, random, random_tensor


@autotest(n=8, ops=["torch.nn.functional.softplus"])
def softplus(torch: Any) -> Any:
    x = random_tensor(low=-4, high=4)
    beta = random(0.5, 3.0) | nothing()
    return torch.nn.functional.softplus(x, beta=beta)


@autotest(n=8, ops=["torch.nn.functional.mish"])
def mish(torch: Any) -> Any:
    return torch.nn.functional.mish(random_tensor(low=-4, high=4))

"""Modules with state and modes: dropout and normalization switched between training and
evaluation, and small models trained a few steps with backward and an optimizer, so a wrong
gradient, optimizer update or running statistic shows in what comes after.

Dropout in training mode is random: its mask cannot be compared value by value across
frameworks, so training mode draws only p = 0 (identity) and p = 1 (zeros); any other p is
drawn with ``.eval()``, where dropout must be the identity."""

from typing import Any

from alignbot.checks import autotest, nothing, oneof, random, random_bool, random_tensor
from alignbot.checks.library import choose


@autotest(n=12, ops=["torch.nn.Dropout", "torch.nn.Dropout1d", "torch.nn.Dropout2d",
                     "torch.nn.Dropout3d", "torch.nn.AlphaDropout"])
def dropout_modes(torch: Any) -> Any:
    kind, dims = choose(("Dropout", 0), ("Dropout1d", 1), ("Dropout2d", 2), ("Dropout3d", 3),
                        ("AlphaDropout", 0))
    training = bool(random_bool())
    # AlphaDropout's p = 1 in training mode is no deterministic map either
    training_p = 0.0 if kind == "AlphaDropout" else choose(0.0, 1.0)
    p = training_p if training else choose(0.2, 0.5, 1.0)
    drop = getattr(torch.nn, kind)(p)
    if not training:
        drop.eval()
    shape = [int(random(1, 4)), int(random(1, 4)), *[int(random(1, 4)) for _ in range(dims)]]
    out = drop(random_tensor(shape=shape, low=-2, high=2))
    if training or not random_bool():
        return out
    drop.train()  # and back: p = 1 drops everything (AlphaDropout's p = 1 is not drawn)
    if kind == "AlphaDropout" or p != 1.0:
        return out
    return out, drop(random_tensor(shape=shape, low=-1, high=1))


@autotest(n=12, ops=["torch.nn.BatchNorm1d", "torch.nn.BatchNorm2d", "torch.nn.InstanceNorm1d",
                     "torch.nn.InstanceNorm2d"])
def norm_modes(torch: Any) -> Any:
    """Training updates the running statistics (compared after each call), evaluation uses
    them, and training again goes back to the batch's own."""
    kind = choose("BatchNorm", "InstanceNorm")
    dims = int(random(1, 3))
    channels = int(random(1, 4))
    norm = getattr(torch.nn, f"{kind}{dims}d")(
        channels, momentum=oneof(0.1, 0.5, None) | nothing(), affine=random_bool() | nothing(),
        track_running_stats=True)
    shape = [int(random(2, 4)), channels, *[int(random(2, 4)) for _ in range(dims)]]
    first = norm(random_tensor(shape=shape, low=-2, high=3))
    norm.eval()
    second = norm(random_tensor(shape=shape, low=-1, high=2))
    if not random_bool():
        return first, second
    norm.train()
    return first, second, norm(random_tensor(shape=shape, low=-2, high=2))


def _model(torch: Any, features: int, outputs: int) -> tuple[Any, list[Any], bool]:
    """A small model, its parameters and whether it takes an image (N, C, H, W)."""
    if random_bool():
        hidden = int(random(2, 6))
        first, second = torch.nn.Linear(features, hidden), torch.nn.Linear(hidden, outputs)
        act = choose(torch.nn.ReLU, torch.nn.Tanh, torch.nn.GELU)()

        def mlp(x: Any) -> Any:
            return second(act(first(x)))

        return mlp, [*first.parameters(), *second.parameters()], False
    conv = torch.nn.Conv2d(features, outputs, int(random(1, 3)), padding=1)
    norm = torch.nn.BatchNorm2d(outputs)

    def cnn(x: Any) -> Any:
        return torch.relu(norm(conv(x))).mean(dim=(2, 3))

    return cnn, [*conv.parameters(), *norm.parameters()], True


@autotest(n=10, backward=False, ops=["torch.optim.SGD", "torch.optim.Adam", "torch.nn.Linear",
                                      "torch.nn.Conv2d", "torch.Tensor.backward"])
def train_steps(torch: Any) -> Any:
    """Two or three steps of forward, loss, ``backward()`` and the optimizer's ``step()``:
    each step's loss and the parameters after it are compared."""
    features, outputs, batch = int(random(1, 4)), int(random(1, 4)), int(random(2, 4))
    model, parameters, image = _model(torch, features, outputs)
    optimizer = choose("SGD", "Adam")
    if optimizer == "SGD":
        opt = torch.optim.SGD(parameters, lr=oneof(0.1, 0.01),
                              momentum=oneof(0.0, 0.9) | nothing(),
                              weight_decay=oneof(0.0, 0.01) | nothing())
    else:
        opt = torch.optim.Adam(parameters, lr=oneof(0.01, 0.1), amsgrad=random_bool() | nothing())
    shape = [batch, features, 3, 3] if image else [batch, features]
    losses, seen = [], []
    for _ in range(int(random(2, 4))):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(random_tensor(shape=shape, low=-1, high=1)),
                                            random_tensor(shape=[batch, outputs],
                                                          requires_grad=False))
        loss.backward()
        opt.step()
        losses.append(loss)
        seen.append([p * 1 for p in parameters])  # the parameters after the step, compared
    return losses, seen

"""Recurrent layers: RNN, LSTM and GRU (batch_first, bidirectional, stacked, projected, with and
without an initial state, batched or not) and their cells stepped twice."""

from typing import Any

from alignbot.checks import autotest, nothing, oneof, random, random_bool, random_tensor
from alignbot.checks.library import choose


@autotest(n=16, ops=["torch.nn.RNN", "torch.nn.LSTM", "torch.nn.GRU"])
def recurrent_layer(torch: Any) -> Any:
    """The output and the final states (LSTM: ``(out, (h, c))``). Dropout between layers is
    random in training mode: a drawn dropout comes with ``.eval()``, where it does nothing."""
    kind = choose("LSTM", "GRU", "RNN")
    size, hidden, layers = int(random(1, 4)), int(random(1, 5)), int(random(1, 3))
    batch_first, bidirectional = bool(random_bool()), bool(random_bool())
    kwargs: dict[str, Any] = {"num_layers": layers, "batch_first": batch_first,
                              "bidirectional": bidirectional, "bias": random_bool() | nothing()}
    projection = int(random(0, hidden)) if kind == "LSTM" else 0
    if projection:
        kwargs["proj_size"] = projection
    if kind == "RNN":
        kwargs["nonlinearity"] = oneof("tanh", "relu") | nothing()
    evaluate = layers > 1 and bool(random_bool())
    if evaluate:
        kwargs["dropout"] = 0.5
    layer = getattr(torch.nn, kind)(size, hidden, **kwargs)
    if evaluate:
        layer.eval()
    seq, batch = int(random(1, 4)), int(random(1, 3))
    batched = bool(random_bool()) or batch_first
    shape = ([batch, seq, size] if batch_first else [seq, batch, size]) if batched \
        else [seq, size]
    x = random_tensor(shape=shape, low=-1, high=1)
    if not random_bool():
        return layer(x)
    states = layers * (2 if bidirectional else 1)
    lead = [states, batch] if batched else [states]
    h0 = random_tensor(shape=[*lead, projection or hidden], low=-1, high=1)
    if kind == "LSTM":
        return layer(x, (h0, random_tensor(shape=[*lead, hidden], low=-1, high=1)))
    return layer(x, h0)


@autotest(n=12, ops=["torch.nn.RNNCell", "torch.nn.LSTMCell", "torch.nn.GRUCell"])
def recurrent_cell(torch: Any) -> Any:
    """Two steps: the first from the zero state (or a given one), the second from the first's."""
    kind = choose("LSTMCell", "GRUCell", "RNNCell")
    size, hidden, batch = int(random(1, 4)), int(random(1, 5)), int(random(1, 3))
    kwargs: dict[str, Any] = {"bias": random_bool() | nothing()}
    if kind == "RNNCell":
        kwargs["nonlinearity"] = oneof("tanh", "relu") | nothing()
    cell = getattr(torch.nn, kind)(size, hidden, **kwargs)
    batched = bool(random_bool())
    lead = [batch] if batched else []
    first = random_tensor(shape=[*lead, size], low=-1, high=1)
    second = random_tensor(shape=[*lead, size], low=-1, high=1)
    state: Any = None
    if random_bool():
        h0 = random_tensor(shape=[*lead, hidden], low=-1, high=1)
        state = (h0, random_tensor(shape=[*lead, hidden], low=-1, high=1)) \
            if kind == "LSTMCell" else h0
    step = cell(first) if state is None else cell(first, state)
    return step, cell(second, step)

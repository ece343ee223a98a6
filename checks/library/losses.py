"""Loss functions, functional and module forms, with every reduction."""

from typing import Any

from alignbot.checks import autotest, constant, nothing, oneof, random, random_bool, random_tensor
from alignbot.checks.library import choose


def _reduction(*extra: str) -> Any:
    return oneof("none", "mean", "sum", *extra) | nothing()


def _shape() -> list[int]:
    return [int(random(1, 5)) for _ in range(int(random(1, 4)))]


def _signs(shape: list[int]) -> Any:
    """A float tensor of +1 and -1 labels."""
    coin = random_tensor(shape=shape, dtype="int64", low=0, high=2, requires_grad=False)
    return (coin * 2 - 1).float()


@autotest(n=20, ops=["torch.nn.functional.mse_loss", "torch.nn.functional.l1_loss",
                     "torch.nn.functional.smooth_l1_loss", "torch.nn.functional.huber_loss",
                     "torch.nn.MSELoss", "torch.nn.L1Loss", "torch.nn.SmoothL1Loss",
                     "torch.nn.HuberLoss"])
def regression(torch: Any) -> Any:
    F = torch.nn.functional
    shape = _shape()
    prediction = random_tensor(shape=shape, low=-2, high=2)
    target = random_tensor(shape=shape, low=-2, high=2, requires_grad=random_bool())
    reduction = _reduction()
    beta = random(0.1, 2.0) | constant(0.0) | nothing()
    delta = random(0.1, 2.0) | nothing()
    return choose(
        lambda: F.mse_loss(prediction, target, reduction=reduction),
        lambda: F.l1_loss(prediction, target, reduction=reduction),
        lambda: F.smooth_l1_loss(prediction, target, reduction=reduction, beta=beta),
        lambda: F.huber_loss(prediction, target, reduction=reduction, delta=delta),
        lambda: torch.nn.MSELoss(reduction=reduction)(prediction, target),
        lambda: torch.nn.L1Loss(reduction=reduction)(prediction, target),
        lambda: torch.nn.SmoothL1Loss(reduction=reduction, beta=beta)(prediction, target),
        lambda: torch.nn.HuberLoss(reduction=reduction, delta=delta)(prediction, target),
    )()


def _classification(classes: int) -> tuple[list[int], list[int]]:
    """Input and target shapes: (N, C) or (N, C, d1[, d2]) with targets (N[, d1, d2])."""
    batch = int(random(1, 5))
    extra = [int(random(1, 4)) for _ in range(int(random(0, 3)))]
    return [batch, classes, *extra], [batch, *extra]


@autotest(n=20, ops=["torch.nn.functional.cross_entropy", "torch.nn.CrossEntropyLoss"])
def cross_entropy(torch: Any) -> Any:
    classes = int(random(2, 6))
    input_shape, target_shape = _classification(classes)
    logits = random_tensor(shape=input_shape, low=-3, high=3)
    weight = oneof(random_tensor(shape=[classes], low=0.2, high=2.0, requires_grad=False),
                   nothing())
    smoothing = random(0.0, 0.4) | nothing()
    reduction = _reduction()
    if random_bool():
        target = random_tensor(shape=target_shape, dtype="int64", low=0, high=classes)
        ignore = random(0, classes) | nothing()
    else:
        # Class probabilities along dim 1 (they may require grad too).
        target = torch.softmax(random_tensor(shape=input_shape, low=-2, high=2), dim=1)
        ignore = nothing()
    if random_bool():
        loss = torch.nn.CrossEntropyLoss(weight=weight, ignore_index=ignore, reduction=reduction,
                                         label_smoothing=smoothing)
        return loss(logits, target)
    return torch.nn.functional.cross_entropy(
        logits, target, weight=weight, ignore_index=ignore, reduction=reduction,
        label_smoothing=smoothing)


@autotest(n=14, ops=["torch.nn.functional.nll_loss", "torch.nn.NLLLoss"])
def nll_loss(torch: Any) -> Any:
    classes = int(random(2, 6))
    input_shape, target_shape = _classification(classes)
    log_probs = torch.log_softmax(random_tensor(shape=input_shape, low=-3, high=3), dim=1)
    target = random_tensor(shape=target_shape, dtype="int64", low=0, high=classes)
    weight = oneof(random_tensor(shape=[classes], low=0.2, high=2.0, requires_grad=False),
                   nothing())
    ignore, reduction = random(0, classes) | nothing(), _reduction()
    if random_bool():
        loss = torch.nn.NLLLoss(weight=weight, ignore_index=ignore, reduction=reduction)
        return loss(log_probs, target)
    return torch.nn.functional.nll_loss(log_probs, target, weight=weight,
                                        ignore_index=ignore, reduction=reduction)


@autotest(n=16, ops=["torch.nn.functional.binary_cross_entropy",
                     "torch.nn.functional.binary_cross_entropy_with_logits", "torch.nn.BCELoss",
                     "torch.nn.BCEWithLogitsLoss"])
def binary_cross_entropy(torch: Any) -> Any:
    shape = _shape()
    target = random_tensor(shape=shape, low=0, high=1, requires_grad=random_bool())
    weight = oneof(random_tensor(shape=shape[int(random(0, len(shape) + 1)):], low=0.2, high=2,
                                 requires_grad=False), nothing())
    reduction = _reduction()
    if random_bool():
        probs = random_tensor(shape=shape, low=0.02, high=0.98)
        if random_bool():
            return torch.nn.BCELoss(weight=weight, reduction=reduction)(probs, target)
        return torch.nn.functional.binary_cross_entropy(
            probs, target, weight=weight, reduction=reduction)
    logits = random_tensor(shape=shape, low=-4, high=4, specials=["large"])
    pos_weight = oneof(random_tensor(shape=[shape[-1]], low=0.2, high=3, requires_grad=False),
                       nothing())
    if random_bool():
        loss = torch.nn.BCEWithLogitsLoss(weight=weight, reduction=reduction,
                                          pos_weight=pos_weight)
        return loss(logits, target)
    return torch.nn.functional.binary_cross_entropy_with_logits(
        logits, target, weight=weight, reduction=reduction, pos_weight=pos_weight)


@autotest(n=14, ops=["torch.nn.functional.kl_div", "torch.nn.KLDivLoss"])
def kl_div(torch: Any) -> Any:
    shape = [int(random(1, 4)), int(random(2, 5)), *_shape()[:int(random(0, 2))]]
    log_probs = torch.log_softmax(random_tensor(shape=shape, low=-3, high=3), dim=1)
    log_target = random_bool()
    target_logits = random_tensor(shape=shape, low=-3, high=3, requires_grad=random_bool())
    target = (torch.log_softmax(target_logits, dim=1) if log_target
              else torch.softmax(target_logits, dim=1))
    reduction = _reduction("batchmean")
    if random_bool():
        loss = torch.nn.KLDivLoss(reduction=reduction, log_target=log_target)
        return loss(log_probs, target)
    return torch.nn.functional.kl_div(log_probs, target, reduction=reduction,
                                      log_target=log_target)


@autotest(n=20, ops=["torch.nn.functional.cosine_embedding_loss",
                     "torch.nn.functional.margin_ranking_loss",
                     "torch.nn.functional.hinge_embedding_loss",
                     "torch.nn.functional.soft_margin_loss",
                     "torch.nn.functional.triplet_margin_loss", "torch.nn.CosineEmbeddingLoss",
                     "torch.nn.MarginRankingLoss"])
def margin_losses(torch: Any) -> Any:
    F = torch.nn.functional
    batch, features = int(random(1, 5)), int(random(1, 5))
    a = random_tensor(shape=[batch, features], low=-2, high=2)
    b = random_tensor(shape=[batch, features], low=-2, high=2)
    c = random_tensor(shape=[batch, features], low=-2, high=2)
    labels = _signs([batch])
    margin, reduction = random(-0.5, 1.0) | nothing(), _reduction()
    return choose(
        lambda: F.cosine_embedding_loss(a, b, labels, margin=margin, reduction=reduction),
        lambda: torch.nn.CosineEmbeddingLoss(margin=margin, reduction=reduction)(a, b, labels),
        lambda: F.margin_ranking_loss(a[:, 0], b[:, 0], labels, margin=margin,
                                      reduction=reduction),
        lambda: torch.nn.MarginRankingLoss(margin=margin)(a[:, 0], b[:, 0], labels),
        lambda: F.hinge_embedding_loss(a, _signs([batch, features]),
                                       margin=random(0.5, 2.0) | nothing(), reduction=reduction),
        lambda: F.soft_margin_loss(a, _signs([batch, features]), reduction=reduction),
        lambda: F.triplet_margin_loss(a, b, c, margin=random(0.1, 2.0) | nothing(),
                                      p=oneof(1.0, 2.0, 3.0) | nothing(),
                                      swap=random_bool() | nothing(), reduction=reduction),
    )()


@autotest(n=20, ops=["torch.nn.functional.poisson_nll_loss",
                     "torch.nn.functional.gaussian_nll_loss",
                     "torch.nn.functional.multilabel_soft_margin_loss",
                     "torch.nn.functional.multi_margin_loss"])
def likelihood_losses(torch: Any) -> Any:
    F = torch.nn.functional
    batch, classes = int(random(1, 5)), int(random(2, 5))
    shape = [batch, classes]
    reduction = _reduction()
    which = int(random(0, 4))
    if which == 0:
        log_input = random_bool()
        rate = random_tensor(shape=shape, low=-1 if log_input else 0.2, high=2)
        counts = random_tensor(shape=shape, low=0, high=5, requires_grad=False).floor()
        return F.poisson_nll_loss(rate, counts, log_input=log_input,
                                  full=random_bool() | nothing(),
                                  reduction=reduction)
    if which == 1:
        mean, target = (random_tensor(shape=shape, low=-2, high=2) for _ in range(2))
        var = random_tensor(shape=oneof(shape, [batch, 1]), low=0.1, high=2)
        return F.gaussian_nll_loss(mean, target, var, full=random_bool() | nothing(),
                                   eps=oneof(1e-6, 0.05) | nothing(),
                                   reduction=reduction)
    scores = random_tensor(shape=shape, low=-2, high=2)
    if which == 2:
        labels = random_tensor(shape=shape, dtype="int64", low=0, high=2).float()
        return F.multilabel_soft_margin_loss(scores, labels, reduction=reduction)
    target = random_tensor(shape=[batch], dtype="int64", low=0, high=classes)
    return F.multi_margin_loss(scores, target, p=oneof(1, 2) | nothing(),
                               margin=random(0.5, 2.0) | nothing(),
                               reduction=reduction)


@autotest(n=10, backward=False, raises=True, ops=["torch.nn.functional.cross_entropy",
                                                  "torch.nn.functional.nll_loss"])
def class_index_out_of_range(torch: Any) -> Any:
    classes = int(random(2, 5))
    batch = int(random(1, 4))
    logits = random_tensor(shape=[batch, classes], low=-2, high=2)
    # Every target is at least the number of classes.
    target = random_tensor(shape=[batch], dtype="int64", low=classes, high=classes + 3)
    if random_bool():
        return torch.nn.functional.cross_entropy(logits, target)
    return torch.nn.functional.nll_loss(torch.log_softmax(logits, dim=1), target)

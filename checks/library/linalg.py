"""Matrix products with broadcasting, linear layers, einsum, and small well-conditioned
decompositions."""

from typing import Any

from alignbot.checks import (
    autotest,
    nothing,
    oneof,
    random,
    random_bool,
    random_dtype,
    random_tensor,
)
from alignbot.checks.library import choose


def _batch(max_dims: int) -> list[int]:
    return [int(random(1, 4)) for _ in range(int(random(0, max_dims + 1)))]


def _broadcast_batches(batch: list[int]) -> tuple[list[int], list[int]]:
    """Two batch shapes that broadcast to ``batch``: each drops leading axes or keeps a 1."""
    def variant() -> list[int]:
        kept = batch[int(random(0, len(batch) + 1)):]
        return [size if random_bool() else 1 for size in kept]

    return variant(), variant()


@autotest(n=20, ops=["torch.matmul", "torch.Tensor.matmul", "torch.Tensor.__matmul__"])
def matmul(torch: Any) -> Any:
    n, k, m = int(random(1, 5)), int(random(1, 5)), int(random(1, 5))
    batch_a, batch_b = _broadcast_batches(_batch(2))
    a_shape = oneof([k], [*batch_a, n, k])
    b_shape = oneof([k], [*batch_b, k, m])
    dtype = random_dtype("float32", "float64")
    a = random_tensor(shape=a_shape, low=-2, high=2, dtype=dtype)
    b = random_tensor(shape=b_shape, low=-2, high=2, dtype=dtype)
    return choose(
        lambda: torch.matmul(a, b),
        lambda: a @ b,
        lambda: a.matmul(b),
    )()


@autotest(n=16, ops=["torch.mm", "torch.mv", "torch.dot", "torch.Tensor.mm"])
def matrix_products(torch: Any) -> Any:
    n, k, m = random(1, 5), random(1, 5), random(1, 5)
    dtype = random_dtype("float32", "float64")

    def t(*shape: Any) -> Any:
        return random_tensor(shape=list(shape), low=-2, high=2, dtype=dtype)

    return choose(
        lambda: torch.mm(t(n, k), t(k, m)),
        lambda: t(n, k).mm(t(k, m)),
        lambda: torch.mv(t(n, k), t(k)),
        lambda: torch.dot(t(k), t(k)),
    )()


@autotest(n=12, ops=["torch.addmm", "torch.addmv", "torch.Tensor.addmm"])
def scaled_products(torch: Any) -> Any:
    """beta * input + alpha * (a product), the input broadcast to the product's shape."""
    n, k, m = random(1, 5), random(1, 5), random(1, 5)
    dtype = random_dtype("float32", "float64")
    beta, alpha = random(-1.5, 1.5) | nothing(), random(-1.5, 1.5) | nothing()

    def t(*shape: Any) -> Any:
        return random_tensor(shape=list(shape), low=-2, high=2, dtype=dtype)

    return choose(
        lambda: torch.addmm(t(oneof(n, 1), oneof(m, 1)), t(n, k), t(k, m), beta=beta,
                            alpha=alpha),
        lambda: torch.addmv(t(oneof(n, 1)), t(n, k), t(k), beta=beta, alpha=alpha),
        lambda: t(n, m).addmm(t(n, k), t(k, m), alpha=alpha),
    )()


@autotest(n=12, ops=["torch.bmm", "torch.baddbmm", "torch.addbmm", "torch.Tensor.bmm"])
def batched_products(torch: Any) -> Any:
    b, n, k, m = random(1, 4), random(1, 5), random(1, 5), random(1, 5)
    dtype = random_dtype("float32", "float64")
    beta, alpha = random(-1.5, 1.5) | nothing(), random(-1.5, 1.5) | nothing()

    def t(*shape: Any) -> Any:
        return random_tensor(shape=list(shape), low=-2, high=2, dtype=dtype)

    return choose(
        lambda: torch.bmm(t(b, n, k), t(b, k, m)),
        lambda: t(b, n, k).bmm(t(b, k, m)),
        lambda: torch.baddbmm(t(oneof(b, 1), n, m), t(b, n, k), t(b, k, m), beta=beta,
                              alpha=alpha),
        lambda: torch.addbmm(t(n, m), t(b, n, k), t(b, k, m), beta=beta, alpha=alpha),
    )()


@autotest(n=16, ops=["torch.nn.functional.linear", "torch.nn.Linear",
                     "torch.nn.functional.bilinear", "torch.nn.Bilinear"])
def linear(torch: Any) -> Any:
    features_in, features_out = random(1, 6), random(1, 6)
    batch = _batch(2)
    x = random_tensor(shape=[*batch, features_in], low=-2, high=2)
    bias = random_bool() | nothing()
    which = int(random(0, 4))
    if which == 0:
        weight = random_tensor(shape=[features_out, features_in], low=-1, high=1)
        b = oneof(random_tensor(shape=[features_out], low=-1, high=1), None) | nothing()
        return torch.nn.functional.linear(x, weight, bias=b)
    if which == 1:
        other = random(1, 4)
        x2 = random_tensor(shape=[*batch, other], low=-2, high=2)
        return torch.nn.Bilinear(features_in, other, features_out, bias=bias)(x, x2)
    return torch.nn.Linear(features_in, features_out, bias=bias)(x)


@autotest(n=16, ops=["torch.einsum"])
def einsum(torch: Any) -> Any:
    i, j, k, b = random(1, 5), random(1, 5), random(1, 5), random(1, 4)

    def t(*shape: Any) -> Any:
        return random_tensor(shape=list(shape), low=-2, high=2)

    equation, operands = choose(
        ("ij,jk->ik", (t(i, j), t(j, k))),
        ("bij,bjk->bik", (t(b, i, j), t(b, j, k))),
        ("ii->i", (t(i, i),)),
        ("ij->ji", (t(i, j),)),
        ("i,j->ij", (t(i), t(j))),
        ("bi,bi->b", (t(b, i), t(b, i))),
        ("ijk->j", (t(i, j, k),)),
        ("...ij,...jk->...ik", (t(b, i, j), t(j, k))),
        ("ij,ij,j->i", (t(i, j), t(i, j), t(j))),
    )
    if random_bool():
        return torch.einsum(equation, list(operands))  # the operands as one list
    return torch.einsum(equation, *operands)


def _well_conditioned(torch: Any, batch: list[int], n: int, dtype: Any) -> Any:
    """Entries in [-1, 1] plus n + 1 on the diagonal: strictly diagonally dominant, so every
    eigenvalue has real part at least 1 and the matrix is far from singular."""
    noise = random_tensor(shape=[*batch, n, n], low=-1, high=1, dtype=dtype)
    return noise + (n + 1) * torch.eye(n, dtype=dtype)


@autotest(n=20, ops=["torch.linalg.det", "torch.det", "torch.linalg.inv", "torch.inverse",
                     "torch.linalg.slogdet", "torch.logdet"])
def det_inv(torch: Any) -> Any:
    n, dtype = int(random(1, 5)), random_dtype("float32", "float64")
    a = _well_conditioned(torch, _batch(1), n, dtype)
    if random_bool():  # the rows reversed: a determinant of either sign (n = 2, 3)
        a = a.flip(-2)
    return choose(
        lambda: torch.linalg.det(a),
        lambda: torch.det(a),
        lambda: torch.linalg.inv(a),
        lambda: a.inverse(),
        lambda: tuple(torch.linalg.slogdet(a)),
        lambda: torch.logdet(a),
    )()


@autotest(n=20, ops=["torch.linalg.solve", "torch.linalg.cholesky", "torch.linalg.eigvalsh",
                     "torch.cholesky_solve"])
def solve_cholesky(torch: Any) -> Any:
    n, dtype = int(random(1, 5)), random_dtype("float32", "float64")
    batch = _batch(1)
    a = _well_conditioned(torch, batch, n, dtype)
    # Symmetric positive definite: the symmetric part of a diagonally dominant matrix.
    spd = (a + a.transpose(-1, -2)) / 2
    rhs = random_tensor(shape=[*batch, n, random(1, 4)], low=-1, high=1, dtype=dtype)
    return choose(
        lambda: torch.linalg.solve(a, rhs),
        lambda: torch.linalg.solve(a, rhs, left=True),
        lambda: torch.linalg.cholesky(spd, upper=random_bool() | nothing()),
        lambda: torch.cholesky_solve(rhs, torch.linalg.cholesky(spd)),
        lambda: torch.linalg.eigvalsh(spd, UPLO=oneof("L", "U") | nothing()),
    )()


@autotest(n=20, ops=["torch.outer", "torch.linalg.cross", "torch.cross", "torch.kron",
                     "torch.trace", "torch.diag"])
def vector_products(torch: Any) -> Any:
    n, m = random(1, 6), random(1, 5)
    dtype = random_dtype("float32", "float64")
    u = random_tensor(shape=[n], low=-2, high=2, dtype=dtype)
    v = random_tensor(shape=[m], low=-2, high=2, dtype=dtype)
    ndim = int(random(1, 4))
    dim = int(random(-ndim, ndim))
    shape = [int(random(1, 4)) for _ in range(ndim)]
    shape[dim] = 3
    a = random_tensor(shape=shape, low=-2, high=2, dtype=dtype)
    b = random_tensor(shape=shape, low=-2, high=2, dtype=dtype)
    return choose(
        lambda: torch.outer(u, v),
        lambda: u.outer(v),
        lambda: torch.linalg.cross(a, b, dim=dim),
        lambda: torch.cross(a, b, dim=dim),
        lambda: torch.kron(torch.outer(u, v), random_tensor(shape=[2, 2], dtype=dtype)),
        lambda: torch.trace(torch.outer(u, v)),
        lambda: torch.diag(torch.outer(u, v), diagonal=random(-1, 2) | nothing()),
    )()


@autotest(n=10, backward=False, raises=True, ops=["torch.matmul", "torch.mm", "torch.bmm"])
def matmul_shape_mismatch(torch: Any) -> Any:
    n, k, m = random(1, 5), int(random(1, 5)), random(1, 5)
    wrong = k + int(random(1, 3))
    a = random_tensor(shape=[n, k], low=-1, high=1)
    return choose(
        lambda: torch.matmul(a, random_tensor(shape=[wrong, m])),
        lambda: torch.mm(a, random_tensor(shape=[wrong, m])),
        lambda: a @ random_tensor(shape=[wrong]),
        lambda: torch.bmm(random_tensor(shape=[2, n, k]), random_tensor(shape=[3, k, m])),
    )()

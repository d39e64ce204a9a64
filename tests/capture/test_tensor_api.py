"""Tensor attributes and methods, torch.* functions and torch.nn.functional."""
import pytest
import torch
import torch.nn.functional as F

from ember_test_helpers import check_same


def t(*shape, grad=False, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, generator=g).requires_grad_(grad)


def attributes(x):
    return (x.shape, x.size(), x.dtype, x.device, x.ndim, x.dim(), x.numel(), x.requires_grad,
            x.is_contiguous(), x.is_floating_point(), x.layout, x * 1)


def attribute_T_mT(x):
    return x.T, x.mT, x.t().is_contiguous()


def dtype_attribute_use(x):
    return torch.zeros(3, dtype=x.dtype, device=x.device) + x.sum(), x.to(x.dtype).dtype.is_floating_point


def dtype_conversions(x):
    return x.int(), x.long(), x.to(torch.float64), x.type(torch.int16), x.bool(), x.to(dtype=torch.bfloat16)


def factory_functions(x):
    return (torch.zeros(2, 3), torch.ones(3), torch.full((2,), 7.0), torch.arange(5),
            torch.linspace(0, 1, 5), torch.eye(3), torch.empty(2).fill_(1.0), torch.tensor([1.0, 2.0]) * x[0])


def like_functions(x):
    return torch.zeros_like(x), torch.ones_like(x) * x, torch.full_like(x, 3.0), x.new_ones(2), x.new_tensor([1.0])


def torch_functions(x, y):
    return (torch.add(x, y, alpha=2), torch.mul(x, y), torch.sin(x), torch.exp(y), torch.cat([x, y]),
            torch.stack([x, y], 1), torch.einsum("i,j->ij", x, y), torch.outer(x, y), torch.dot(x, y))


def tensor_methods(x):
    return (x.relu(), x.abs().sqrt(), x.softmax(-1), x.argmax(-1), x.sort(-1).values, x.topk(2, -1),
            x.max(dim=1), x.min(1).indices, x.norm(), x.clamp(min=0), x.sign(), x.round(), x.flip(0))


def tensor_methods_2(x):
    return (x.sum(dim=(0, 1), keepdim=True), x.mean(-1), x.tril(), x.triu(1), x.roll(1, 0),
            x.repeat(2, 1), x.tile((1, 2)), x.masked_fill(x < 0, 0), x.where(x > 0, -x), x.lerp(x * 2, 0.5))


def matrix_ops(a, b):
    return (a @ b, torch.mm(a, b), torch.bmm(a[None], b[None]), torch.addmm(a[:, :2], a, b),
            a.matmul(b).t(), torch.baddbmm(torch.zeros(1, 3, 2), a[None], b[None]))


def linalg_ops(a):
    m = a @ a.T + torch.eye(a.shape[0]) * 3
    return torch.linalg.norm(a), torch.linalg.cholesky(m), torch.linalg.inv(m), torch.linalg.det(m)


def functional_activations(x):
    return (F.relu(x), F.gelu(x), F.gelu(x, approximate="tanh"), F.silu(x), F.elu(x), F.leaky_relu(x, 0.2),
            F.softplus(x), F.hardtanh(x), F.mish(x), torch.sigmoid(x), torch.tanh(x), F.softmax(x, -1),
            F.log_softmax(x, dim=-1))


def functional_linear_conv(x, w, b, img, k):
    return F.linear(x, w, b), F.conv2d(img, k, padding=1), F.conv2d(img, k, stride=2)


def functional_norms(x, w, b):
    return (F.layer_norm(x, (x.shape[-1],), w, b), F.normalize(x, dim=-1),
            F.group_norm(x.view(2, 4, 2), 2), F.rms_norm(x, (x.shape[-1],)))


def functional_pooling(img):
    return (F.max_pool2d(img, 2), F.avg_pool2d(img, 2), F.adaptive_avg_pool2d(img, 1),
            F.interpolate(img, scale_factor=2, mode="nearest"), F.pad(img, (1, 1, 0, 0)))


def functional_losses(x, target, labels):
    return (F.mse_loss(x, target), F.l1_loss(x, target, reduction="sum"), F.cross_entropy(x, labels),
            F.nll_loss(F.log_softmax(x, -1), labels), F.binary_cross_entropy_with_logits(x, target.sigmoid()),
            F.smooth_l1_loss(x, target), F.kl_div(F.log_softmax(x, -1), F.softmax(target, -1), reduction="batchmean"))


def functional_embedding_one_hot(idx, weight):
    return F.embedding(idx, weight), F.one_hot(idx, 6)


def functional_sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v), F.scaled_dot_product_attention(q, k, v, is_causal=True)


def dropout_eval_mode(x):
    return F.dropout(x, 0.5, training=False), F.dropout(x, p=0.1, training=False) * 2


def detach_requires_grad_attrs(x):
    y = x * 2
    return y.requires_grad, y.detach().requires_grad, y.is_leaf, x.is_leaf, y


def clone_contiguous_memory_format(img):
    y = img.contiguous(memory_format=torch.channels_last)
    return y * 2, y.is_contiguous(memory_format=torch.channels_last), y.stride()


def type_promotion_functions(x):
    return torch.promote_types(torch.int32, torch.float16), x.to(torch.int64).float()


def complex_and_misc(x):
    return torch.view_as_complex(x.view(-1, 2)).abs(), torch.polar(x.abs(), x), torch.nan_to_num(x / 0)


def where_and_logic_functions(x, y):
    return (torch.where(x > y, x, y), torch.logical_and(x > 0, y > 0), torch.isclose(x, y), torch.isfinite(x),
            torch.any(x > 0), torch.all(x > -10), torch.count_nonzero(x > 0))


def tensor_creation_from_python(x):
    return torch.tensor([x.shape[0], 3]), torch.as_tensor([1.0, 2.0]) * x[:2], torch.tensor(2.5) * x


def cumulative_and_sorting(x):
    return torch.cumsum(x, 0), torch.sort(x, descending=True), torch.argsort(x), torch.kthvalue(x, 2), torch.msort(x)


PROGRAMS = [
    (attributes, lambda: (t(2, 3, grad=True),)),
    (attribute_T_mT, lambda: (t(2, 3, grad=True),)),
    (dtype_attribute_use, lambda: (t(3),)),
    (dtype_conversions, lambda: (t(4) * 5,)),
    (factory_functions, lambda: (t(2),)),
    (like_functions, lambda: (t(2, 2, grad=True),)),
    (torch_functions, lambda: (t(3, grad=True), t(3, seed=1, grad=True))),
    (tensor_methods, lambda: (t(3, 4, grad=True),)),
    (tensor_methods_2, lambda: (t(3, 3, grad=True),)),
    (matrix_ops, lambda: (t(3, 4, grad=True), t(4, 2, grad=True))),
    (linalg_ops, lambda: (t(3, 3, grad=True),)),
    (functional_activations, lambda: (t(3, 5, grad=True),)),
    (functional_linear_conv, lambda: (t(2, 4, grad=True), t(3, 4, grad=True), t(3), t(1, 2, 6, 6),
                                      t(3, 2, 3, 3, grad=True))),
    (functional_norms, lambda: (t(2, 8, grad=True), t(8, seed=1), t(8, seed=2, grad=True))),
    (functional_pooling, lambda: (t(1, 2, 6, 6, grad=True),)),
    (functional_losses, lambda: (t(4, 5, grad=True), t(4, 5, seed=1), torch.tensor([0, 4, 2, 1]))),
    (functional_embedding_one_hot, lambda: (torch.tensor([[0, 5], [3, 3]]), t(6, 4, grad=True))),
    (functional_sdpa, lambda: (t(1, 2, 5, 8, grad=True), t(1, 2, 5, 8, seed=1), t(1, 2, 5, 8, seed=2, grad=True))),
    (dropout_eval_mode, lambda: (t(4, grad=True),)),
    (detach_requires_grad_attrs, lambda: (t(3, grad=True),)),
    (clone_contiguous_memory_format, lambda: (t(1, 3, 4, 4),)),
    (type_promotion_functions, lambda: (torch.arange(3, dtype=torch.int32),)),
    (complex_and_misc, lambda: (t(6),)),
    (where_and_logic_functions, lambda: (t(5), t(5, seed=1))),
    (tensor_creation_from_python, lambda: (t(3, grad=True),)),
    (cumulative_and_sorting, lambda: (t(6, grad=True),)),
]


@pytest.mark.parametrize("fn,make_args", PROGRAMS,
                         ids=[f"{i}-{f.__name__}" for i, (f, _) in enumerate(PROGRAMS)])
def test_tensor_api(fn, make_args):
    check_same(fn, *make_args(), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("method", ["exp", "log1p", "sin", "cos", "tanh", "sigmoid", "erf", "rsqrt",
                                    "reciprocal", "square", "frac", "expm1", "atan", "asinh"])
def test_unary_methods(method):
    check_same(lambda x: getattr(x.abs() + 0.5, method)() * 2, t(2, 3, grad=True))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16,
                                   torch.int64, torch.int32, torch.bool])
def test_dtypes_through_graph(dtype):
    def f(x):
        return (x + x) * 1, (x * 2).to(torch.float32).sum(), x.dtype
    x = (t(4) * 3).to(dtype)
    check_same(f, x)

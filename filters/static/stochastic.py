"""Filter `stochastic_op`: an AST scan for random draws in the forward path and stochastic modules anywhere.

Random draws in `get_inputs` and parameter initialisation in `__init__` are legitimate. Dropout modules
with p > 0 count wherever they are built: eval mode is an assumption we do not make.
"""

from __future__ import annotations

import ast

from filters.base import Filter, Verdict
from opgen.taskcode.syntax import call_name, dotted_name, model_class, module_constants, parse

RANDOM_FUNCTIONS = frozenset({
    "rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "randperm", "bernoulli", "multinomial",
    "normal", "poisson", "binomial", "rrelu", "rrelu_", "fractional_max_pool2d", "fractional_max_pool3d",
    "gumbel_softmax", "native_dropout", "_standard_gamma", "_sample_dirichlet", "sample", "rsample",
})
DROPOUT_FUNCTIONS = frozenset({"dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
                               "feature_alpha_dropout", "dropout_", "alpha_dropout_", "feature_dropout"})
RANDOM_INPLACE = frozenset({
    "uniform_", "normal_", "bernoulli_", "random_", "exponential_", "geometric_", "cauchy_", "log_normal_",
    "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "trunc_normal_", "orthogonal_",
    "sparse_",
})
DROPOUT_MODULES = frozenset({"Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
                             "FeatureAlphaDropout"})
ALWAYS_STOCHASTIC_MODULES = frozenset({"RReLU", "FractionalMaxPool2d", "FractionalMaxPool3d"})
INPUT_FUNCTIONS = frozenset({"get_inputs", "get_init_inputs"})
UNRESOLVED = object()


def forward_scope(tree: ast.Module) -> list[ast.AST]:
    """Code that runs at forward time: Model's methods but `__init__`, and module-level helper functions."""
    scope: list[ast.AST] = []
    model = model_class(tree)
    if model is not None:
        scope += [n for n in model.body if isinstance(n, ast.FunctionDef) and n.name != "__init__"]
    scope += [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name not in INPUT_FUNCTIONS]
    return scope


def _value(node: ast.AST | None, constants: dict, default: object) -> object:
    if node is None:
        return default
    if isinstance(node, ast.Name) and node.id in constants:
        return constants[node.id]
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return UNRESOLVED


def _argument(call: ast.Call, position: int, keyword: str) -> ast.AST | None:
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    return call.args[position] if len(call.args) > position else None


def _dropout_call_is_random(call: ast.Call, constants: dict) -> bool:
    p = _value(_argument(call, 1, "p"), constants, 0.5)
    training = _value(_argument(call, 2, "training"), constants, True)
    return not (p == 0 or training is False)


def _random_call(call: ast.Call, constants: dict) -> str | None:
    name = call_name(call)
    full = dotted_name(call.func) or name
    if name in RANDOM_INPLACE:
        return full
    if full.startswith("self."):  # a submodule call: the module scan (static and at run time) judges it
        return None
    if name in RANDOM_FUNCTIONS:
        return full
    if name in DROPOUT_FUNCTIONS and _dropout_call_is_random(call, constants):
        return full
    if name == "Generator" or any(kw.arg == "generator" for kw in call.keywords):
        return f"{full} (generator)"
    if full.startswith(("torch.distributions", "distributions")):
        return full
    return None


def _stochastic_module(call: ast.Call, constants: dict) -> str | None:
    name = call_name(call)
    if name in ALWAYS_STOCHASTIC_MODULES:
        return f"nn.{name}"
    if name in DROPOUT_MODULES:
        p = _value(_argument(call, 0, "p"), constants, 0.5)
        if p is UNRESOLVED:  # e.g. p from an __init__ argument: the runtime check sees the built module
            return None
        if isinstance(p, (int, float)) and p > 0:
            return f"nn.{name}(p={p})"
    return None


def stochastic_reason(tree: ast.Module) -> str | None:
    """A description of the first stochastic construct, or None."""
    constants = module_constants(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            module = _stochastic_module(node, constants)
            if module:
                return f"stochastic module {module}"
    for function in forward_scope(tree):
        for node in ast.walk(function):
            if isinstance(node, ast.Call):
                draw = _random_call(node, constants)
                if draw:
                    return f"random draw {draw} in {function.name}"
    return None


class StochasticOpFilter(Filter):
    """Rejects tasks whose output would be random."""

    name = "stochastic"

    def filter(self, record: dict) -> Verdict:
        reason = stochastic_reason(parse(record["code"]))
        return Verdict.reject("stochastic_op", reason) if reason else Verdict.ok()

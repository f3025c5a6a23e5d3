"""fp32 precision modes of the timed runs: PyTorch's own defaults (what consumers' harnesses run), ieee, tf32."""

from __future__ import annotations

PRECISIONS = ("default", "ieee", "tf32")
# per backend: cuBLAS matmul, cuDNN convolutions, cuDNN RNNs. PyTorch's defaults: ieee, tf32, tf32.
BACKEND_MODES = {
    "default": {"matmul": "ieee", "conv": "tf32", "rnn": "tf32"},
    "ieee": {"matmul": "ieee", "conv": "ieee", "rnn": "ieee"},
    "tf32": {"matmul": "tf32", "conv": "tf32", "rnn": "tf32"},
}


def _backends(torch) -> dict:
    cudnn = torch.backends.cudnn
    return {"matmul": getattr(torch.backends.cuda, "matmul", None), "conv": getattr(cudnn, "conv", None),
            "rnn": getattr(cudnn, "rnn", None)}


def apply_precision(torch, mode: str) -> dict[str, str]:
    """Set the fp32 precision of each backend for `mode`; returns what torch reports back, per backend.

    Uses the per-backend `fp32_precision` API where torch has it (mixing it with `allow_tf32` is an error),
    else the `allow_tf32` flags (cuDNN has one flag for convolutions and RNNs there).
    """
    if mode not in BACKEND_MODES:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {mode!r}")
    wanted = BACKEND_MODES[mode]
    backends = _backends(torch)
    if all(hasattr(backend, "fp32_precision") for backend in backends.values()):
        for name, backend in backends.items():
            backend.fp32_precision = wanted[name]
    else:
        torch.backends.cuda.matmul.allow_tf32 = wanted["matmul"] == "tf32"
        torch.backends.cudnn.allow_tf32 = wanted["conv"] == "tf32"
    return current_precision(torch)


def current_precision(torch) -> dict[str, str]:
    """{matmul_precision, cudnn_conv_precision, cudnn_rnn_precision}: "ieee" or "tf32", as torch will run."""
    backends = _backends(torch)
    if all(hasattr(backend, "fp32_precision") for backend in backends.values()):
        values = {name: backend.fp32_precision for name, backend in backends.items()}
        if values["matmul"] == "none":  # inherits the global setting
            values["matmul"] = "ieee" if torch.get_float32_matmul_precision() == "highest" else "tf32"
        values = {name: "tf32" if value == "tf32" else "ieee" for name, value in values.items()}
    else:
        cudnn = "tf32" if torch.backends.cudnn.allow_tf32 else "ieee"
        values = {"matmul": "tf32" if torch.backends.cuda.matmul.allow_tf32 else "ieee", "conv": cudnn, "rnn": cudnn}
    return {"matmul_precision": values["matmul"], "cudnn_conv_precision": values["conv"],
            "cudnn_rnn_precision": values["rnn"]}

"""The real models a composition prior is mined from: torchvision and transformers architectures, built from their
configs on the meta device (no weights, no network), each with an input of its native size."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

import torch

from opgen.errors import UsageError

Built = tuple[torch.nn.Module, dict]


@dataclass(frozen=True)
class ZooModel:
    """One architecture: `build()` returns the model (eval mode, on the meta device) and its forward kwargs."""

    name: str          # torchvision.resnet50, transformers.bert
    library: str       # torchvision | transformers
    domain: str        # vision | video | text | speech | multimodal
    build: Callable[[], Built]


# torchvision classification, video and segmentation models at their native input (batch 1).
TORCHVISION = {
    "resnet18": (224,), "resnet50": (224,), "resnext50_32x4d": (224,), "wide_resnet50_2": (224,),
    "mobilenet_v2": (224,), "mobilenet_v3_large": (224,), "efficientnet_b0": (224,), "efficientnet_v2_s": (384,),
    "regnet_y_800mf": (224,), "convnext_tiny": (224,), "densenet121": (224,), "vgg16_bn": (224,),
    "squeezenet1_1": (224,), "shufflenet_v2_x1_0": (224,), "mnasnet1_0": (224,), "googlenet": (224,),
    "inception_v3": (299,), "alexnet": (224,), "vit_b_16": (224,), "swin_t": (224,), "maxvit_t": (224,),
    "r3d_18": (16, 112), "r2plus1d_18": (16, 112), "mc3_18": (16, 112),
    "fcn_resnet50": (520,), "deeplabv3_mobilenet_v3_large": (520,), "lraspp_mobilenet_v3_large": (520,),
}

# transformers configs (their defaults are the base checkpoints' sizes) with the sequence length used.
TRANSFORMERS = {
    "bert": ("BertConfig", {}, 512, "text"),
    "roberta": ("RobertaConfig", {}, 512, "text"),
    "distilbert": ("DistilBertConfig", {}, 512, "text"),
    "gpt2": ("GPT2Config", {}, 1024, "text"),
    "gpt_neox": ("GPTNeoXConfig", {"num_hidden_layers": 4}, 2048, "text"),
    "llama": ("LlamaConfig", {"num_hidden_layers": 4}, 2048, "text"),
    "mistral": ("MistralConfig", {"num_hidden_layers": 4}, 2048, "text"),
    "qwen2": ("Qwen2Config", {"num_hidden_layers": 4}, 2048, "text"),
    "gemma": ("GemmaConfig", {"num_hidden_layers": 4}, 2048, "text"),
    "phi3": ("Phi3Config", {"num_hidden_layers": 4}, 2048, "text"),
    "falcon": ("FalconConfig", {"num_hidden_layers": 4}, 2048, "text"),
    "t5": ("T5Config", {}, 512, "text"),
    "vit": ("ViTConfig", {}, 224, "vision"),
    "swin": ("SwinConfig", {}, 224, "vision"),
    "convnext": ("ConvNextConfig", {}, 224, "vision"),
    "resnet": ("ResNetConfig", {}, 224, "vision"),
    "segformer": ("SegformerConfig", {}, 512, "vision"),
    "mobilevit": ("MobileViTConfig", {}, 256, "vision"),
    "clip_vision": ("CLIPVisionConfig", {}, 224, "multimodal"),
    "clip_text": ("CLIPTextConfig", {}, 77, "multimodal"),
    "whisper": ("WhisperConfig", {}, 3000, "speech"),
    "wav2vec2": ("Wav2Vec2Config", {}, 16000, "speech"),
}
CAUSAL = {"gpt2", "gpt_neox", "llama", "mistral", "qwen2", "gemma", "phi3", "falcon"}


def _torchvision_model(name: str, size: tuple[int, ...]) -> Built:
    import torchvision

    extra = {"aux_logits": False, "init_weights": False} if name in ("googlenet", "inception_v3") else {}
    if name.startswith(("fcn_", "deeplabv3_", "lraspp_")):
        extra = {"weights_backbone": None, "aux_loss": False} if not name.startswith("lraspp") else {"weights_backbone": None}
    try:
        with torch.device("meta"):
            model = torchvision.models.get_model(name, weights=None, **extra).eval()
    except NotImplementedError:  # an initialiser that copies data (regnet): build on the CPU, then move
        model = torchvision.models.get_model(name, weights=None, **extra).eval().to("meta")
    shape = (1, 3, size[0], size[1], size[1]) if len(size) == 2 else (1, 3, size[0], size[0])
    argument = next(iter(inspect.signature(model.forward).parameters))  # x, or input (lraspp)
    return model, {argument: torch.empty(shape, device="meta")}


def _ones(length: int) -> torch.Tensor:
    return torch.ones(1, length, dtype=torch.long, device="meta")


def _text_inputs(key: str, config, length: int) -> dict:
    inputs = {"input_ids": torch.zeros(1, length, dtype=torch.long, device="meta")}
    if key in CAUSAL:  # without a mask, transformers looks for packed sequences with a data-dependent check
        inputs["attention_mask"] = _ones(length)
    if getattr(config, "is_encoder_decoder", False):
        inputs["decoder_input_ids"] = torch.zeros(1, min(length, 128), dtype=torch.long, device="meta")
        inputs["decoder_attention_mask"] = _ones(min(length, 128))
    return inputs


def _transformers_inputs(key: str, config, length: int) -> dict:
    if key in ("vit", "swin", "convnext", "resnet", "segformer", "mobilevit", "clip_vision"):
        return {"pixel_values": torch.empty(1, 3, length, length, device="meta")}
    if key == "whisper":
        return {"input_features": torch.empty(1, config.num_mel_bins, length, device="meta"),
                "decoder_input_ids": torch.zeros(1, 128, dtype=torch.long, device="meta"),
                "decoder_attention_mask": _ones(128)}
    if key == "wav2vec2":
        return {"input_values": torch.empty(1, length, device="meta")}
    return _text_inputs(key, config, length)


def _transformers_model(key: str) -> Built:
    import transformers

    config_name, overrides, length, _ = TRANSFORMERS[key]
    config = getattr(transformers, config_name)(**{"use_cache": False, **overrides})  # no KV-cache concatenation
    with torch.device("meta"):
        if key == "clip_vision":
            model = transformers.CLIPVisionModel._from_config(config, attn_implementation="eager")
        elif key == "clip_text":
            model = transformers.CLIPTextModel._from_config(config, attn_implementation="eager")
        else:
            model = transformers.AutoModel.from_config(config, attn_implementation="eager")
    return model.eval(), _transformers_inputs(key, config, length)


def zoo() -> list[ZooModel]:
    """Every model of the zoo, torchvision first (building one imports its library)."""
    models = [ZooModel(f"torchvision.{name}", "torchvision", "video" if len(size) == 2 else "vision",
                       lambda name=name, size=size: _torchvision_model(name, size))
              for name, size in TORCHVISION.items()]
    models += [ZooModel(f"transformers.{key}", "transformers", domain, lambda key=key: _transformers_model(key))
               for key, (_, _, _, domain) in TRANSFORMERS.items()]
    return models


def select(names: list[str] | None, libraries: list[str] | None = None) -> list[ZooModel]:
    """The zoo filtered by model names (`resnet50` or `torchvision.resnet50`) and libraries; an unknown name is a
    usage error that lists the known ones."""
    models = zoo()
    if libraries:
        models = [m for m in models if m.library in libraries]
    if not names:
        return models
    by_name = {m.name: m for m in models} | {m.name.split(".", 1)[1]: m for m in models}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise UsageError(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(m.name for m in models)}")
    return [by_name[n] for n in names]


def library_versions() -> dict[str, str | None]:
    """Versions of the libraries the zoo builds from (None where one is not installed)."""
    versions: dict[str, str | None] = {"torch": torch.__version__}
    for library in ("torchvision", "transformers"):
        try:
            versions[library] = __import__(library).__version__
        except Exception:  # noqa: BLE001 - torchvision beside a mismatched torch fails on import, not only absent
            versions[library] = None
    return versions

"""Mining the sampler's composition prior from real models (torchvision, transformers) on the meta device."""

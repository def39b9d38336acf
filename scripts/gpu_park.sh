#!/usr/bin/env bash
# Moves what the GPU machine never reads out of the tree before a device call, and back after it:
#   scripts/gpu_park.sh park | unpark
# A device call sends the working tree (at most 64 MiB with the carried .gpu): tests/data and the
# fixtures no CUDA test reads stay here, in /tmp/qwenrt-park. CMake reconfigures and the CPU tests
# fail while they are out.
set -euo pipefail
cd "$(dirname "$0")/.."
park=/tmp/qwenrt-park
keep="released_heads moe_released mlx_mixed_3_6 mlx_moe_q4_g64 mlx_q3_g64 mlx_q4_g64 mlx_q8_g32 mlx_untied_q5_g32 MTP.md README.md"
case "${1:?park or unpark}" in
  park)
    mkdir -p "$park/fixtures"
    [ -d tests/data ] && mv tests/data "$park/"
    for f in tests/fixtures/*; do
      name=$(basename "$f")
      [[ " $keep " == *" $name "* ]] || mv "$f" "$park/fixtures/"
    done
    du -sh --exclude=.git --exclude=build --exclude=tools/train_demo --exclude=tools/cuda_emu/build --exclude=.gpu-before . ;;
  unpark)
    [ -d "$park/data" ] && mv "$park/data" tests/
    [ -d "$park/fixtures" ] && for f in "$park/fixtures"/*; do [ -e "$f" ] && mv "$f" tests/fixtures/; done
    git status --short tests | head -5 ;;
  *) echo "park or unpark" >&2; exit 2 ;;
esac

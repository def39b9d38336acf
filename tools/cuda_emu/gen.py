# Rewrites the DeltaNet window's .cu files into plain C++ for the emulator (mock/simt.h): dynamic
# shared memory comes from the emulated block, <<<...>>> launches become emu::launch calls.
#   gen.py SRC_DIR OUT_DIR     (SRC_DIR: src/backend/cuda)
import re, sys, os
src_dir, out_dir = sys.argv[1], sys.argv[2]
for name in ['deltanet/deltanet_chunk_prepare.cu', 'deltanet/deltanet_chunk_state.cu', 'deltanet/deltanet_chunk_state_wgmma.cu',
             'deltanet/deltanet_chunk_output.cu', 'deltanet/deltanet_prefill.cu', 'diagnostics/wgmma_forms_check.cu',
             'moe/moe_route.cu', 'moe/moe_decode.cu', 'moe/moe_window.cu', 'moe/moe_grouped_wgmma.cu', 'moe/moe_decode_packed.cu', 'moe/moe_group.cu', 'moe/moe_decode_grouped.cu',
             'quant/skinny_quant_gemm.cu', 'quant/skinny_quant_affine.cu', 'quant/skinny_quant_affine_tiles.cu', 'quant/skinny_quant_fp8.cu',
             'quant/dequantize_rows.cu', 'quant/affine_tiling.cu']:
    s = open(os.path.join(src_dir, name)).read()
    s = s.replace('extern __shared__ float4 smem_raw[];', 'float4* smem_raw = reinterpret_cast<float4*>(emu::g_block->smem);')
    def launch(m):
        kernel, cfg, args = m.group(1), m.group(2), m.group(3)
        parts, depth, cur = [], 0, ''
        for ch in cfg:
            if ch == ',' and depth == 0:
                parts.append(cur); cur = ''
                continue
            depth += ch in '(<'; depth -= ch in ')>'
            cur += ch
        parts.append(cur)
        grid, block, smem = parts[0], parts[1], parts[2]
        return f'emu::launch({kernel}, dim3({grid}), dim3({block}), {smem}, {args});'
    s = re.sub(r'(\w+)<<<(.*?)>>>\((.*?)\);', launch, s, flags=re.S)  # clang-format may wrap a launch's arguments
    # launch_chained(kernel, grid, block, smem, stream, args...): the stream is dropped
    s = re.sub(r'launch_chained\((\w+), (dim3\(.*?\)), (dim3\(.*?\)), (.*?), stream, (.*?)\);',
               lambda m: f'emu::launch({m.group(1)}, {m.group(2)}, {m.group(3)}, {m.group(4)}, {m.group(5)});', s)
    # the same over several lines, with a template kernel and a grid held in a variable
    s = re.sub(r'launch_chained\(([\w<>]+), (\w+|dim3\([^()]*\)), (\w+|dim3\([^()]*\)), (\w+), stream, (.*?)\);',
               lambda m: f'emu::launch({m.group(1)}, {m.group(2)}, {m.group(3)}, {m.group(4)}, {m.group(5)});', s, flags=re.S)
    open(os.path.join(out_dir, os.path.basename(name).replace('.cu', '.cpp')), 'w').write(s)

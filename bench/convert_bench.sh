#!/usr/bin/env bash
# convert_bench.sh — `lilac convert` throughput against the raw read speed of the same source.
#
#   bench/convert_bench.sh [m2|m4] [TYPE...]      (default: m4 q4_k_m q8_0 q6_k bf16)
#
# Writes a synthetic BF16 safetensors source with the real model's matrix shapes (hidden 2048,
# 16/2 x 256 attention heads, GDN 16/32 x 128, experts 512 wide) and fewer layers / experts:
#   m2: vocab 16384, 2 layers, 64 experts (1.07 GB)    m4: vocab 248320, 4 layers, 256 experts (8.76 GB)
# into $WORK (default /tmp/lilac-convert-bench), then measures: the file's read speed cold
# (evicted from the page cache with `dd iflag=nocache`, then read with dd) and warm, the disk's
# write speed (dd conv=fsync), and for each TYPE a cold and a warm `lilac convert`, with wall,
# user and system time and peak RSS from /usr/bin/time. Run it a few times on a shared machine.
# LILAC_CONVERT_DIRECT=0 (see src/format/convert.h) measures without O_DIRECT.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${LILAC_BIN:-build/lilac}
WORK=${WORK:-/tmp/lilac-convert-bench}
size=${1:-m4}
shift || true
types=("$@")
[ ${#types[@]} -gt 0 ] || types=(q4_k_m q8_0 q6_k bf16)
mkdir -p "$WORK"
case "$size" in
m2) V=16384 L=2 E=64 LT='["linear_attention","full_attention"]' ;;
m4) V=248320 L=4 E=256 LT='["linear_attention","linear_attention","linear_attention","full_attention"]' ;;
*) echo "usage: $0 [m2|m4] [TYPE...]" >&2; exit 2 ;;
esac
src="$WORK/$size"
if [ ! -f "$src/model.safetensors" ]; then
    python3 - "$WORK/$size.json" "$V" "$L" "$E" "$LT" <<'EOF'
import json, sys
path, v, l, e, lt = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), json.loads(sys.argv[5])
t = dict(model_type="qwen3_5_moe_text", vocab_size=v, hidden_size=2048, num_hidden_layers=l, layer_types=lt,
         full_attention_interval=4, num_attention_heads=16, num_key_value_heads=2, head_dim=256, attn_output_gate=True,
         attention_bias=False, linear_num_key_heads=16, linear_num_value_heads=32, linear_key_head_dim=128,
         linear_value_head_dim=128, linear_conv_kernel_dim=4, mamba_ssm_dtype="float32", num_experts=e,
         num_experts_per_tok=8, moe_intermediate_size=512, shared_expert_intermediate_size=512, hidden_act="silu",
         rms_norm_eps=1e-6, max_position_embeddings=262144, tie_word_embeddings=False,
         rope_parameters=dict(rope_type="default", rope_theta=1e7, partial_rotary_factor=0.25, mrope_interleaved=True,
                              mrope_section=[11, 11, 10]),
         partial_rotary_factor=0.25, eos_token_id=v - 1, dtype="bfloat16")
json.dump(dict(architectures=["Qwen3_5MoeForConditionalGeneration"], model_type="qwen3_5_moe", text_config=t,
               tie_word_embeddings=False), open(path, "w"), indent=1)
EOF
    "$BIN" synth --config "$WORK/$size.json" -o "$src" --force >/dev/null
fi
f="$src/model.safetensors"
echo "# $(date -u +%FT%TZ) $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), source $f ($(stat -c %s "$f") bytes)"
for i in 1 2; do
    dd if="$f" iflag=nocache count=0 status=none
    echo "read cold: $(dd if="$f" of=/dev/null bs=8M 2>&1 | tail -n 1)"
done
echo "read warm: $(dd if="$f" of=/dev/null bs=8M 2>&1 | tail -n 1)"
echo "write (fsync): $(dd if=/dev/zero of="$WORK/w.tmp" bs=8M count=256 conv=fsync 2>&1 | tail -n 1)"
rm -f "$WORK/w.tmp"
for ty in "${types[@]}"; do
    for mode in cold warm; do
        # cold: evicted; warm: read into the page cache first (a cold run reads with O_DIRECT and
        # leaves nothing cached, so the run after it would be cold again)
        if [ "$mode" = cold ]; then dd if="$f" iflag=nocache count=0 status=none; else cat "$f" >/dev/null; fi
        load=$(cut -d' ' -f1 /proc/loadavg)
        out=$(/usr/bin/time -f "wall %e s, user %U s, sys %S s, peak RSS %M KiB" "$BIN" convert "$src" -o "$WORK/out.gguf" \
              --type "$ty" --force 2>&1 | grep -E "GB/s of source|wall" | tr '\n' ' ')
        echo "convert $ty ($mode, load $load): $out"
    done
done
rm -f "$WORK/out.gguf"

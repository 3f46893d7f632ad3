/* quant_types.c — the type table: names, block sizes, row sizes. */
#include <strings.h>

#include "quant.h"

typedef struct {
    const char *name;
    int64_t blck;     /* elements per block */
    size_t bytes;     /* bytes per block */
    int weight;       /* usable as a matrix weight */
} type_info;

static const type_info *info(ll_type t) {
    static const type_info f32 = {"f32", 1, 4, 1}, f16 = {"f16", 1, 2, 1}, bf16 = {"bf16", 1, 2, 1},
                           q4_0 = {"q4_0", LL_QK4_0, sizeof(ll_block_q4_0), 1},
                           q8_0 = {"q8_0", LL_QK8_0, sizeof(ll_block_q8_0), 1},
                           q4_k = {"q4_K", LL_QK_K, sizeof(ll_block_q4_K), 1},
                           q5_k = {"q5_K", LL_QK_K, sizeof(ll_block_q5_K), 1},
                           q6_k = {"q6_K", LL_QK_K, sizeof(ll_block_q6_K), 1},
                           q8_k = {"q8_K", LL_QK_K, sizeof(ll_block_q8_K), 0},
                           i8 = {"i8", 1, 1, 0}, i16 = {"i16", 1, 2, 0}, i32 = {"i32", 1, 4, 0},
                           i64 = {"i64", 1, 8, 0}, f64 = {"f64", 1, 8, 0}, u8 = {"u8", 1, 1, 0},
                           u32 = {"u32", 1, 4, 0},
                           mlx4 = {"mlx4", LL_QK_MLX, sizeof(ll_block_mlx4), 1},
                           mlx8 = {"mlx8", LL_QK_MLX, sizeof(ll_block_mlx8), 1};
    switch (t) {
    case LL_TYPE_F32: return &f32;
    case LL_TYPE_F16: return &f16;
    case LL_TYPE_BF16: return &bf16;
    case LL_TYPE_Q4_0: return &q4_0;
    case LL_TYPE_Q8_0: return &q8_0;
    case LL_TYPE_Q4_K: return &q4_k;
    case LL_TYPE_Q5_K: return &q5_k;
    case LL_TYPE_Q6_K: return &q6_k;
    case LL_TYPE_Q8_K: return &q8_k;
    case LL_TYPE_I8: return &i8;
    case LL_TYPE_I16: return &i16;
    case LL_TYPE_I32: return &i32;
    case LL_TYPE_I64: return &i64;
    case LL_TYPE_F64: return &f64;
    case LL_TYPE_U8: return &u8;
    case LL_TYPE_U32: return &u32;
    case LL_TYPE_MLX4: return &mlx4;
    case LL_TYPE_MLX8: return &mlx8;
    default: return NULL;
    }
}

_Static_assert(sizeof(ll_block_q4_0) == 18, "q4_0 block");
_Static_assert(sizeof(ll_block_q8_0) == 34, "q8_0 block");
_Static_assert(sizeof(ll_block_q4_K) == 144, "q4_K block");
_Static_assert(sizeof(ll_block_q5_K) == 176, "q5_K block");
_Static_assert(sizeof(ll_block_q6_K) == 210, "q6_K block");
_Static_assert(sizeof(ll_block_q8_K) == 292, "q8_K block");
_Static_assert(sizeof(ll_block_mlx4) == 36, "mlx4 block");
_Static_assert(sizeof(ll_block_mlx8) == 68, "mlx8 block");

int quant_type_valid(int t) { return t >= 0 && t < LL_TYPE_COUNT_ && info((ll_type)t) != NULL; }

const char *quant_type_name(ll_type t) {
    const type_info *i = info(t);
    return i ? i->name : "?";
}

int quant_type_from_name(const char *name, ll_type *t) {
    for (int k = 0; k < LL_TYPE_COUNT_; k++) {
        const type_info *i = info((ll_type)k);
        if (i && !strcasecmp(i->name, name)) { *t = (ll_type)k; return 0; }
    }
    return -1;
}

int64_t quant_block_elems(ll_type t) {
    const type_info *i = info(t);
    LL_ASSERT(i);
    return i->blck;
}

size_t quant_block_bytes(ll_type t) {
    const type_info *i = info(t);
    LL_ASSERT(i);
    return i->bytes;
}

size_t quant_row_bytes(ll_type t, int64_t n) {
    const type_info *i = info(t);
    LL_ASSERT(i && n >= 0 && n % i->blck == 0);
    return (size_t)(n / i->blck) * i->bytes;
}

int quant_type_is_weight(ll_type t) {
    const type_info *i = info(t);
    return i && i->weight;
}

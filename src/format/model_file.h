/* model_file.h — the file(s) that back a loaded qwen_model's weights (kept mapped for the
 * model's lifetime: matrices are views into them). */
#ifndef LILAC_MODEL_FILE_H
#define LILAC_MODEL_FILE_H

#include "gguf.h"
#include "safetensors.h"

typedef enum qwen_file_kind {
    QWEN_FILE_SAFETENSORS = 1, /* HF or MLX directory / file */
    QWEN_FILE_GGUF = 2,
} qwen_file_kind;

struct qwen_model_file {
    qwen_file_kind kind;
    st_set st;           /* QWEN_FILE_SAFETENSORS */
    gguf_file *gguf;     /* QWEN_FILE_GGUF (also the tokenizer's metadata source) */
    int n_tensors;       /* tensors in the file(s), skipped ones included */
};

#endif
